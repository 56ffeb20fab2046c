//! Safetensors model loader (kind gmm and mfa) on arbitrary bytes: never
//! panics; a model that loads is valid, and converts to the library types in
//! both precisions without panicking.
#![no_main]
use fisherkit_io::{GmmModel, MfaModel, Model};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok((model, meta)) = fisherkit_io::read_model_bytes(data, "fuzz.safetensors") else {
        return;
    };
    assert_eq!(meta.get("kind").map(String::as_str), Some(model.kind()));
    match &model {
        Model::Gmm(g) => {
            let w: f64 = match g {
                GmmModel::F32(g) => g.weights().iter().map(|&v| v as f64).sum(),
                GmmModel::F64(g) => g.weights().sum(),
            };
            assert!((w - 1.0).abs() < 1e-3, "weights sum to {w}");
            let _ = g.to_dtype::<f32>();
            let _ = g.to_dtype::<f64>();
        }
        Model::Mfa(m) => {
            match m {
                MfaModel::F32(a) => a.validate().expect("a loaded MFA validates"),
                MfaModel::F64(a) => a.validate().expect("a loaded MFA validates"),
            }
            let _ = m.to_dtype::<f32>();
            let _ = m.to_dtype::<f64>();
        }
    }
});
