//! [`OnnxCnn::from_bytes`] in named steps: the options checked, the protobuf decoded, the
//! external-data files found, the image input and the class-score tensor located, the input
//! side settled, the graph parsed and typed (densely with symbolic H, W, else at the input
//! side), then the plan optimised, the geometry probed and the model named.

use super::error::OnnxError;
use super::graph::{external_data_files, fmt_dims, proto_dims, trace_scores};
use super::guard::guarded;
use super::hash::model_hash;
use super::options::OnnxOptions;
use super::OnnxCnn;
use crate::cnn::Cnn;
use std::collections::HashSet;
use std::path::{Path, PathBuf};
use tract_onnx::model::ParseResult;
use tract_onnx::pb;
use tract_onnx::prelude::*;

impl OnnxCnn {
    /// [`OnnxCnn::load`] on the bytes of an ONNX file; `path` names it in errors and its folder
    /// holds any external tensor data.
    pub fn from_bytes(bytes: &[u8], path: &Path, options: &OnnxOptions) -> Result<Self, OnnxError> {
        let e = Errors {
            path: path.display().to_string(),
        };
        check_options(options, &e)?;
        // The graph's `value_info` (the exporter's shapes of intermediate tensors) is ignored:
        // fisherkit sets the input shape itself (symbolic H, W or the input side), and an
        // exporter's shapes written in its own symbols contradict it. PyTorch's dynamo
        // exporter writes (1, 64, H, W) and (1, 4096, H//32 - 6, W//32 - 6), which tract could
        // not unify with fisherkit's symbols nor with a 224x224 input: its VGG-16 export did
        // not load. tract infers every shape from the input anyway.
        let framework = tract_onnx::onnx().with_ignore_value_info(true);
        let proto = guarded("decoding", || {
            framework.proto_model_for_read(&mut std::io::Cursor::new(bytes))
        })
        .map_err(|m| e.not_onnx(m))?;
        let graph = proto
            .graph
            .as_ref()
            .filter(|g| !g.node.is_empty())
            .ok_or_else(|| e.not_onnx("the file holds no graph".into()))?;
        let external = check_external_data(graph, path, &e)?;
        let input = image_input(graph, &e)?;
        let (scores, pooled_map) = score_tensors(graph, options, &e)?;
        let input_side = input_side(options, input.fixed, &e)?;
        let parsed = parse(&framework, &proto, path, &e)?;
        let outlet = |name: &str| parsed.outlets_by_name.get(name).copied();
        let typing = Typing {
            parsed: &parsed,
            source: outlet(&input.info.name).ok_or_else(|| input.no_image(&e))?,
        };
        let score_outlet = outlet(&scores).expect("traced from a produced tensor");
        let map_outlet = pooled_map.as_deref().and_then(outlet);
        let dense = if options.exact_only || input.fixed.is_some() {
            None
        } else {
            let map_name = pooled_map.clone().unwrap_or_else(|| scores.clone());
            dense_model(&typing, map_outlet.unwrap_or(score_outlet), map_name, &e)?
        };
        let (typed, classes, map_dims, score_tensor) = match dense {
            Some(d) => (d.model, d.classes, Some(d.dims), d.name),
            None => {
                let (m, c) = exact_model(&typing, score_outlet, &scores, input_side, &e)?;
                (m, c, None, scores.clone())
            }
        };
        let plan = guarded("optimising the graph", || {
            typed.into_optimized()?.into_runnable()
        })
        .map_err(|m| e.tract(m))?;
        let (scale, offset) = input_map(options);
        let mut net = OnnxCnn {
            name: String::new(),
            path: path.to_path_buf(),
            options: options.clone(),
            input_side,
            classes,
            score_tensor,
            dense: map_dims.is_some(),
            plan,
            map_dims,
            min_input_side: input_side,
            cell_stride: input_side,
            scale,
            offset,
        };
        net.probe_geometry().map_err(|m| e.tract(m))?;
        let hash = model_hash(bytes, path, &external, &net).map_err(|x| e.external(x))?;
        net.name = format!(
            "onnx:{}#{hash:016x}",
            path.file_name()
                .map_or_else(|| e.path.clone(), |f| f.to_string_lossy().into_owned()),
        );
        Ok(net)
    }

    /// A dense model's smallest input side ([`OnnxCnn::probe_min_side`]) and cell stride (from
    /// the map sizes at the input side and 5 times it, rounded); nothing for an exact-only one.
    fn probe_geometry(&mut self) -> Result<(), String> {
        if !self.dense {
            return Ok(());
        }
        let input_side = self.input_side;
        self.min_input_side = self.probe_min_side()?;
        if let (Some(a), Some(b)) = (
            self.map_size(input_side, input_side),
            self.map_size(5 * input_side, 5 * input_side),
        ) {
            if b.0 > a.0 {
                let s = (4 * input_side) as f64 / (b.0 - a.0) as f64;
                self.cell_stride = (s.round() as usize).max(1);
            }
        }
        Ok(())
    }
}

/// The errors of loading one model file, each naming it.
struct Errors {
    path: String,
}

impl Errors {
    fn options(&self, message: String) -> OnnxError {
        OnnxError::Options {
            path: self.path.clone(),
            message,
        }
    }
    fn not_onnx(&self, message: String) -> OnnxError {
        OnnxError::NotOnnx {
            path: self.path.clone(),
            message,
        }
    }
    fn tract(&self, message: String) -> OnnxError {
        OnnxError::Tract {
            path: self.path.clone(),
            message,
        }
    }
    fn external(&self, (file, source): (PathBuf, std::io::Error)) -> OnnxError {
        OnnxError::ExternalData {
            path: self.path.clone(),
            file: file.display().to_string(),
            source,
        }
    }
    fn not_classifier(&self, name: &str, shape: String) -> OnnxError {
        OnnxError::NotClassifier {
            path: self.path.clone(),
            name: name.to_string(),
            shape,
        }
    }
}

/// Mean finite, std finite and > 0, input side ≥ 1.
fn check_options(options: &OnnxOptions, e: &Errors) -> Result<(), OnnxError> {
    if let Some(i) = (0..3).find(|&i| !(options.std[i].is_finite() && options.std[i] > 0.0)) {
        return Err(e.options(format!(
            "std {:?}: channel {i} must be finite and > 0",
            options.std
        )));
    }
    if !options.mean.iter().all(|m| m.is_finite()) {
        return Err(e.options(format!("mean {:?} must be finite", options.mean)));
    }
    if options.input_side == Some(0) {
        return Err(e.options("input side must be >= 1".into()));
    }
    Ok(())
}

/// Files holding tensors stored outside the model (ONNX external data, e.g. the
/// `.onnx.data` file of PyTorch's exporter), each checked to open: hashed with the model for
/// its name.
fn check_external_data(
    graph: &pb::GraphProto,
    path: &Path,
    e: &Errors,
) -> Result<Vec<PathBuf>, OnnxError> {
    let external = external_data_files(graph);
    let model_dir = path.parent().unwrap_or(Path::new(""));
    for f in &external {
        let file = model_dir.join(f);
        std::fs::File::open(&file).map_err(|x| e.external((file, x)))?;
    }
    Ok(external)
}

/// The model's image input, and what the error says when there is none.
struct ImageInput<'g> {
    info: &'g pb::ValueInfoProto,
    /// Its (H, W) when both are fixed.
    fixed: Option<(usize, usize)>,
    /// The graph's inputs as the error lists them.
    found: String,
}

impl ImageInput<'_> {
    fn no_image(&self, e: &Errors) -> OnnxError {
        no_image(&self.found, e)
    }
}

fn no_image(found: &str, e: &Errors) -> OnnxError {
    OnnxError::NoImageInput {
        path: e.path.clone(),
        found: found.to_string(),
    }
}

/// The one graph input that is not an initializer, of shape (1 or free, 3 or free, H, W).
fn image_input<'g>(graph: &'g pb::GraphProto, e: &Errors) -> Result<ImageInput<'g>, OnnxError> {
    let inits: HashSet<&str> = graph.initializer.iter().map(|i| i.name.as_str()).collect();
    let inputs: Vec<&pb::ValueInfoProto> = graph
        .input
        .iter()
        .filter(|i| !inits.contains(i.name.as_str()))
        .collect();
    let describe = |i: &pb::ValueInfoProto| {
        format!(
            "`{}` {}",
            i.name,
            proto_dims(i).map_or("(no shape)".into(), |d| fmt_dims(&d))
        )
    };
    let found = match inputs.as_slice() {
        [] => "it has none".to_string(),
        many => format!(
            "it has {}",
            many.iter()
                .map(|i| describe(i))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    };
    let [input] = inputs.as_slice() else {
        return Err(no_image(&found, e));
    };
    let dims = proto_dims(input).ok_or_else(|| no_image(&found, e))?;
    if dims.len() != 4 || dims[0].is_some_and(|n| n != 1) || dims[1].is_some_and(|c| c != 3) {
        return Err(no_image(&found, e));
    }
    let fixed = match (dims[2], dims[3]) {
        (Some(h), Some(w)) => Some((h as usize, w as usize)),
        _ => None,
    };
    Ok(ImageInput {
        info: input,
        fixed,
        found,
    })
}

/// The class-score tensor ([`OnnxOptions::output`], else the first graph output) and, traced
/// back from it, (the scores before any softmax, the 4-D map they are the spatial mean of).
fn score_tensors(
    graph: &pb::GraphProto,
    options: &OnnxOptions,
    e: &Errors,
) -> Result<(String, Option<String>), OnnxError> {
    let output_names: Vec<&str> = graph.output.iter().map(|o| o.name.as_str()).collect();
    let produced: HashSet<&str> = graph
        .node
        .iter()
        .flat_map(|n| n.output.iter().map(String::as_str))
        .collect();
    if let Some(bad) = output_names.iter().find(|o| !produced.contains(**o)) {
        return Err(e.not_onnx(format!("graph output `{bad}` is produced by no node")));
    }
    let wanted = match &options.output {
        Some(n) => n.clone(),
        None => output_names
            .first()
            .ok_or_else(|| e.not_onnx("the graph has no output".into()))?
            .to_string(),
    };
    if !produced.contains(wanted.as_str()) {
        return Err(OnnxError::MissingOutput {
            path: e.path.clone(),
            name: wanted,
            outputs: output_names
                .iter()
                .map(|o| format!("`{o}`"))
                .collect::<Vec<_>>()
                .join(", "),
        });
    }
    Ok(trace_scores(graph, &wanted))
}

/// The side patches are resized to: [`OnnxOptions::input_side`] (which a fixed input must
/// match), else the fixed input's side (square only), else 224.
fn input_side(
    options: &OnnxOptions,
    fixed: Option<(usize, usize)>,
    e: &Errors,
) -> Result<usize, OnnxError> {
    Ok(match (options.input_side, fixed) {
        (Some(s), Some((h, w))) if (h, w) != (s, s) => {
            return Err(e.options(format!(
                "the model's input is fixed at {h}x{w}; input side {s} does not match it"
            )))
        }
        (Some(s), _) => s,
        (None, Some((h, w))) if h == w => h,
        (None, Some((h, w))) => {
            return Err(e.options(format!(
                "the model's input is fixed at {h}x{w}, not square: fisherkit's patches are \
                 square"
            )))
        }
        (None, None) => 224,
    })
}

/// The graph parsed once (external data from the model's folder), every input resolved.
fn parse(
    framework: &tract_onnx::Onnx,
    proto: &pb::ModelProto,
    path: &Path,
    e: &Errors,
) -> Result<ParseResult, OnnxError> {
    let dir = path.parent().and_then(|d| d.to_str()).map(str::to_string);
    guarded("parsing the graph", || {
        let r = framework.parse(proto, dir.as_deref())?;
        if !r.unresolved_inputs.is_empty() {
            return Err(TractError::msg(format!(
                "unresolved inputs {:?}",
                r.unresolved_inputs
            )));
        }
        Ok(r)
    })
    .map_err(|m| e.not_onnx(m))
}

/// The parsed graph and its image input, typed for one output at one input size.
struct Typing<'a> {
    parsed: &'a ParseResult,
    source: OutletId,
}

impl Typing<'_> {
    /// The graph from the image input (1, 3, H, W) with `hw` = (H, W) to `out` alone, typed
    /// and decluttered.
    fn build(&self, out: OutletId, hw: (TDim, TDim)) -> Result<TypedModel, String> {
        let mut m = self.parsed.model.clone();
        guarded("typing the graph", || {
            m.set_input_outlets(&[self.source])?;
            let shape = vec![TDim::Val(1), TDim::Val(3), hw.0.clone(), hw.1.clone()];
            m.set_input_fact(0, f32::fact(shape).into())?;
            m.select_output_outlets(&[out])?;
            m.set_outlet_fact(out, InferenceFact::default())?;
            m.into_typed()?.into_decluttered()
        })
    }
}

fn shape_of(m: &TypedModel) -> Vec<TDim> {
    m.output_fact(0)
        .map(|f| f.shape.iter().cloned().collect())
        .unwrap_or_default()
}

fn fmt_shape(s: &[TDim]) -> String {
    format!(
        "({})",
        s.iter()
            .map(|d| d.to_string())
            .collect::<Vec<_>>()
            .join(", ")
    )
}

/// C when `s` is (1, C, …) of rank `rank` with a known C ≥ 2.
fn classes_of(s: &[TDim], rank: usize) -> Option<usize> {
    (s.len() == rank && s[0].to_i64().ok() == Some(1))
        .then(|| s[1].to_i64().ok())
        .flatten()
        .filter(|&c| c >= 2)
        .map(|c| c as usize)
}

/// A dense model: its typed graph, classes, score-map dims (H, W symbols, h, w) and the
/// map's tensor name.
struct Dense {
    model: TypedModel,
    classes: usize,
    dims: (Symbol, Symbol, TDim, TDim),
    name: String,
}

/// The graph typed with symbolic H, W to the 4-D map at `map_out` (named `map_name`): `None`
/// when it does not type or the map is not 4-D; an error when it is 4-D but not class scores.
fn dense_model(
    typing: &Typing<'_>,
    map_out: OutletId,
    map_name: String,
    e: &Errors,
) -> Result<Option<Dense>, OnnxError> {
    let sh = typing.parsed.model.sym("fisherkit_H");
    let sw = typing.parsed.model.sym("fisherkit_W");
    let Ok(m) = typing.build(map_out, (sh.clone().into(), sw.clone().into())) else {
        return Ok(None);
    };
    let s = shape_of(&m);
    match classes_of(&s, 4) {
        Some(classes) => Ok(Some(Dense {
            model: m,
            classes,
            dims: (sh, sw, s[2].clone(), s[3].clone()),
            name: map_name,
        })),
        None if s.len() == 4 => Err(e.not_classifier(&map_name, fmt_shape(&s))),
        None => Ok(None),
    }
}

/// The graph typed at `side`×`side` to the scores at `score_out` (named `scores`), which
/// must be (1, C) or (1, C, h, w) with fixed h, w: the model and C.
fn exact_model(
    typing: &Typing<'_>,
    score_out: OutletId,
    scores: &str,
    side: usize,
    e: &Errors,
) -> Result<(TypedModel, usize), OnnxError> {
    let side = side as i64;
    let m = typing
        .build(score_out, (TDim::Val(side), TDim::Val(side)))
        .map_err(|m| e.tract(m))?;
    let s = shape_of(&m);
    let c = match s.len() {
        2 => classes_of(&s, 2),
        4 => classes_of(&s, 4).filter(|_| s[2].to_i64().is_ok() && s[3].to_i64().is_ok()),
        _ => None,
    }
    .ok_or_else(|| e.not_classifier(scores, fmt_shape(&s)))?;
    Ok((m, c))
}

/// The pixel→input affine map per channel, `x = pixel · scale + offset`:
/// x = (pixel / 255 − mean) / std.
fn input_map(options: &OnnxOptions) -> ([f32; 3], [f32; 3]) {
    let mut scale = [0.0f32; 3];
    let mut offset = [0.0f32; 3];
    for c in 0..3 {
        // x = (pixel / 255 - mean) / std
        scale[c] = 1.0 / (255.0 * options.std[c]);
        offset[c] = -options.mean[c] / options.std[c];
    }
    (scale, offset)
}
