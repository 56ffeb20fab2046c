//! `fisherkit encode`: bags of descriptors → one row per bag.

use super::{check_bags, check_output};
use crate::args::{EncodeArgs, EncoderArg};
use crate::error::CliError;
use crate::progress::Ui;
use fisherkit::data::check_matrix;
use fisherkit::encode::{
    parse_fv_parts, FisherVector, FisherVectorParams, MfaFisherScore, MfaFisherScoreParams, Vlad,
    VladParams,
};
use fisherkit::{EncodeError, Encoder, Normalization};
use fisherkit_io::{
    file_kind, mfa_parts_string, read_bags, read_npy, write_npy, Bags, Element, FileKind, GmmModel,
    Matrix, MfaWhitening, Model, ModelFile, NamedBags, Whitened,
};
use ndarray::{s, Array2, ArrayView2};
use std::path::Path;

/// Encoder options after validation of the flags.
#[derive(Debug, Clone)]
struct Options {
    encoder: EncoderArg,
    /// `--parts` as given; parsed once the model kind is known (GMM and MFA
    /// have different parts).
    parts: Option<String>,
    power: f64,
    l2: bool,
    fast: bool,
    vlfeat_skips: bool,
    no_whitening: bool,
}

impl Options {
    fn from_args(a: &EncodeArgs) -> Result<Self, CliError> {
        let default_power = match a.encoder {
            EncoderArg::Fv => 0.5,
            EncoderArg::Vlad => 1.0,
        };
        let power = a.power.unwrap_or(default_power);
        if !(power.is_finite() && power > 0.0) {
            return Err(CliError::usage(format!(
                "--power must be a finite number > 0 (1 disables it), got {power}"
            )));
        }
        if a.encoder == EncoderArg::Vlad {
            for (given, flag) in [
                (a.parts.is_some(), "--parts"),
                (a.fast, "--fast"),
                (a.vlfeat_skips, "--vlfeat-skips"),
            ] {
                if given {
                    return Err(CliError::usage(format!(
                        "{flag} applies to the Fisher vector only, not to --encoder vlad"
                    )));
                }
            }
            if power != 1.0 && power != 0.5 {
                return Err(CliError::usage(format!(
                    "--encoder vlad supports --power 0.5 (signed square root) or 1, got {power}"
                )));
            }
        }
        Ok(Self {
            encoder: a.encoder,
            parts: a.parts.clone(),
            power,
            l2: !a.no_l2,
            fast: a.fast,
            vlfeat_skips: a.vlfeat_skips,
            no_whitening: a.no_whitening,
        })
    }
}

/// What `--model` holds.
enum Loaded {
    /// A safetensors model file, with the whitening block of an MFA file.
    Model(Box<Model>, Option<MfaWhitening>),
    /// k-means centroids (K, D) from an `.npy` file (VLAD only).
    Centroids(Matrix),
}

impl Loaded {
    fn dim(&self) -> usize {
        match self {
            Loaded::Model(m, _) => m.dim(),
            Loaded::Centroids(c) => c.dim().1,
        }
    }
}

fn load_model(path: &Path, encoder: EncoderArg) -> Result<Loaded, CliError> {
    if file_kind(path)? == FileKind::Npy {
        if encoder != EncoderArg::Vlad {
            return Err(CliError::other(format!(
                "{}: is an .npy array (k-means centroids?), not a model file; \
                 the Fisher vector needs a GMM (.safetensors); centroids work with --encoder vlad",
                path.display()
            )));
        }
        let c = read_npy(path)?;
        match &c {
            Matrix::F32(a) => check_centroids(path, a.view())?,
            Matrix::F64(a) => check_centroids(path, a.view())?,
        }
        return Ok(Loaded::Centroids(c));
    }
    let (Whitened { model, whitening }, _) = Whitened::<Model>::read_with_metadata(path)?;
    Ok(Loaded::Model(Box::new(model), whitening))
}

fn check_centroids<F: fisherkit::Float>(path: &Path, c: ArrayView2<'_, F>) -> Result<(), CliError> {
    check_matrix(c, None, "centroid matrix")
        .map_err(|e| CliError::other(format!("{}: {e}", path.display())))
}

pub fn run(a: &EncodeArgs, ui: &Ui) -> Result<(), CliError> {
    let opts = Options::from_args(a)?;
    check_output(&a.output)?;
    let model = load_model(&a.model, opts.encoder)?;
    let bags = read_bags(&a.input)?;
    match bags {
        Bags::F32(b) => encode_typed::<f32>(a, &opts, &model, b, ui),
        Bags::F64(b) => encode_typed::<f64>(a, &opts, &model, b, ui),
    }
}

fn encode_typed<F: Element>(
    a: &EncodeArgs,
    opts: &Options,
    model: &Loaded,
    bags: NamedBags<F>,
    ui: &Ui,
) -> Result<(), CliError> {
    check_bags(&a.input, &a.model, model.dim(), &bags)?;
    let encoder = build_encoder::<F>(&a.model, model, opts)?;
    let n = bags.len();
    let mut out = Array2::<F>::zeros((n, encoder.output_dim()));
    let views = bags.views();
    let chunk = (rayon::current_num_threads() * 4).max(8);
    let bar = ui.bar(n as u64, "encoding");
    bar.set_message("bags");
    for (c, group) in views.chunks(chunk).enumerate() {
        let enc = encoder
            .encode_batch(group)
            .map_err(|e| CliError::other(format!("{}: {e}", a.input.display())))?;
        out.slice_mut(s![c * chunk..c * chunk + group.len(), ..])
            .assign(&enc);
        bar.inc(group.len() as u64);
    }
    bar.finish_and_clear();
    if let Some(((i, j), v)) = out.indexed_iter().find(|(_, v)| !v.is_finite()) {
        return Err(CliError::other(format!(
            "internal error: encoding of bag `{}` has a non-finite value ({v}) at {j}; \
             nothing was written",
            bags.names[i]
        )));
    }
    write_npy(&a.output, out.view())?;
    ui.info(format!(
        "encoded {n} bag{} into ({n}, {}) {} → {}",
        if n == 1 { "" } else { "s" },
        out.ncols(),
        F::DTYPE,
        a.output.display()
    ));
    Ok(())
}

/// The encoder for `model` in the bags' dtype `F`.
fn build_encoder<F: Element>(
    model_path: &Path,
    model: &Loaded,
    opts: &Options,
) -> Result<Box<dyn Encoder<F>>, CliError> {
    let invalid = |e: EncodeError| CliError::usage(e);
    let vlad_params = || VladParams {
        square_root: opts.power == 0.5,
        unnormalized: !opts.l2,
        ..VladParams::default()
    };
    match model {
        Loaded::Centroids(_) if opts.no_whitening => Err(CliError::usage(
            "--no-whitening applies to MFA models, not to k-means centroids",
        )),
        Loaded::Centroids(c) => {
            let means: Array2<F> = match c {
                Matrix::F32(a) => a.mapv(|v| F::from_f64_lossy(v as f64)),
                Matrix::F64(a) => a.mapv(F::from_f64_lossy),
            };
            Ok(Box::new(Vlad::new(means, vlad_params()).map_err(invalid)?))
        }
        Loaded::Model(m, whitening) => match &**m {
            Model::Gmm(g) => {
                if opts.no_whitening {
                    return Err(CliError::usage(format!(
                        "--no-whitening applies to MFA models, not to the GMM {}",
                        model_path.display()
                    )));
                }
                let gmm = gmm_as::<F>(model_path, g)?;
                match opts.encoder {
                    EncoderArg::Fv => {
                        let parts = match &opts.parts {
                            Some(list) => parse_fv_parts(list)
                                .map_err(|e| CliError::usage(format!("--parts: {e}")))?,
                            None => FisherVectorParams::default().parts,
                        };
                        let params = FisherVectorParams {
                            parts,
                            normalization: Normalization {
                                power: opts.power,
                                l2: opts.l2,
                            },
                            fast: opts.fast,
                            vlfeat_skips: opts.vlfeat_skips,
                        };
                        Ok(Box::new(FisherVector::new(&gmm, params).map_err(invalid)?))
                    }
                    EncoderArg::Vlad => Ok(Box::new(
                        Vlad::from_gmm(&gmm, vlad_params()).map_err(invalid)?,
                    )),
                }
            }
            Model::Mfa(m) => {
                if opts.encoder == EncoderArg::Vlad {
                    return Err(CliError::usage(format!(
                        "{}: is an MFA model; --encoder vlad needs a GMM or k-means centroids",
                        model_path.display()
                    )));
                }
                for (given, flag) in [(opts.fast, "--fast"), (opts.vlfeat_skips, "--vlfeat-skips")]
                {
                    if given {
                        return Err(CliError::usage(format!(
                            "{flag} applies to GMM Fisher vectors, not to the MFA model {}",
                            model_path.display()
                        )));
                    }
                }
                let mfa = m.to_dtype::<F>().map_err(|e| {
                    CliError::other(format!(
                        "{}: cannot use the {} model as {}: {e}",
                        model_path.display(),
                        m.dtype(),
                        F::DTYPE
                    ))
                })?;
                let whitening = whitening.as_ref().filter(|_| !opts.no_whitening);
                let parts = match (&opts.parts, whitening) {
                    (Some(list), _) => super::mfa_parts_arg(Some(list))?,
                    // the parts the stored whitening was estimated for
                    (None, Some(w)) => w.parts.clone(),
                    (None, None) => MfaFisherScoreParams::<F>::default().parts,
                };
                let whitening = match whitening {
                    Some(w) if w.parts != parts => {
                        return Err(CliError::usage(format!(
                            "--parts {} differs from the parts the whitening stored in {} was \
                             estimated for ({}); use --parts {} or --no-whitening",
                            mfa_parts_string(&parts),
                            model_path.display(),
                            w.parts_string(),
                            w.parts_string()
                        )))
                    }
                    Some(w) => Some(w.fisher_information_as::<F>()),
                    None => None,
                };
                let params = MfaFisherScoreParams {
                    parts,
                    normalization: Normalization {
                        power: opts.power,
                        l2: opts.l2,
                    },
                    whitening,
                };
                Ok(Box::new(MfaFisherScore::new(mfa, params).map_err(invalid)?))
            }
        },
    }
}

/// The GMM in dtype `F` (cast when the model file's dtype differs from the data's).
fn gmm_as<F: Element>(path: &Path, g: &GmmModel) -> Result<fisherkit::gmm::DiagGmm<F>, CliError> {
    g.to_dtype::<F>().map_err(|e| {
        CliError::other(format!(
            "{}: cannot convert the {} model to {}: {e}",
            path.display(),
            g.dtype(),
            F::DTYPE
        ))
    })
}
