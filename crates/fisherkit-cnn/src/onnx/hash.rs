//! The hash in an ONNX model's name ([`model_hash`]): FNV-1a of the model, its external data
//! and the options that change its descriptors.

use super::OnnxCnn;
use std::path::{Path, PathBuf};

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
pub(super) fn model_hash(
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
