//! The pipeline's sample-pass checkpoint (`kind = sample-part`): what one
//! finished chunk of sample images contributed, so that a run killed during
//! the sample pass resumes after its last finished chunk instead of starting
//! the pass again (`docs/formats.md` §2.7, `docs/pipeline.md` §2).
//!
//! A safetensors file, written atomically. Per descriptor scale `s`:
//!
//! | tensor | dtype | shape | meaning |
//! |---|---|---|---|
//! | `scale{s}.shift` | F64 | (D) | reference point $c$ of the PCA sums |
//! | `scale{s}.sum` | F64 | (D) | $\sum_i (y_i - c)$ over the chunk's PCA rows |
//! | `scale{s}.scatter` | F64 | (D, D) | $\sum_i (y_i - c)(y_i - c)^\top$ |
//! | `scale{s}.rows` | F32 | (n_s, D) | the chunk's model-sample rows (raw descriptors) |
//!
//! and metadata `images` (the chunk's image indices, comma-separated),
//! `scales` (S), `dim` (D) and `scale{s}.n` (rows in the PCA sums). A scale
//! with no readable image has no tensors and no `scale{s}.n`.

use crate::error::{IoError, Result};
use crate::model::{open_model, read_file_checked, to_le_bytes, write_safetensors_typed};
use crate::npy::Dtype;
use fisherkit::pca::PcaMoments;
use ndarray::{Array1, Array2};
use std::collections::BTreeMap;
use std::path::Path;

/// The `kind` metadata value of a sample-part file.
pub const SAMPLE_PART_KIND: &str = "sample-part";

/// One descriptor scale of a [`SamplePartFile`].
#[derive(Debug, Clone)]
pub struct SampleScale {
    /// PCA sums of the chunk's chosen rows (`None`: no readable image).
    pub moments: Option<PcaMoments>,
    /// Model-sample rows, (n, D) row-major (`D` = [`SamplePartFile::dim`]).
    pub rows: Vec<f32>,
}

/// What one chunk of the sample pass contributed.
#[derive(Debug, Clone)]
pub struct SamplePartFile {
    /// The chunk's images (indices into the run's image list), in order.
    pub images: Vec<usize>,
    /// Descriptor width D (0 when no image was readable).
    pub dim: usize,
    /// One entry per descriptor scale.
    pub scales: Vec<SampleScale>,
}

/// Writes `part` to `path` atomically (a failure leaves no file).
///
/// # Errors
/// Rows whose length is not a multiple of `dim`, moments whose width is not
/// `dim`, or an I/O failure (full disk, unwritable folder).
pub fn write_sample_part(path: impl AsRef<Path>, part: &SamplePartFile) -> Result<()> {
    let path = path.as_ref();
    let bad = |m: String| IoError::model(path, format!("refusing to write a sample part: {m}"));
    let mut meta = BTreeMap::new();
    meta.insert("scales".to_string(), part.scales.len().to_string());
    meta.insert("dim".into(), part.dim.to_string());
    let images: Vec<String> = part.images.iter().map(usize::to_string).collect();
    meta.insert("images".into(), images.join(","));
    let d = part.dim;
    let mut tensors: Vec<(String, Dtype, Vec<usize>, Vec<u8>)> = Vec::new();
    for (s, scale) in part.scales.iter().enumerate() {
        if let Some(m) = &scale.moments {
            let (shift, n, sum, scatter) = m.parts();
            if shift.len() != d {
                return Err(bad(format!(
                    "scale {s}: PCA sums of width {} but dim is {d}",
                    shift.len()
                )));
            }
            meta.insert(format!("scale{s}.n"), n.to_string());
            tensors.push((
                format!("scale{s}.shift"),
                Dtype::F64,
                vec![d],
                to_le_bytes(shift.iter()),
            ));
            tensors.push((
                format!("scale{s}.sum"),
                Dtype::F64,
                vec![d],
                to_le_bytes(sum.iter()),
            ));
            tensors.push((
                format!("scale{s}.scatter"),
                Dtype::F64,
                vec![d, d],
                to_le_bytes(scatter.iter()),
            ));
        }
        if !scale.rows.is_empty() || scale.moments.is_some() {
            if d == 0 || scale.rows.len() % d != 0 {
                return Err(bad(format!(
                    "scale {s}: {} row values are not a whole number of rows of width {d}",
                    scale.rows.len()
                )));
            }
            tensors.push((
                format!("scale{s}.rows"),
                Dtype::F32,
                vec![scale.rows.len() / d, d],
                to_le_bytes(scale.rows.iter()),
            ));
        }
    }
    let names: Vec<String> = tensors.iter().map(|t| t.0.clone()).collect();
    let tensors = names
        .iter()
        .zip(tensors)
        .map(|(n, (_, t, shape, data))| (n.as_str(), t, shape, data))
        .collect();
    write_safetensors_typed(path, SAMPLE_PART_KIND, Dtype::F64, tensors, &meta)
}

/// Reads a sample-part file written by [`write_sample_part`], checking its
/// kind, version, every tensor's dtype and shape, and that values are finite.
///
/// # Errors
/// A missing, truncated or foreign file, or any inconsistency, named with
/// the file and the tensor or key.
///
/// ```
/// use fisherkit::pca::PcaMoments;
/// use fisherkit_io::{read_sample_part, write_sample_part, SamplePartFile, SampleScale};
/// use ndarray::array;
///
/// let dir = std::env::temp_dir().join(format!("fisherkit-doc-part-{}", std::process::id()));
/// std::fs::create_dir_all(&dir)?;
/// let path = dir.join("part-00000.safetensors");
/// let mut moments = PcaMoments::new(array![0.0, 0.0]);
/// moments.add(array![[1.0, 2.0], [3.0, 5.0]].view())?;
/// let part = SamplePartFile {
///     images: vec![0, 1],
///     dim: 2,
///     scales: vec![SampleScale { moments: Some(moments), rows: vec![1.0, 2.0, 3.0, 5.0] }],
/// };
/// write_sample_part(&path, &part)?;
/// let back = read_sample_part(&path)?;
/// assert_eq!((back.images, back.dim), (vec![0, 1], 2));
/// assert_eq!(back.scales[0].rows, part.scales[0].rows);
/// // the PCA sums come back: 2 rows summed
/// assert_eq!(back.scales[0].moments.as_ref().map(|m| m.parts().1), Some(2));
/// std::fs::remove_dir_all(&dir)?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn read_sample_part(path: impl AsRef<Path>) -> Result<SamplePartFile> {
    let path = path.as_ref();
    let buf = read_file_checked(path)?;
    let (st, meta, kind) = open_model(&buf, path)?;
    let err = |m: String| IoError::model(path, m);
    let key = |k: &str| -> Result<&String> {
        meta.get(k).ok_or_else(|| {
            err(format!(
                "missing metadata `{k}` (a sample-part file needs it)"
            ))
        })
    };
    let number = |k: &str| -> Result<usize> {
        key(k)?
            .parse()
            .map_err(|_| err(format!("metadata `{k}` is \"{}\", not a count", meta[k])))
    };
    if kind != SAMPLE_PART_KIND {
        return Err(err(format!(
            "has kind \"{kind}\", not \"{SAMPLE_PART_KIND}\" (a sample-pass checkpoint)"
        )));
    }
    let (n_scales, d) = (number("scales")?, number("dim")?);
    let images = match key("images")?.as_str() {
        "" => Vec::new(),
        s => s
            .split(',')
            .map(|i| i.parse::<usize>())
            .collect::<std::result::Result<_, _>>()
            .map_err(|_| {
                err(format!(
                    "metadata `images` is \"{s}\", not a list of indices"
                ))
            })?,
    };
    let tensor = |name: &str, dtype: Dtype, shape: &[usize]| -> Result<Option<Vec<u8>>> {
        let Ok(t) = st.tensor(name) else {
            return Ok(None);
        };
        let want = match dtype {
            Dtype::F32 => safetensors::Dtype::F32,
            Dtype::F64 => safetensors::Dtype::F64,
        };
        if t.dtype() != want {
            return Err(err(format!(
                "tensor `{name}` has dtype {}, expected {want}",
                t.dtype()
            )));
        }
        let shape_ok = t.shape().len() == shape.len()
            && t.shape()
                .iter()
                .zip(shape)
                .all(|(&a, &b)| b == usize::MAX || a == b);
        if !shape_ok {
            return Err(err(format!(
                "tensor `{name}` has shape {:?}, expected {:?} (dim {d})",
                t.shape(),
                shape
                    .iter()
                    .map(|&s| if s == usize::MAX {
                        "n".to_string()
                    } else {
                        s.to_string()
                    })
                    .collect::<Vec<_>>()
            )));
        }
        Ok(Some(t.data().to_vec()))
    };
    let f64s = |b: Vec<u8>| -> Vec<f64> {
        b.chunks_exact(8)
            .map(|c| f64::from_le_bytes(c.try_into().expect("8 bytes")))
            .collect()
    };
    let mut scales = Vec::with_capacity(n_scales);
    for s in 0..n_scales {
        let moments = match meta.get(&format!("scale{s}.n")) {
            None => None,
            Some(_) => {
                let n = number(&format!("scale{s}.n"))?;
                let need = |name: String, shape: &[usize]| -> Result<Vec<f64>> {
                    let b = tensor(&name, Dtype::F64, shape)?
                        .ok_or_else(|| err(format!("missing tensor `{name}`")))?;
                    Ok(f64s(b))
                };
                let shift = need(format!("scale{s}.shift"), &[d])?;
                let sum = need(format!("scale{s}.sum"), &[d])?;
                let scatter = need(format!("scale{s}.scatter"), &[d, d])?;
                let scatter = Array2::from_shape_vec((d, d), scatter).expect("shape checked");
                let m = PcaMoments::from_parts(Array1::from(shift), n, Array1::from(sum), scatter)
                    .map_err(|e| err(format!("scale {s}: {e}")))?;
                Some(m)
            }
        };
        let rows: Vec<f32> = match tensor(&format!("scale{s}.rows"), Dtype::F32, &[usize::MAX, d])?
        {
            None => Vec::new(),
            Some(b) => b
                .chunks_exact(4)
                .map(|c| f32::from_le_bytes(c.try_into().expect("4 bytes")))
                .collect(),
        };
        if let Some(v) = rows.iter().find(|v| !v.is_finite()) {
            return Err(err(format!(
                "tensor `scale{s}.rows` has a non-finite value ({v})"
            )));
        }
        scales.push(SampleScale { moments, rows });
    }
    Ok(SamplePartFile {
        images,
        dim: d,
        scales,
    })
}
