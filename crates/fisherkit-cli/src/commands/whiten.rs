//! `fisherkit mfa whiten`: estimate the diagonal Fisher information of the
//! MFA Fisher score on training bags and store it with the model.

use super::{check_bags, check_output, mfa_parts_arg};
use crate::args::MfaWhitenArgs;
use crate::error::CliError;
use crate::progress::Ui;
use fisherkit::encode::{MfaFisherScore, MfaFisherScoreParams, MfaPart};
use fisherkit::Normalization;
use fisherkit_io::{
    read_bags, Bags, Element, MfaModel, MfaWhitening, Model, ModelFile, NamedBags, Whitened,
};
use std::collections::BTreeMap;

pub fn run(a: &MfaWhitenArgs, ui: &Ui) -> Result<(), CliError> {
    let parts = mfa_parts_arg(a.parts.as_deref())?;
    check_output(&a.output)?;
    let (Whitened { model, .. }, meta) = Whitened::<Model>::read_with_metadata(&a.model)?;
    let Model::Mfa(model) = model else {
        return Err(CliError::other(format!(
            "{}: is a GMM model (kind \"gmm\"); `mfa whiten` needs an MFA model (kind \"mfa\")",
            a.model.display()
        )));
    };
    match read_bags(&a.input)? {
        Bags::F32(b) => whiten_typed(a, &parts, model, meta, b, ui),
        Bags::F64(b) => whiten_typed(a, &parts, model, meta, b, ui),
    }
}

fn whiten_typed<F: Element>(
    a: &MfaWhitenArgs,
    parts: &[MfaPart],
    model: MfaModel,
    meta: BTreeMap<String, String>,
    bags: NamedBags<F>,
    ui: &Ui,
) -> Result<(), CliError> {
    if bags.len() < 2 {
        return Err(CliError::other(format!(
            "{}: has {} bag{}; the whitening is a variance over bags and needs at least 2 \
             (an .npz archive of (N_i, D) arrays)",
            a.input.display(),
            bags.len(),
            if bags.len() == 1 { "" } else { "s" }
        )));
    }
    check_bags(&a.input, &a.model, model.dim(), &bags)?;
    let mfa = model.to_dtype::<F>().map_err(|e| {
        CliError::other(format!(
            "{}: cannot use the {} model as {}: {e}",
            a.model.display(),
            model.dtype(),
            F::DTYPE
        ))
    })?;
    let params = MfaFisherScoreParams {
        parts: parts.to_vec(),
        normalization: Normalization {
            power: 1.0,
            l2: false,
        },
        whitening: None,
    };
    let enc = MfaFisherScore::new(mfa, params).map_err(CliError::usage)?;
    let fim = enc
        .fit_whitening(&bags.views())
        .map_err(|e| CliError::other(format!("{}: {e}", a.input.display())))?;
    if let Some((j, v)) = fim.iter().enumerate().find(|(_, v)| !v.is_finite()) {
        return Err(CliError::other(format!(
            "{}: the Fisher-information estimate has a non-finite value ({v}) at {j}; nothing \
             was written",
            a.input.display()
        )));
    }
    let w = MfaWhitening::new(parts, &fim);
    let mut extra = meta;
    extra.insert("whitening_bags".into(), bags.len().to_string());
    extra.insert("whitening_dtype".into(), F::DTYPE.to_string());
    let parts_name = w.parts_string();
    Whitened {
        model,
        whitening: Some(w),
    }
    .write(&a.output, &extra)?;
    ui.info(format!(
        "whitening for parts {} ({} values) estimated on {} bags ({}) → {}",
        parts_name,
        fim.len(),
        bags.len(),
        F::DTYPE,
        a.output.display()
    ));
    Ok(())
}
