//! Reading the ONNX protobuf graph itself: declared dimensions, the class-score tensor traced
//! back through softmax and shape-only nodes, spatial means, external-data files.

use std::collections::HashMap;
use std::path::PathBuf;
use tract_onnx::pb;

/// A dimension of an ONNX value: `Some(n)` if fixed, `None` if free or absent.
pub(super) fn proto_dims(info: &pb::ValueInfoProto) -> Option<Vec<Option<i64>>> {
    use pb::tensor_shape_proto::dimension::Value;
    let pb::type_proto::Value::TensorType(t) = info.r#type.as_ref()?.value.as_ref()?;
    let shape = t.shape.as_ref()?;
    Some(
        shape
            .dim
            .iter()
            .map(|d| match d.value {
                Some(Value::DimValue(v)) if v > 0 => Some(v),
                _ => None,
            })
            .collect(),
    )
}

pub(super) fn fmt_dims(d: &[Option<i64>]) -> String {
    let parts: Vec<String> = d
        .iter()
        .map(|v| v.map_or("?".to_string(), |v| v.to_string()))
        .collect();
    format!("({})", parts.join(", "))
}

/// Walks back from `output` through softmax and shape-only nodes: (the class-score tensor,
/// the 4-D tensor it is the global spatial mean of, if any).
pub(super) fn trace_scores(graph: &pb::GraphProto, output: &str) -> (String, Option<String>) {
    let producer: HashMap<&str, &pb::NodeProto> = graph
        .node
        .iter()
        .flat_map(|n| n.output.iter().map(move |o| (o.as_str(), n)))
        .collect();
    let mut scores = output.to_string();
    let mut t = output.to_string();
    for _ in 0..64 {
        let Some(node) = producer.get(t.as_str()) else {
            break;
        };
        let Some(first) = node.input.first().cloned() else {
            break;
        };
        match node.op_type.as_str() {
            "Softmax" | "LogSoftmax" => {
                scores = first.clone();
                t = first;
            }
            "Flatten" | "Reshape" | "Squeeze" | "Identity" => t = first,
            "GlobalAveragePool" => return (scores, Some(first)),
            "ReduceMean" if reduces_spatial(graph, node) => return (scores, Some(first)),
            _ => break,
        }
    }
    (scores, None)
}

/// A `ReduceMean` over exactly axes 2 and 3 (attribute `axes`, opset < 18; or the constant
/// second input of opset 18: an initializer, or a `Constant` node as PyTorch's TorchScript
/// exporter writes it).
fn reduces_spatial(graph: &pb::GraphProto, node: &pb::NodeProto) -> bool {
    let ints = |t: &pb::TensorProto| -> Vec<i64> {
        if !t.int64_data.is_empty() {
            t.int64_data.clone()
        } else {
            t.raw_data
                .chunks_exact(8)
                .map(|b| i64::from_le_bytes(b.try_into().expect("8 bytes")))
                .collect()
        }
    };
    let axes: Option<Vec<i64>> = node
        .attribute
        .iter()
        .find(|a| a.name == "axes")
        .map(|a| a.ints.clone())
        .or_else(|| {
            let name = node.input.get(1)?;
            if let Some(init) = graph.initializer.iter().find(|i| &i.name == name) {
                return Some(ints(init));
            }
            let constant = graph
                .node
                .iter()
                .find(|n| n.op_type == "Constant" && n.output.first() == Some(name))?;
            let value = constant.attribute.iter().find(|a| a.name == "value")?;
            value.t.as_ref().map(ints)
        });
    match axes {
        Some(mut a) => {
            for v in a.iter_mut() {
                if *v < 0 {
                    *v += 4;
                }
            }
            a.sort_unstable();
            a == [2, 3]
        }
        None => false,
    }
}

/// The external-data files (`location`s) of the graph's initializers, each once, in order:
/// only relative paths inside the model's folder (tract refuses the others when it parses).
pub(super) fn external_data_files(graph: &pb::GraphProto) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = graph
        .initializer
        .iter()
        .filter(|t| t.data_location == Some(pb::tensor_proto::DataLocation::External as i32))
        .filter_map(|t| t.external_data.iter().find(|e| e.key == "location"))
        .map(|e| PathBuf::from(&e.value))
        .filter(|l| {
            l.components().all(|c| {
                matches!(
                    c,
                    std::path::Component::Normal(_) | std::path::Component::CurDir
                )
            })
        })
        .collect();
    files.sort();
    files.dedup();
    files
}
