//! Any ONNX image classifier as the pipeline's CNN ([`OnnxCnn`]), run by
//! [tract](https://crates.io/crates/tract-onnx) (pure Rust; cargo feature `onnx`).
//!
//! # What a model must be
//! One image input of rank 4, (1, 3, H, W) (N may be free, it is fixed to 1; an unknown channel
//! count is fixed to 3), and a class-score tensor ([`OnnxOptions::output`], default the graph's
//! first output) of shape (1, C) or (1, C, h, w) with C ≥ 2.
//!
//! # Dense or exact patches
//! fisherkit walks back from the chosen output through `Softmax`/`LogSoftmax` and shape-only
//! nodes (`Flatten`, `Reshape`, `Squeeze`, `Identity`):
//! * the class scores are the tensor *before* any `Softmax`: the logits. Descriptors are
//!   log-softmax of the scores (natural parameters up to a constant), so logits and
//!   log-probabilities give the same descriptors while probabilities would not;
//! * if the walk reaches a `GlobalAveragePool` (or a `ReduceMean` over axes 2, 3) of a 4-D
//!   tensor, or the output itself is 4-D, and the image input has a free H×W, the model is
//!   **dense**: that 4-D tensor (1, C, h, w) is the class-score map, one descriptor per cell,
//!   like the built-in networks (whose logits are also the spatial mean of their score map);
//! * otherwise (a fixed input size, or layers between the last 4-D tensor and the scores that
//!   are not a global mean, e.g. VGG's fully connected classifier) the model is **exact-only**:
//!   [`Cnn::dense`] is `false` and [`crate::extract`] classifies every patch on its own
//!   (exact patches) even when dense patches were asked for.
//!
//! # Preprocessing
//! The (H, W, 3) RGB 0–255 image becomes the (3, H, W) input
//! $x_c = (\mathrm{pixel}_c / 255 - \mathrm{mean}_c) / \mathrm{std}_c$ in the model's channel
//! order ([`OnnxOptions::bgr`]); mean and std are on the 0–1 scale, in the model's channel
//! order (default: torchvision's ImageNet values, RGB). [`OnnxOptions::squeezenet`] and
//! [`OnnxOptions::efficientnet_lite0`] reproduce the built-in networks' preprocessing.
//!
//! # Geometry
//! * input side ([`Cnn::input_side`], the side a patch is resized to): [`OnnxOptions::input_side`],
//!   else the model's input side if it is fixed and square, else 224;
//! * score-map size: tract's shape inference with symbolic H and W, evaluated per size;
//! * smallest input side: probed by running the model on zero inputs (binary search);
//! * cell stride: from the map sizes at the input side and 5 times it, rounded;
//! * receptive field: not derived from the graph (informational only):
//!   [`OnnxOptions::receptive_field`], else the input side.

use crate::cnn::{sealed, Cnn};
use crate::error::CnnError;
use crate::image::{check_image, ImageError};
use fisherkit::linalg::Par;
use ndarray::{Array3, ArrayView3, Axis, Ix4};
use std::collections::HashMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use tract_onnx::pb;
use tract_onnx::prelude::*;

/// Errors of loading an ONNX model: each names the file and the problem.
#[derive(Debug, thiserror::Error)]
pub enum OnnxError {
    #[error("cannot read the ONNX model {path}: {source}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}: cannot read its external data file {file}: {source}")]
    ExternalData {
        path: String,
        file: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{path} is not a readable ONNX model (truncated, or not ONNX at all): {message}")]
    NotOnnx { path: String, message: String },
    #[error(
        "{path}: no 4-D image input: the model needs one input of shape (1, 3, H, W), {found}"
    )]
    NoImageInput { path: String, found: String },
    #[error("{path}: no tensor named `{name}` (graph outputs: {outputs})")]
    MissingOutput {
        path: String,
        name: String,
        outputs: String,
    },
    #[error(
        "{path}: output `{name}` is not a classifier: expected class scores (1, C) or a \
             class-score map (1, C, h, w) with C >= 2, got shape {shape}"
    )]
    NotClassifier {
        path: String,
        name: String,
        shape: String,
    },
    #[error("{path}: {message}")]
    Options { path: String, message: String },
    #[error("{path}: tract cannot run this model: {message}")]
    Tract { path: String, message: String },
}

/// How an [`OnnxCnn`] preprocesses images and which tensor holds the class scores.
#[derive(Debug, Clone, PartialEq)]
pub struct OnnxOptions {
    /// Side a patch is resized to (the classification input); `None`: the model's fixed input
    /// side if it has one, else 224.
    pub input_side: Option<usize>,
    /// Per-channel mean on the 0–1 scale, in the model's channel order.
    pub mean: [f32; 3],
    /// Per-channel standard deviation on the 0–1 scale, in the model's channel order.
    pub std: [f32; 3],
    /// The model takes BGR (Caffe) rather than RGB channels.
    pub bgr: bool,
    /// Name of the class-score tensor (a graph output or any tensor of the graph); `None`: the
    /// graph's first output.
    pub output: Option<String>,
    /// Run every patch on its own even when the model could run densely.
    pub exact_only: bool,
    /// Receptive field reported by [`Cnn::receptive_field`] (not used in computations);
    /// `None`: the input side.
    pub receptive_field: Option<usize>,
}

impl Default for OnnxOptions {
    /// torchvision's ImageNet preprocessing: RGB, mean (0.485, 0.456, 0.406),
    /// std (0.229, 0.224, 0.225); the model's input side or 224; the first output.
    fn default() -> Self {
        Self {
            input_side: None,
            mean: [0.485, 0.456, 0.406],
            std: [0.229, 0.224, 0.225],
            bgr: false,
            output: None,
            exact_only: false,
            receptive_field: None,
        }
    }
}

impl OnnxOptions {
    /// The built-in SqueezeNet's preprocessing (BGR, 0–255 minus
    /// [`crate::image::MEAN_BGR`]), input side 227: for an ONNX export of SqueezeNet v1.1 such
    /// as `scripts/export_onnx.py` writes.
    pub fn squeezenet() -> Self {
        let m = crate::image::MEAN_BGR;
        Self {
            input_side: Some(crate::net::INPUT_SIDE),
            mean: [m[0] / 255.0, m[1] / 255.0, m[2] / 255.0],
            std: [1.0 / 255.0; 3],
            bgr: true,
            receptive_field: Some(crate::net::RECEPTIVE_FIELD),
            ..Self::default()
        }
    }

    /// The built-in EfficientNet-Lite0's preprocessing (RGB, (x − 127) / 128 of 0–255 values),
    /// input side 224.
    pub fn efficientnet_lite0() -> Self {
        use crate::efficientnet::{EFFNET_MEAN_RGB, EFFNET_STD_RGB};
        Self {
            input_side: Some(crate::efficientnet::EFFNET_INPUT_SIDE),
            mean: [EFFNET_MEAN_RGB / 255.0; 3],
            std: [EFFNET_STD_RGB / 255.0; 3],
            bgr: false,
            receptive_field: Some(crate::efficientnet::EFFNET_RECEPTIVE_FIELD),
            ..Self::default()
        }
    }
}

type Plan = TypedRunnableModel;

/// An ONNX image classifier usable wherever a built-in network is ([`Cnn`]): see the module
/// docs for the models it accepts, dense against exact patches and the preprocessing.
#[derive(Clone)]
pub struct OnnxCnn {
    name: String,
    path: PathBuf,
    options: OnnxOptions,
    input_side: usize,
    classes: usize,
    /// Name of the tensor the scores are read from (the map when dense).
    score_tensor: String,
    dense: bool,
    /// Dense: the plan with symbolic H, W; exact: the plan at input_side × input_side.
    plan: Arc<Plan>,
    /// Dense: the score-map dims (C, h, w) as expressions of H, W.
    map_dims: Option<(Symbol, Symbol, TDim, TDim)>,
    min_input_side: usize,
    cell_stride: usize,
    /// The pixel→input affine map per input channel: x = pixel · scale + offset.
    scale: [f32; 3],
    offset: [f32; 3],
}

impl std::fmt::Debug for OnnxCnn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OnnxCnn")
            .field("name", &self.name)
            .field("path", &self.path)
            .field("options", &self.options)
            .field("input_side", &self.input_side)
            .field("classes", &self.classes)
            .field("score_tensor", &self.score_tensor)
            .field("dense", &self.dense)
            .finish_non_exhaustive()
    }
}

thread_local! {
    /// Set while this thread runs tract under [`guarded`]: its panics are reported as errors,
    /// so the panic hook stays quiet for them.
    static IN_TRACT: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Wraps the process's panic hook once so that it says nothing for a panic caught by
/// [`guarded`] on the same thread; other panics are reported as before.
fn quiet_hook_for_guarded_panics() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if !IN_TRACT.with(|f| f.get()) {
                previous(info)
            }
        }));
    });
}

/// Runs `f`, turning a panic inside tract into an error (malformed models and inputs too
/// small for the graph must not abort; tract panics on, e.g., a max-pool input smaller than
/// its kernel, which the probe of the smallest input side runs into).
fn guarded<T>(what: &str, f: impl FnOnce() -> TractResult<T>) -> Result<T, String> {
    quiet_hook_for_guarded_panics();
    let was = IN_TRACT.with(|flag| flag.replace(true));
    let result = catch_unwind(AssertUnwindSafe(f));
    IN_TRACT.with(|flag| flag.set(was));
    match result {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(e)) => Err(format!("{what}: {e:#}")),
        Err(p) => {
            let msg = p
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_else(|| "unknown panic".into());
            Err(format!("{what}: tract panicked: {msg}"))
        }
    }
}

/// A dimension of an ONNX value: `Some(n)` if fixed, `None` if free or absent.
fn proto_dims(info: &pb::ValueInfoProto) -> Option<Vec<Option<i64>>> {
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

fn fmt_dims(d: &[Option<i64>]) -> String {
    let parts: Vec<String> = d
        .iter()
        .map(|v| v.map_or("?".to_string(), |v| v.to_string()))
        .collect();
    format!("({})", parts.join(", "))
}

/// Walks back from `output` through softmax and shape-only nodes: (the class-score tensor,
/// the 4-D tensor it is the global spatial mean of, if any).
fn trace_scores(graph: &pb::GraphProto, output: &str) -> (String, Option<String>) {
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

impl OnnxCnn {
    /// Loads the ONNX model at `path` (see the module docs for what it must be).
    ///
    /// ```no_run
    /// use fisherkit_cnn::onnx::{OnnxCnn, OnnxOptions};
    /// use fisherkit_cnn::{extract, load_image, Cnn, DescriptorParams};
    /// // A torchvision classifier exported with a free H×W input and ImageNet preprocessing.
    /// let net = OnnxCnn::load("resnet50.onnx", &OnnxOptions::default())?;
    /// println!("{} classes, dense: {}", net.num_classes(), net.dense());
    /// let img = load_image("photo.jpg")?;
    /// let per_scale = extract(&net, img.view(), &DescriptorParams::default())?;
    /// assert_eq!(per_scale[0].ncols(), net.num_classes());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    /// [`OnnxError`]: the file (or an external-data file it names) cannot be read, is not ONNX or is truncated, has no 4-D image
    /// input, has no tensor named [`OnnxOptions::output`], its scores are not class scores, or
    /// tract cannot type or run it.
    pub fn load(path: impl AsRef<Path>, options: &OnnxOptions) -> Result<Self, OnnxError> {
        let path = path.as_ref();
        let bytes = std::fs::read(path).map_err(|source| OnnxError::Io {
            path: path.display().to_string(),
            source,
        })?;
        Self::from_bytes(&bytes, path, options)
    }

    /// [`OnnxCnn::load`] on the bytes of an ONNX file; `path` names it in errors and its folder
    /// holds any external tensor data.
    pub fn from_bytes(bytes: &[u8], path: &Path, options: &OnnxOptions) -> Result<Self, OnnxError> {
        let p = path.display().to_string();
        let opt_err = |message: String| OnnxError::Options {
            path: p.clone(),
            message,
        };
        if let Some(i) = (0..3).find(|&i| !(options.std[i].is_finite() && options.std[i] > 0.0)) {
            return Err(opt_err(format!(
                "std {:?}: channel {i} must be finite and > 0",
                options.std
            )));
        }
        if !options.mean.iter().all(|m| m.is_finite()) {
            return Err(opt_err(format!("mean {:?} must be finite", options.mean)));
        }
        if options.input_side == Some(0) {
            return Err(opt_err("input side must be >= 1".into()));
        }
        // The graph's `value_info` (the exporter's shapes of intermediate tensors) is ignored:
        // fisherkit sets the input shape itself (symbolic H, W or the input side), and an
        // exporter's shapes written in its own symbols contradict it. PyTorch's dynamo
        // exporter writes (1, 64, H, W) and (1, 4096, H//32 - 6, W//32 - 6), which tract could
        // not unify with fisherkit's symbols nor with a 224x224 input: its VGG-16 export did
        // not load. tract infers every shape from the input anyway.
        let framework = tract_onnx::onnx().with_ignore_value_info(true);
        let not_onnx = |message: String| OnnxError::NotOnnx {
            path: p.clone(),
            message,
        };
        let proto = guarded("decoding", || {
            framework.proto_model_for_read(&mut std::io::Cursor::new(bytes))
        })
        .map_err(not_onnx)?;
        let graph = proto
            .graph
            .as_ref()
            .filter(|g| !g.node.is_empty())
            .ok_or_else(|| not_onnx("the file holds no graph".into()))?;

        // Files holding tensors stored outside the model (ONNX external data, e.g. the
        // `.onnx.data` file of PyTorch's exporter): hashed with the model for its name.
        let external = external_data_files(graph);
        let external_err = |(file, source): (PathBuf, std::io::Error)| OnnxError::ExternalData {
            path: p.clone(),
            file: file.display().to_string(),
            source,
        };
        let model_dir = path.parent().unwrap_or(Path::new(""));
        for f in &external {
            let file = model_dir.join(f);
            std::fs::File::open(&file).map_err(|e| external_err((file, e)))?;
        }

        // The image input: the graph inputs that are not initializers.
        let inits: std::collections::HashSet<&str> =
            graph.initializer.iter().map(|i| i.name.as_str()).collect();
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
        let no_image = || OnnxError::NoImageInput {
            path: p.clone(),
            found: found.clone(),
        };
        let [input] = inputs.as_slice() else {
            return Err(no_image());
        };
        let dims = proto_dims(input).ok_or_else(no_image)?;
        if dims.len() != 4 || dims[0].is_some_and(|n| n != 1) || dims[1].is_some_and(|c| c != 3) {
            return Err(no_image());
        }
        let fixed = match (dims[2], dims[3]) {
            (Some(h), Some(w)) => Some((h as usize, w as usize)),
            _ => None,
        };

        // The class-score tensor.
        let output_names: Vec<&str> = graph.output.iter().map(|o| o.name.as_str()).collect();
        let produced: std::collections::HashSet<&str> = graph
            .node
            .iter()
            .flat_map(|n| n.output.iter().map(String::as_str))
            .collect();
        if let Some(bad) = output_names.iter().find(|o| !produced.contains(**o)) {
            return Err(not_onnx(format!(
                "graph output `{bad}` is produced by no node"
            )));
        }
        let wanted = match &options.output {
            Some(n) => n.clone(),
            None => output_names
                .first()
                .ok_or_else(|| not_onnx("the graph has no output".into()))?
                .to_string(),
        };
        if !produced.contains(wanted.as_str()) {
            return Err(OnnxError::MissingOutput {
                path: p.clone(),
                name: wanted,
                outputs: output_names
                    .iter()
                    .map(|o| format!("`{o}`"))
                    .collect::<Vec<_>>()
                    .join(", "),
            });
        }
        let (scores, pooled_map) = trace_scores(graph, &wanted);

        let input_side = match (options.input_side, fixed) {
            (Some(s), Some((h, w))) if (h, w) != (s, s) => {
                return Err(opt_err(format!(
                    "the model's input is fixed at {h}x{w}; input side {s} does not match it"
                )))
            }
            (Some(s), _) => s,
            (None, Some((h, w))) if h == w => h,
            (None, Some((h, w))) => {
                return Err(opt_err(format!(
                    "the model's input is fixed at {h}x{w}, not square: fisherkit's patches are \
                     square"
                )))
            }
            (None, None) => 224,
        };

        // Parse once; type with symbolic H, W (dense candidates) or at the input side.
        let dir = path.parent().and_then(|d| d.to_str()).map(str::to_string);
        let tract_err = |message: String| OnnxError::Tract {
            path: p.clone(),
            message,
        };
        let parsed = guarded("parsing the graph", || {
            let r = framework.parse(&proto, dir.as_deref())?;
            if !r.unresolved_inputs.is_empty() {
                return Err(TractError::msg(format!(
                    "unresolved inputs {:?}",
                    r.unresolved_inputs
                )));
            }
            Ok(r)
        })
        .map_err(not_onnx)?;
        let outlet = |name: &str| parsed.outlets_by_name.get(name).copied();
        let source = outlet(&input.name).ok_or_else(no_image)?;
        let score_outlet = outlet(&scores).expect("traced from a produced tensor");
        let map_outlet = pooled_map.as_deref().and_then(outlet);

        let build = |out: OutletId, hw: (TDim, TDim)| -> Result<TypedModel, String> {
            let mut m = parsed.model.clone();
            guarded("typing the graph", || {
                m.set_input_outlets(&[source])?;
                let shape = vec![TDim::Val(1), TDim::Val(3), hw.0.clone(), hw.1.clone()];
                m.set_input_fact(0, f32::fact(shape).into())?;
                m.select_output_outlets(&[out])?;
                m.set_outlet_fact(out, InferenceFact::default())?;
                m.into_typed()?.into_decluttered()
            })
        };
        let shape_of = |m: &TypedModel| -> Vec<TDim> {
            m.output_fact(0)
                .map(|f| f.shape.iter().cloned().collect())
                .unwrap_or_default()
        };
        let not_classifier = |name: &str, shape: String| OnnxError::NotClassifier {
            path: p.clone(),
            name: name.to_string(),
            shape,
        };
        let fmt_shape = |s: &[TDim]| {
            format!(
                "({})",
                s.iter()
                    .map(|d| d.to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        };
        let classes_of = |s: &[TDim], rank: usize| -> Option<usize> {
            (s.len() == rank && s[0].to_i64().ok() == Some(1))
                .then(|| s[1].to_i64().ok())
                .flatten()
                .filter(|&c| c >= 2)
                .map(|c| c as usize)
        };

        // Dense: free H×W and a 4-D score map.
        let dense_map = if options.exact_only || fixed.is_some() {
            None
        } else {
            let map_name = if pooled_map.is_some() {
                pooled_map.clone()
            } else {
                Some(scores.clone())
            };
            let map_out = map_outlet.unwrap_or(score_outlet);
            let sh = parsed.model.sym("fisherkit_H");
            let sw = parsed.model.sym("fisherkit_W");
            match build(map_out, (sh.clone().into(), sw.clone().into())) {
                Ok(m) => {
                    let s = shape_of(&m);
                    match classes_of(&s, 4) {
                        Some(c) => Some((m, c, sh, sw, s, map_name.unwrap_or_default())),
                        None if s.len() == 4 => {
                            return Err(not_classifier(
                                &map_name.unwrap_or_default(),
                                fmt_shape(&s),
                            ))
                        }
                        None => None,
                    }
                }
                Err(_) => None,
            }
        };

        let side = input_side as i64;
        let (typed, classes, map_dims, score_tensor) = match dense_map {
            Some((m, c, sh, sw, s, name)) => {
                (m, c, Some((sh, sw, s[2].clone(), s[3].clone())), name)
            }
            None => {
                let m =
                    build(score_outlet, (TDim::Val(side), TDim::Val(side))).map_err(tract_err)?;
                let s = shape_of(&m);
                let c = match s.len() {
                    2 => classes_of(&s, 2),
                    4 => {
                        classes_of(&s, 4).filter(|_| s[2].to_i64().is_ok() && s[3].to_i64().is_ok())
                    }
                    _ => None,
                }
                .ok_or_else(|| not_classifier(&scores, fmt_shape(&s)))?;
                (m, c, None, scores.clone())
            }
        };
        let plan = guarded("optimising the graph", || {
            typed.into_optimized()?.into_runnable()
        })
        .map_err(tract_err)?;

        let mut scale = [0.0f32; 3];
        let mut offset = [0.0f32; 3];
        for c in 0..3 {
            // x = (pixel / 255 - mean) / std
            scale[c] = 1.0 / (255.0 * options.std[c]);
            offset[c] = -options.mean[c] / options.std[c];
        }
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
        if net.dense {
            net.min_input_side = net.probe_min_side().map_err(tract_err)?;
            if let (Some(a), Some(b)) = (
                net.map_size(input_side, input_side),
                net.map_size(5 * input_side, 5 * input_side),
            ) {
                if b.0 > a.0 {
                    let s = (4 * input_side) as f64 / (b.0 - a.0) as f64;
                    net.cell_stride = (s.round() as usize).max(1);
                }
            }
        }
        let hash = model_hash(bytes, path, &external, &net).map_err(external_err)?;
        net.name = format!(
            "onnx:{}#{hash:016x}",
            path.file_name()
                .map_or_else(|| p.clone(), |f| f.to_string_lossy().into_owned()),
        );
        Ok(net)
    }

    /// Smallest side n ≤ the input side at which an n×n zero input runs and gives the map size
    /// shape inference predicts (binary search; the model must work at the input side). A size
    /// at which shape inference gives any tensor a side < 1 is not run: tract's matrix kernels
    /// can crash the process (SIGSEGV, not a panic) on a convolution larger than its input,
    /// as VGG-16's 7×7 fc6 convolution on the 3×3 map of a 112-px input did.
    fn probe_min_side(&self) -> Result<usize, String> {
        let ok = |n: usize| {
            if !self.shapes_positive(n, n) {
                return false;
            }
            let x = Array3::<f32>::zeros((3, n, n));
            match (self.run(x.view()), self.map_size_eval(n, n)) {
                (Ok(m), Some((h, w))) => m.dim() == (self.classes, h, w),
                _ => false,
            }
        };
        if !ok(self.input_side) {
            return Err(format!(
                "the model does not run on a {0}x{0} input (the input side); set the input side",
                self.input_side
            ));
        }
        let (mut lo, mut hi) = (0, self.input_side); // !ok(lo) assumed, ok(hi)
        while hi - lo > 1 {
            let mid = (lo + hi) / 2;
            if ok(mid) {
                hi = mid;
            } else {
                lo = mid;
            }
        }
        Ok(hi)
    }

    /// Every dimension of every tensor of the dense plan that depends on H or W is ≥ 1 at
    /// `height`×`width` (dimensions that do not evaluate to a number are not judged).
    fn shapes_positive(&self, height: usize, width: usize) -> bool {
        let Some((sh, sw, _, _)) = self.map_dims.as_ref() else {
            return true;
        };
        let v = SymbolValues::default()
            .with(sh, height as i64)
            .with(sw, width as i64);
        self.plan.model().nodes().iter().all(|node| {
            node.outputs.iter().all(|o| {
                o.fact
                    .shape
                    .iter()
                    .all(|d| d.to_i64().is_ok() || d.eval(&v).to_i64().map_or(true, |x| x >= 1))
            })
        })
    }

    fn map_size_eval(&self, height: usize, width: usize) -> Option<(usize, usize)> {
        let (sh, sw, dh, dw) = self.map_dims.as_ref()?;
        let v = SymbolValues::default()
            .with(sh, height as i64)
            .with(sw, width as i64);
        let h = dh.eval(&v).to_i64().ok()?;
        let w = dw.eval(&v).to_i64().ok()?;
        (h >= 1 && w >= 1).then_some((h as usize, w as usize))
    }

    /// The model's output for a preprocessed input (3, H, W) as (C, h, w) ((C, 1, 1) for an
    /// exact-only model).
    fn run(&self, input: ArrayView3<'_, f32>) -> Result<Array3<f32>, String> {
        let x: Tensor = input
            .as_standard_layout()
            .into_owned()
            .insert_axis(Axis(0))
            .into();
        let out = guarded("running the model", || {
            self.plan.run(tvec!(x.into_tvalue()))
        })?;
        let view = out[0]
            .to_plain_array_view::<f32>()
            .map_err(|e| format!("reading the scores: {e}"))?;
        let c = self.classes;
        match view.shape() {
            [1, n] if *n == c => Ok(view
                .to_shape((c, 1, 1))
                .map_err(|e| e.to_string())?
                .to_owned()),
            [1, n, _, _] if *n == c => {
                let v = view
                    .into_dimensionality::<Ix4>()
                    .map_err(|e| e.to_string())?;
                Ok(v.index_axis(Axis(0), 0).to_owned())
            }
            other => Err(format!(
                "the scores have shape {other:?}, expected (1, {c}) or (1, {c}, h, w)"
            )),
        }
    }

    /// The file the model was loaded from.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The options it was loaded with.
    pub fn options(&self) -> &OnnxOptions {
        &self.options
    }

    /// Name of the tensor the class scores are read from: the score map (1, C, h, w) of a dense
    /// model, else the scores (1, C) (before any softmax).
    pub fn score_tensor(&self) -> &str {
        &self.score_tensor
    }

    /// One line for logs: file, classes, mode and geometry.
    pub fn summary(&self) -> String {
        if self.dense {
            format!(
                "{}: {} classes, dense (score map `{}`), {}-px input, cells {} px apart, \
                 smallest input {} px",
                self.path.display(),
                self.classes,
                self.score_tensor,
                self.input_side,
                self.cell_stride,
                self.min_input_side
            )
        } else {
            format!(
                "{}: {} classes, exact patches only (scores `{}`), {}-px input",
                self.path.display(),
                self.classes,
                self.score_tensor,
                self.input_side
            )
        }
    }
}

/// The external-data files (`location`s) of the graph's initializers, each once, in order:
/// only relative paths inside the model's folder (tract refuses the others when it parses).
fn external_data_files(graph: &pb::GraphProto) -> Vec<PathBuf> {
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

/// FNV-1a 64.
struct Fnv(u64);

impl Fnv {
    fn new() -> Self {
        Fnv(0xcbf2_9ce4_8422_2325)
    }
    fn update(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 ^= b as u64;
            self.0 = self.0.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
}

/// FNV-1a of the model bytes, of its external-data files (read in chunks, relative to the
/// model's folder) and of the options that change its descriptors (for the run key). Without
/// the external files, a model whose weights live in `model.onnx.data` (PyTorch's exporter
/// puts every tensor above 1 kB there) would keep its name, and a run its cached
/// descriptors, when only the weights change. A model without external data hashes as before.
fn model_hash(
    bytes: &[u8],
    path: &Path,
    external: &[PathBuf],
    net: &OnnxCnn,
) -> Result<u64, (PathBuf, std::io::Error)> {
    use std::io::Read;
    let mut h = Fnv::new();
    h.update(bytes);
    let dir = path.parent().unwrap_or(Path::new(""));
    let mut buf = vec![0u8; 1 << 20];
    for location in external {
        let file = dir.join(location);
        let err = |e| (file.clone(), e);
        let mut f = std::fs::File::open(&file).map_err(err)?;
        h.update(location.to_string_lossy().as_bytes());
        loop {
            let n = f.read(&mut buf).map_err(err)?;
            if n == 0 {
                break;
            }
            h.update(&buf[..n]);
        }
    }
    let o = &net.options;
    let extra = format!(
        "{:?}{:?}{}{}{}{}",
        o.mean, o.std, o.bgr, net.input_side, net.score_tensor, net.dense
    );
    h.update(extra.as_bytes());
    Ok(h.0)
}

impl sealed::Forward for OnnxCnn {
    fn forward_par(&self, input: ArrayView3<'_, f32>, _par: Par) -> Result<Array3<f32>, CnnError> {
        self.run(input).map_err(|message| CnnError::Onnx {
            path: self.path.display().to_string(),
            message,
        })
    }
}

impl Cnn for OnnxCnn {
    /// `onnx:<file name>#<hash of the file and the preprocessing>`.
    fn name(&self) -> &str {
        &self.name
    }
    fn input_side(&self) -> usize {
        self.input_side
    }
    fn min_input_side(&self) -> usize {
        self.min_input_side
    }
    fn cell_stride(&self) -> usize {
        self.cell_stride
    }
    fn receptive_field(&self) -> usize {
        self.options.receptive_field.unwrap_or(self.input_side)
    }
    fn num_classes(&self) -> usize {
        self.classes
    }
    fn dense(&self) -> bool {
        self.dense
    }
    /// Dense: tract's symbolic shape at (H, W), `None` below the smallest input side.
    /// Exact-only: (1, 1) at the input side, else `None`.
    fn map_size(&self, height: usize, width: usize) -> Option<(usize, usize)> {
        if !self.dense {
            return ((height, width) == (self.input_side, self.input_side)).then_some((1, 1));
        }
        if height.min(width) < self.min_input_side {
            return None;
        }
        self.map_size_eval(height, width)
    }
    fn preprocess(&self, img: ArrayView3<'_, f32>) -> Result<Array3<f32>, ImageError> {
        check_image(&img)?;
        let (h, w, _) = img.dim();
        let bgr = self.options.bgr;
        Ok(Array3::from_shape_fn((3, h, w), |(c, i, j)| {
            let src = if bgr { 2 - c } else { c };
            img[[i, j, src]] * self.scale[c] + self.offset[c]
        }))
    }
    fn score_map(&self, input: ArrayView3<'_, f32>) -> Result<Array3<f32>, CnnError> {
        let (c, h, w) = input.dim();
        let ok = c == 3
            && if self.dense {
                self.map_size(h, w).is_some()
            } else {
                (h, w) == (self.input_side, self.input_side)
            };
        if !ok {
            return Err(CnnError::NetInputShape {
                net: "the ONNX model",
                min: if self.dense {
                    self.min_input_side
                } else {
                    self.input_side
                },
                shape: input.shape().to_vec(),
            });
        }
        crate::input::check_finite_input(&input)?;
        sealed::Forward::forward_par(self, input, fisherkit::linalg::par_all())
    }
}
