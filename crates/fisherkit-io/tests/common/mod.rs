//! Shared by the model-file validation tests: hand-built safetensors bytes,
//! so that each test can produce exactly the malformed file it needs.
#![allow(dead_code)]

use serde_json::json;

/// Tensors of a hand-built file: (name, shape, values in f64).
pub type Tensors = Vec<(&'static str, Vec<usize>, Vec<f64>)>;

/// A safetensors file of f64 tensors (name, shape, values) with metadata.
pub fn st(meta: &[(&str, &str)], tensors: &[(&str, Vec<usize>, Vec<f64>)]) -> Vec<u8> {
    st_typed(meta, tensors, "F64")
}

/// A safetensors file whose tensors all have dtype `dt` (F32 or F64).
pub fn st_typed(
    meta: &[(&str, &str)],
    tensors: &[(&str, Vec<usize>, Vec<f64>)],
    dt: &'static str,
) -> Vec<u8> {
    st_with(meta, tensors, &|_| dt)
}

/// A safetensors file whose tensor `name` has dtype `dt(name)` (F32 or F64).
pub fn st_with(
    meta: &[(&str, &str)],
    tensors: &[(&str, Vec<usize>, Vec<f64>)],
    dt: &dyn Fn(&str) -> &'static str,
) -> Vec<u8> {
    let mut header = serde_json::Map::new();
    let meta: serde_json::Map<String, serde_json::Value> = meta
        .iter()
        .map(|(k, v)| (k.to_string(), json!(v)))
        .collect();
    header.insert("__metadata__".into(), serde_json::Value::Object(meta));
    let mut data = Vec::new();
    for (name, shape, values) in tensors {
        let dt = dt(name);
        assert_eq!(shape.iter().product::<usize>(), values.len(), "{name}");
        let start = data.len();
        for v in values {
            if dt == "F32" {
                data.extend_from_slice(&(*v as f32).to_le_bytes());
            } else {
                data.extend_from_slice(&v.to_le_bytes());
            }
        }
        header.insert(
            name.to_string(),
            json!({"dtype": dt, "shape": shape, "data_offsets": [start, data.len()]}),
        );
    }
    let mut h = serde_json::to_vec(&serde_json::Value::Object(header)).unwrap();
    h.resize(h.len().div_ceil(8) * 8, b' ');
    let mut out = (h.len() as u64).to_le_bytes().to_vec();
    out.extend_from_slice(&h);
    out.extend_from_slice(&data);
    out
}
