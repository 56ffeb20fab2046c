//! The sample pass's CNN output, kept for the encode pass so that no image
//! goes through the CNN twice (docs/pipeline.md §2).
//!
//! The sample pass runs its images through the CNN before the PCA and the
//! models exist; the encode pass needs the same descriptors once they do.
//! The owner of the run folder writes each sample image's descriptors to
//! `cnn-sample/<index>.f32` (atomically, [`fisherkit_io::write_file`]); the
//! encode pass — in this process or in a worker that sees the run folder —
//! reads them back instead of running the CNN, and the owner deletes a file
//! once its image is in every store.
//!
//! The values are kept exactly (`f32`): the reused rows are bit for bit the
//! CNN's, so a run gives the same encodings and report whether it reused
//! them or not (`f16` would halve the bytes and change the sample images'
//! encodings; docs/pipeline.md §2 has the sizes).
//!
//! File layout, little-endian:
//!
//! | bytes | content |
//! |---|---|
//! | 8 | magic `FKCNNKP1` |
//! | 8 | image index (u64) |
//! | 4 + 4 + 4 | scales S, width D, global (0 or 1) (u32 each) |
//! | 8 × S | rows of each scale (u64) |
//! | 4 × D × Σ rows | each scale's (rows, D) descriptors, row-major, f32 |
//! | 4 × D | the image-level descriptor, if global is 1 |

use crate::descriptors::ImageDescriptors;
use ndarray::{Array1, Array2};
use std::path::Path;

const MAGIC: &[u8; 8] = b"FKCNNKP1";

/// One sample image's CNN output in its file form (see the module docs):
/// what the sample pass hands to [`crate::Job::add_sample_keeping`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeptCnn {
    /// The image (index into the run's image list).
    pub image: usize,
    /// The file's bytes.
    pub bytes: Vec<u8>,
}

/// What a kept file's header says.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Header {
    image: usize,
    dim: usize,
    global: bool,
    rows: Vec<usize>,
}

impl Header {
    fn len(&self) -> usize {
        8 + 8 + 12 + 8 * self.rows.len()
    }

    /// Bytes of the whole file.
    fn file_len(&self) -> Option<usize> {
        let values = self
            .rows
            .iter()
            .try_fold(usize::from(self.global), |a, &r| a.checked_add(r))?
            .checked_mul(self.dim)?
            .checked_mul(4)?;
        values.checked_add(self.len())
    }
}

fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

fn u64_at(b: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_le_bytes(b.get(at..at + 8)?.try_into().ok()?))
}

fn header(b: &[u8]) -> Result<Header, String> {
    let bad = || "not a kept CNN output (bad header)".to_string();
    if b.get(..8) != Some(MAGIC.as_slice()) {
        return Err(bad());
    }
    let image = usize::try_from(u64_at(b, 8).ok_or_else(bad)?).map_err(|_| bad())?;
    let scales = u32_at(b, 16).ok_or_else(bad)? as usize;
    let dim = u32_at(b, 20).ok_or_else(bad)? as usize;
    let global = match u32_at(b, 24).ok_or_else(bad)? {
        0 => false,
        1 => true,
        _ => return Err(bad()),
    };
    let rows = (0..scales)
        .map(|s| {
            u64_at(b, 28 + 8 * s)
                .and_then(|r| usize::try_from(r).ok())
                .ok_or_else(bad)
        })
        .collect::<Result<_, _>>()?;
    let h = Header {
        image,
        dim,
        global,
        rows,
    };
    match h.file_len() {
        Some(n) if n == b.len() => Ok(h),
        _ => Err(format!(
            "a kept CNN output of {} bytes, its header says {:?}",
            b.len(),
            h.file_len()
        )),
    }
}

impl KeptCnn {
    /// The file form of image `image`'s descriptors `d`.
    pub(crate) fn new(image: usize, d: &ImageDescriptors) -> Self {
        let dim = d.scales.first().map_or(0, |x| x.ncols());
        let h = Header {
            image,
            dim,
            global: d.global.is_some(),
            rows: d.scales.iter().map(|x| x.nrows()).collect(),
        };
        let mut bytes = Vec::with_capacity(h.file_len().unwrap_or(0));
        bytes.extend_from_slice(MAGIC);
        bytes.extend_from_slice(&(image as u64).to_le_bytes());
        for v in [h.rows.len(), dim, usize::from(h.global)] {
            bytes.extend_from_slice(&(v as u32).to_le_bytes());
        }
        for &r in &h.rows {
            bytes.extend_from_slice(&(r as u64).to_le_bytes());
        }
        let values = d
            .scales
            .iter()
            .flat_map(|x| x.iter())
            .chain(d.global.iter().flatten());
        for v in values {
            bytes.extend_from_slice(&v.to_le_bytes());
        }
        KeptCnn { image, bytes }
    }

    /// Checks that the bytes are a whole kept output of this image with
    /// `n_scales` scales of width `dim` (not the values).
    ///
    /// # Errors
    /// The reason, for a message.
    pub(crate) fn check(&self, n_scales: usize, dim: usize) -> Result<(), String> {
        let h = header(&self.bytes)?;
        if h.image != self.image || h.rows.len() != n_scales || h.dim != dim {
            return Err(format!(
                "a kept CNN output of image {} with {} scales of width {}, expected image {} with {n_scales} of width {dim}",
                h.image,
                h.rows.len(),
                h.dim,
                self.image
            ));
        }
        Ok(())
    }

    /// The descriptors, if the bytes are image `image`'s output with
    /// `n_scales` scales of width `dim` and, when `global`, the image-level
    /// descriptor (a file without it cannot serve a run that needs it; one
    /// with it serves a run that does not).
    pub(crate) fn descriptors(
        &self,
        n_scales: usize,
        dim: usize,
        global: bool,
    ) -> Result<ImageDescriptors, String> {
        self.check(n_scales, dim)?;
        let h = header(&self.bytes)?;
        if global && !h.global {
            return Err("the kept CNN output has no image-level descriptor".into());
        }
        let mut values = self.bytes[h.len()..]
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]));
        let scales = h
            .rows
            .iter()
            .map(|&r| {
                let v: Vec<f32> = values.by_ref().take(r * dim).collect();
                Array2::from_shape_vec((r, dim), v).expect("length checked by the header")
            })
            .collect();
        let global = global.then(|| values.by_ref().take(dim).collect::<Array1<f32>>());
        Ok(ImageDescriptors { scales, global })
    }

    /// Reads image `image`'s kept output from `dir`, if there is a usable
    /// one (`None`: absent, unreadable or not of this run; then the caller
    /// runs the CNN).
    pub(crate) fn read(
        dir: &Path,
        image: usize,
        n_scales: usize,
        dim: usize,
        global: bool,
    ) -> Option<ImageDescriptors> {
        let bytes = std::fs::read(path(dir, image)).ok()?;
        KeptCnn { image, bytes }
            .descriptors(n_scales, dim, global)
            .ok()
    }
}

/// The file of image `image` in the kept folder `dir`.
pub(crate) fn path(dir: &Path, image: usize) -> std::path::PathBuf {
    dir.join(format!("{image:07}.f32"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use ndarray::array;

    fn descriptors(global: bool) -> ImageDescriptors {
        ImageDescriptors {
            scales: vec![
                array![[-1.5f32, -0.25, -7.0], [-3.0, f32::MIN_POSITIVE, -1e-30]],
                Array2::zeros((0, 3)),
                array![[-2.0f32, -20.5, -0.125]],
            ],
            global: global.then(|| array![-0.5f32, -1.0, -3.25]),
        }
    }

    fn same(a: &ImageDescriptors, b: &ImageDescriptors) -> bool {
        a.scales == b.scales && a.global == b.global
    }

    #[test]
    fn a_kept_output_reads_back_bit_for_bit() {
        for global in [false, true] {
            let d = descriptors(global);
            let k = KeptCnn::new(7, &d);
            assert_eq!(
                k.bytes.len(),
                28 + 3 * 8 + 4 * 3 * (3 + usize::from(global))
            );
            let back = k.descriptors(3, 3, global).unwrap();
            assert!(same(&back, &d), "{back:?}");
        }
        // a file with the global descriptor serves a run without it
        let k = KeptCnn::new(7, &descriptors(true));
        assert!(same(
            &k.descriptors(3, 3, false).unwrap(),
            &descriptors(false)
        ));
    }

    #[test]
    fn a_kept_output_of_another_image_shape_or_length_is_refused() {
        let k = KeptCnn::new(7, &descriptors(false));
        assert!(k
            .descriptors(3, 3, true)
            .unwrap_err()
            .contains("image-level"));
        assert!(k.descriptors(2, 3, false).is_err());
        assert!(k.descriptors(3, 4, false).is_err());
        let other = KeptCnn {
            image: 8,
            bytes: k.bytes.clone(),
        };
        assert!(other.check(3, 3).unwrap_err().contains("image 7"));
        for cut in [0, 5, 27, k.bytes.len() - 1] {
            let short = KeptCnn {
                image: 7,
                bytes: k.bytes[..cut].to_vec(),
            };
            assert!(short.check(3, 3).is_err(), "{cut} bytes");
        }
        let mut long = k.clone();
        long.bytes.push(0);
        assert!(long.check(3, 3).is_err());
        let mut foreign = k;
        foreign.bytes[0] = b'X';
        assert!(foreign.check(3, 3).unwrap_err().contains("header"));
    }

    #[test]
    fn reading_a_missing_or_broken_file_gives_none() {
        let dir = tempfile::tempdir().unwrap();
        assert!(KeptCnn::read(dir.path(), 3, 3, 3, false).is_none());
        let k = KeptCnn::new(3, &descriptors(false));
        std::fs::write(path(dir.path(), 3), &k.bytes).unwrap();
        assert!(same(
            &KeptCnn::read(dir.path(), 3, 3, 3, false).unwrap(),
            &descriptors(false)
        ));
        std::fs::write(path(dir.path(), 3), &k.bytes[..40]).unwrap();
        assert!(KeptCnn::read(dir.path(), 3, 3, 3, false).is_none());
    }
}
