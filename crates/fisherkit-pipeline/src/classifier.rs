//! A trained scene classifier ([`SceneClassifier`]): everything from an
//! image's descriptors to a label, kept in one file
//! ([`fisherkit_io::classifier`], written by `fisherkit run --save-model`).
//!
//! An image's descriptors at scale s are projected by that scale's PCA; each
//! background model of the scale gives its raw encoding (GMM-FV prior, mean
//! and var blocks; MFA-FS mean and loading blocks, un-normalised), exactly
//! what the run's stores hold. The feature is the concatenation of the
//! encoder's parts (a term at a scale, `cnn-global` once), each its term's
//! columns $g$ transformed as in training (docs/pipeline.md §4): whitened
//! $g_j/\sqrt{\max(F_j, 10^{-12}\bar F)}$ (whitened MFA-FS only), signed
//! power $\mathrm{sign}(g)|g|^\rho$, then L2-normalised on its own. The
//! scores are $f_k(x) = w_k^\top x + b_k$, summed in `f64` in column order
//! (the same bits on every machine and batch size); the label is the class
//! of the largest score.

use crate::descriptors::{fnv1a64, ImageDescriptors};
use crate::spec::{parse_encoders, EncoderSpec, Term};
use crate::stages::{raw_gmm_encoder, raw_mfa_encoder};
use crate::PipelineError;
use fisherkit::normalize::L2_FLOOR;
use fisherkit::pca::Pca;
use fisherkit::Encoder;
use fisherkit_cnn::descriptors::{DescriptorParams, PatchMode};
use fisherkit_io::{ClassifierFile, ClassifierInfo, CnnInfo};
use ndarray::{Array1, ArrayView1};
use std::ops::Range;
use std::path::Path;

/// The raw encodings of one image, as the run's stores hold them: per
/// scale the GMM's (K + 2KD) and the MFA's (KD + KDR) rows, if the
/// classifier uses them, and the CNN's global vector (`cnn-global`).
#[derive(Debug, Clone, Default)]
pub struct RawEncodings {
    /// Per scale, the background GMM's raw Fisher vector.
    pub gmm: Vec<Option<Array1<f32>>>,
    /// Per scale, the background MFA's raw Fisher score.
    pub mfa: Vec<Option<Array1<f32>>>,
    /// The image-level log-probabilities.
    pub global: Option<Array1<f32>>,
}

/// One prediction: the class index and every class's score.
#[derive(Debug, Clone, PartialEq)]
pub struct Scored {
    /// Index of the winning class (largest score; the first on a tie).
    pub class: usize,
    /// $f_k(x)$ for every class k, in class order.
    pub scores: Vec<f64>,
}

/// A part's column ranges in its term's raw row and its whitening scale.
type PartColumns = (Vec<Range<usize>>, Option<Array1<f32>>);

/// A trained scene classifier, loaded and checked (see the module docs).
pub struct SceneClassifier {
    file: ClassifierFile,
    spec: EncoderSpec,
    gmm: Vec<Option<Box<dyn Encoder<f32>>>>,
    mfa: Vec<Option<Box<dyn Encoder<f32>>>>,
    /// Per part: its term's column ranges in the raw row, and its whitening scale.
    parts: Vec<PartColumns>,
}

impl std::fmt::Debug for SceneClassifier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SceneClassifier")
            .field("encoder", &self.file.info.encoder)
            .field("classes", &self.file.info.classes.len())
            .field("dim", &self.dim())
            .finish()
    }
}

fn model_err(path: &Path, e: impl std::fmt::Display) -> PipelineError {
    PipelineError::Io {
        path: path.display().to_string(),
        message: e.to_string(),
    }
}

/// The fingerprint of a built-in network's shipped weights (FNV-1a 64, hex).
pub fn builtin_weights_hash(kind: fisherkit_cnn::BackboneKind) -> String {
    format!("{:016x}", fnv1a64(kind.builtin_weights(), 0))
}

/// The identity of `net` as a classifier file records it.
pub fn cnn_info(net: &fisherkit_cnn::Backbone, onnx_path: Option<&Path>) -> CnnInfo {
    use fisherkit_cnn::Cnn;
    CnnInfo {
        name: net.name().to_string(),
        weights_hash: net.kind().map(builtin_weights_hash),
        onnx_path: onnx_path.map(|p| p.display().to_string()),
    }
}

impl SceneClassifier {
    /// Checks `file` against the encoder it names and builds the encoders.
    /// `path` names the file in errors.
    ///
    /// # Errors
    /// An encoder specification that does not parse, parts that are not the
    /// specification's at the file's scales, widths that do not match the models.
    pub fn from_file(file: ClassifierFile, path: &Path) -> Result<Self, PipelineError> {
        file.validate(path)?;
        let bad = |m: String| model_err(path, m);
        let mut specs = parse_encoders(&file.info.encoder)
            .map_err(|e| bad(format!("encoder `{}`: {e}", file.info.encoder)))?;
        if specs.len() != 1 {
            return Err(bad(format!(
                "encoder `{}` names {} encoders; a classifier has one",
                file.info.encoder,
                specs.len()
            )));
        }
        let spec = specs.remove(0);
        let n_scales = file.pcas.len();
        let expected = part_list(&spec, n_scales);
        let named: Vec<(String, usize)> = file
            .info
            .parts
            .iter()
            .map(|p| (p.term.clone(), p.scale))
            .collect();
        let want: Vec<(String, usize)> = expected
            .iter()
            .map(|&(t, s)| (spec.terms[t].name(), s))
            .collect();
        if named != want {
            return Err(bad(format!(
                "the parts {named:?} are not those of `{}` at {n_scales} scale(s): {want:?}",
                spec.name()
            )));
        }
        let enc = |e: fisherkit::EncodeError| bad(format!("encoder: {e}"));
        let gmm = file
            .gmms
            .iter()
            .map(|g| g.as_ref().map(raw_gmm_encoder).transpose())
            .collect::<Result<Vec<_>, _>>()
            .map_err(enc)?;
        let mfa = file
            .mfas
            .iter()
            .map(|m| m.as_ref().map(|m| raw_mfa_encoder(m.clone())).transpose())
            .collect::<Result<Vec<_>, _>>()
            .map_err(enc)?;
        let global_dim = file.info.input.descriptor_dim;
        let mut parts = Vec::new();
        for ((ti, s), info) in expected.into_iter().zip(&file.info.parts) {
            let term = &spec.terms[ti];
            let cols = term_columns(
                term,
                file.gmms[s].as_ref().map(|g| (g.n_components(), g.dim())),
                file.mfas[s]
                    .as_ref()
                    .map(|m| (m.n_components(), m.dim(), m.n_factors())),
                global_dim,
            )
            .ok_or_else(|| {
                bad(format!(
                    "part {} at scale {s} needs a background model the file does not hold",
                    term.name()
                ))
            })?;
            let width: usize = cols.iter().map(|c| c.len()).sum();
            if width != info.width {
                return Err(bad(format!(
                    "part {} at scale {s} has width {} in the description, {width} by its model",
                    term.name(),
                    info.width
                )));
            }
            if info.whitened && !matches!(term, Term::MfaFs(_)) {
                return Err(bad(format!("part {} cannot be whitened", term.name())));
            }
            parts.push((cols, None));
        }
        for (p, w) in parts.iter_mut().zip(&file.whitening) {
            p.1 = w.as_ref().map(white_scale);
        }
        Ok(Self {
            file,
            spec,
            gmm,
            mfa,
            parts,
        })
    }

    /// Reads and checks a classifier file.
    ///
    /// # Errors
    /// The file's errors ([`fisherkit_io::read_classifier`]) and [`Self::from_file`]'s.
    pub fn load(path: &Path) -> Result<Self, PipelineError> {
        let file = fisherkit_io::read_classifier(path)?;
        Self::from_file(file, path)
    }

    /// Writes the classifier to `path` (atomically).
    ///
    /// # Errors
    /// A failed write.
    pub fn save(&self, path: &Path) -> Result<(), PipelineError> {
        Ok(fisherkit_io::write_classifier(path, &self.file)?)
    }

    /// The description: input, encoder, classes, training settings.
    pub fn info(&self) -> &ClassifierInfo {
        &self.file.info
    }

    /// The class names, in score order.
    pub fn classes(&self) -> &[String] {
        &self.file.info.classes
    }

    /// The encoder.
    pub fn spec(&self) -> &EncoderSpec {
        &self.spec
    }

    /// Length of the feature (the SVM's input).
    pub fn dim(&self) -> usize {
        self.file.svm.input_dim()
    }

    /// Whether the encoder has a `cnn-global` term (the descriptors must carry the global vector).
    pub fn needs_global(&self) -> bool {
        self.spec.terms.contains(&Term::CnnGlobal)
    }

    /// The patch settings of a classifier trained on images; `None` for one
    /// trained on descriptor files.
    pub fn descriptor_params(&self) -> Option<DescriptorParams> {
        let i = &self.file.info.input;
        i.cnn.as_ref()?;
        Some(DescriptorParams {
            scales: i.scales.clone(),
            mode: if i.patch_mode == "exact" {
                PatchMode::Exact
            } else {
                PatchMode::Dense
            },
            stride: i.stride as f32,
            max_image_side: i.max_image_side,
        })
    }

    /// Checks that `net` is the network the classifier was trained with
    /// (name, and the weights' fingerprint for a built-in one).
    ///
    /// # Errors
    /// A classifier of descriptor files, another network or other weights.
    pub fn check_cnn(&self, net: &fisherkit_cnn::Backbone) -> Result<(), PipelineError> {
        let Some(want) = &self.file.info.input.cnn else {
            return Err(PipelineError::Config(
                "this classifier was trained on descriptor files, not images: give it descriptors"
                    .into(),
            ));
        };
        let got = cnn_info(net, None);
        if got.name != want.name || got.weights_hash != want.weights_hash {
            return Err(PipelineError::Config(format!(
                "this classifier was trained on the descriptors of the CNN {}{}, not {}{}",
                want.name,
                want.weights_hash
                    .as_ref()
                    .map(|h| format!(" (weights {h})"))
                    .unwrap_or_default(),
                got.name,
                got.weights_hash
                    .as_ref()
                    .map(|h| format!(" (weights {h})"))
                    .unwrap_or_default(),
            )));
        }
        Ok(())
    }

    /// The raw encodings of one image's descriptors (one array per scale,
    /// raw CNN log-probabilities or descriptor-file rows).
    ///
    /// # Errors
    /// Descriptors of another width or scale count, a missing global vector.
    pub fn raw_encodings(&self, d: &ImageDescriptors) -> Result<RawEncodings, PipelineError> {
        let n_scales = self.file.pcas.len();
        if d.scales.len() != n_scales {
            return Err(PipelineError::Dataset(format!(
                "{} scale(s) of descriptors for a classifier of {n_scales}",
                d.scales.len()
            )));
        }
        let mut raw = RawEncodings {
            gmm: vec![None; n_scales],
            mfa: vec![None; n_scales],
            global: None,
        };
        for (s, (x, pca)) in d.scales.iter().zip(&self.file.pcas).enumerate() {
            let z = project(pca, x.view(), s)?;
            let enc = |e: &dyn Encoder<f32>| {
                e.encode(z.view())
                    .map_err(|e| PipelineError::at("encoding", e))
            };
            raw.gmm[s] = self.gmm[s].as_deref().map(enc).transpose()?;
            raw.mfa[s] = self.mfa[s].as_deref().map(enc).transpose()?;
        }
        if self.needs_global() {
            raw.global = Some(d.global.clone().ok_or_else(|| {
                PipelineError::at("encoding", "the CNN's global vector was not computed")
            })?);
        }
        Ok(raw)
    }

    /// The feature of an image from its raw encodings (see the module docs).
    ///
    /// # Errors
    /// A raw encoding missing or of the wrong width.
    pub fn features(&self, raw: &RawEncodings) -> Result<Array1<f32>, PipelineError> {
        let mut x = Vec::with_capacity(self.dim());
        let power = self.file.info.power;
        for ((ti, s), (cols, white)) in part_list(&self.spec, self.file.pcas.len())
            .into_iter()
            .zip(&self.parts)
        {
            let term = &self.spec.terms[ti];
            let row = match term {
                Term::GmmFv(_) => raw.gmm.get(s).and_then(Option::as_ref),
                Term::MfaFs(_) => raw.mfa.get(s).and_then(Option::as_ref),
                Term::CnnGlobal => raw.global.as_ref(),
            }
            .ok_or_else(|| {
                PipelineError::at("encoding", format!("no raw encoding for {}", term.name()))
            })?;
            let end = cols.iter().map(|c| c.end).max().unwrap_or(0);
            if row.len() < end {
                return Err(PipelineError::at(
                    "encoding",
                    format!(
                        "a raw encoding of {} values for {} (needs {end})",
                        row.len(),
                        term.name()
                    ),
                ));
            }
            let start = x.len();
            for c in cols {
                x.extend_from_slice(&row.as_slice().expect("contiguous")[c.clone()]);
            }
            finish_part(
                &mut x[start..],
                white.as_ref().map(|w| w.as_slice().expect("contiguous")),
                power,
                self.file.info.l2,
            );
        }
        Ok(Array1::from(x))
    }

    /// The class scores of a feature and the winning class.
    ///
    /// # Errors
    /// A feature of the wrong length.
    pub fn score(&self, x: ArrayView1<'_, f32>) -> Result<Scored, PipelineError> {
        Ok(self.score_batch(&[x])?.remove(0))
    }

    /// [`Self::score`] of a batch of features, each with the same bits as
    /// alone ([`fisherkit::linalg::dots`]); the SVM's weights are read once
    /// per batch instead of once per feature.
    ///
    /// # Errors
    /// A feature of another dimension.
    pub fn score_batch(&self, xs: &[ArrayView1<'_, f32>]) -> Result<Vec<Scored>, PipelineError> {
        if let Some(x) = xs.iter().find(|x| x.len() != self.dim()) {
            return Err(PipelineError::Dataset(format!(
                "a feature of {} values for a classifier of {}",
                x.len(),
                self.dim()
            )));
        }
        let svm = &self.file.svm;
        let owned: Vec<std::borrow::Cow<'_, [f32]>> = xs
            .iter()
            .map(|x| {
                x.as_slice()
                    .map(std::borrow::Cow::Borrowed)
                    .unwrap_or_else(|| x.to_vec().into())
            })
            .collect();
        let rows: Vec<&[f32]> = owned.iter().map(|x| x.as_ref()).collect();
        let s = fisherkit::linalg::dots(svm.coef().as_standard_layout().view(), &rows);
        Ok(s.rows()
            .into_iter()
            .map(|r| {
                let scores: Vec<f64> = r
                    .iter()
                    .zip(svm.intercept())
                    .map(|(&v, &b)| v + b as f64)
                    .collect();
                Scored {
                    class: argmax(&scores),
                    scores,
                }
            })
            .collect())
    }

    /// Scores one image's descriptors.
    ///
    /// # Errors
    /// As [`Self::raw_encodings`].
    pub fn predict_descriptors(
        &self,
        d: &ImageDescriptors,
    ) -> Result<(Scored, Array1<f32>), PipelineError> {
        let x = self.features(&self.raw_encodings(d)?)?;
        Ok((self.score(x.view())?, x))
    }
}

/// The first index of the largest value (`NaN`s never win).
pub(crate) fn argmax(v: &[f64]) -> usize {
    let mut best = 0;
    for (i, &s) in v.iter().enumerate() {
        if s > v[best] || v[best].is_nan() {
            best = i;
        }
    }
    best
}

fn project(
    pca: &Pca<f32>,
    x: ndarray::ArrayView2<'_, f32>,
    s: usize,
) -> Result<ndarray::Array2<f32>, PipelineError> {
    if x.ncols() != pca.input_dim() {
        return Err(PipelineError::Dataset(format!(
            "descriptors of width {} at scale {s}; the classifier's PCA reads {}",
            x.ncols(),
            pca.input_dim()
        )));
    }
    pca.transform(x).map_err(PipelineError::stage("PCA"))
}

/// The parts of `spec` in feature order: (term index, scale), `cnn-global`
/// once (with the first scale), every other term at every scale.
pub(crate) fn part_list(spec: &EncoderSpec, n_scales: usize) -> Vec<(usize, usize)> {
    let mut v = Vec::new();
    for (ti, term) in spec.terms.iter().enumerate() {
        let scales = if *term == Term::CnnGlobal {
            1
        } else {
            n_scales
        };
        v.extend((0..scales).map(|s| (ti, s)));
    }
    v
}

/// The columns of `term` in its raw row: GMM-FV (prior K, mean KD, var KD),
/// MFA-FS (mean KD, loading KDR), `cnn-global` all of its `global_dim`.
/// `None` when the term's model is missing.
pub(crate) fn term_columns(
    term: &Term,
    gmm: Option<(usize, usize)>,
    mfa: Option<(usize, usize, usize)>,
    global_dim: usize,
) -> Option<Vec<Range<usize>>> {
    use fisherkit::encode::{FvPart, MfaPart};
    Some(match term {
        Term::CnnGlobal => std::iter::once(0..global_dim).collect(),
        Term::GmmFv(parts) => {
            let (k, d) = gmm?;
            [
                (FvPart::Prior, 0..k),
                (FvPart::Mean, k..k + k * d),
                (FvPart::Var, k + k * d..k + 2 * k * d),
            ]
            .into_iter()
            .filter(|(p, _)| parts.contains(p))
            .map(|(_, r)| r)
            .collect()
        }
        Term::MfaFs(parts) => {
            let (k, d, r) = mfa?;
            [
                (MfaPart::Mean, 0..k * d),
                (MfaPart::Loading, k * d..k * d + k * d * r),
            ]
            .into_iter()
            .filter(|(p, _)| parts.contains(p))
            .map(|(_, r)| r)
            .collect()
        }
    })
}

/// The per-column scale of the whitening, $1/\sqrt{\max(F_j, 10^{-12}\bar F)}$
/// (as [`fisherkit::encode::MfaFisherScore::set_whitening`]).
pub(crate) fn white_scale(fim: &Array1<f32>) -> Array1<f32> {
    let mean = fim.iter().map(|&v| v as f64).sum::<f64>() / fim.len().max(1) as f64;
    let floor = (1e-12 * mean).max(f64::MIN_POSITIVE);
    fim.mapv(|v| (1.0 / (v as f64).max(floor).sqrt()) as f32)
}

/// Whitening (if `white`) and signed power ρ of one part's values, in place.
pub(crate) fn whiten_and_power(x: &mut [f32], white: Option<&[f32]>, power: f64) {
    if let Some(s) = white {
        x.iter_mut().zip(s).for_each(|(v, s)| *v *= s);
    }
    if power == 0.5 {
        x.iter_mut().for_each(|v| *v = v.signum() * v.abs().sqrt());
    } else if power != 1.0 {
        let p = power as f32;
        x.iter_mut().for_each(|v| *v = v.signum() * v.abs().powf(p));
    }
}

/// $1/\|p\|$ from the sum of squares of a part's transformed values (1 without
/// L2 or below the floor).
pub(crate) fn inv_norm(sum_sq: f64, l2: bool) -> f64 {
    let n = sum_sq.sqrt();
    if l2 && n > L2_FLOOR {
        1.0 / n
    } else {
        1.0
    }
}

/// One part's final values: whitening, power, then its own L2 norm.
fn finish_part(x: &mut [f32], white: Option<&[f32]>, power: f64, l2: bool) {
    whiten_and_power(x, white, power);
    let sq: f64 = x.iter().map(|&v| v as f64 * v as f64).sum();
    let inv = inv_norm(sq, l2) as f32;
    x.iter_mut().for_each(|v| *v *= inv);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn argmax_takes_the_first_of_equal_scores_and_never_nan() {
        assert_eq!(argmax(&[1.0, 3.0, 3.0]), 1);
        assert_eq!(argmax(&[f64::NAN, -1.0]), 1);
        assert_eq!(argmax(&[0.5]), 0);
    }

    #[test]
    fn a_part_is_powered_whitened_and_unit_length() {
        let mut x = [4.0f32, -9.0, 0.0];
        finish_part(&mut x, Some(&[1.0, 4.0, 1.0]), 0.5, true);
        // sqrt(4) = 2, -sqrt(36) = -6 → (2, -6, 0) / sqrt(40)
        let n = 40f32.sqrt();
        assert!((x[0] - 2.0 / n).abs() < 1e-6 && (x[1] + 6.0 / n).abs() < 1e-6 && x[2] == 0.0);
        let mut z = [0.0f32; 4];
        finish_part(&mut z, None, 0.5, true);
        assert_eq!(z, [0.0; 4]);
    }
}
