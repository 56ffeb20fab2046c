//! GMM work: one EM iteration and Fisher-vector encoding.

use crate::{gflops, median, time_reps};
use fisherkit::encode::{Accumulation, FisherVector, FisherVectorParams};
use fisherkit::gmm::{DiagGmm, VarianceFloor};
use fisherkit::Encoder;
use ndarray::{Array2, ArrayView2};
use serde_json::{json, Value};
use std::time::Instant;

/// One EM iteration from `gmm` on `x` (N, D): `sufficient_statistics` (E-step
/// sums) then `update_from_statistics` (M-step, VLFeat's absolute variance
/// floor 1e-4), each timed. Also times the posterior kernel alone
/// (`predict_proba`, one run). Returns the JSON record and the means after the iteration.
pub fn em_iteration(
    gmm: &DiagGmm<f32>,
    x: ArrayView2<'_, f32>,
    reps: usize,
) -> Result<(Value, Array2<f32>), String> {
    let (n, d) = x.dim();
    let k = gmm.n_components();
    let mut err = None;
    let (mut e_ts, mut m_ts) = (Vec::new(), Vec::new());
    let mut means = gmm.means().to_owned();
    let it = time_reps(reps, || {
        let t = Instant::now();
        let st = match gmm.sufficient_statistics(x) {
            Ok(st) => st,
            Err(e) => {
                err = Some(e.to_string());
                return;
            }
        };
        let t1 = Instant::now();
        match gmm.update_from_statistics(&st, VarianceFloor::Absolute(1e-4)) {
            Ok(m) => means = m.means().to_owned(),
            Err(e) => err = Some(e.to_string()),
        }
        e_ts.push((t1 - t).as_secs_f64());
        m_ts.push(t1.elapsed().as_secs_f64());
    });
    if let Some(e) = err {
        return Err(e);
    }
    // drop the warm-up run
    let (e_ts, m_ts) = (&e_ts[1..], &m_ts[1..]);
    // the posterior kernel alone, once (the data are warm after the EM runs)
    let t = Instant::now();
    if let Err(e) = gmm.predict_proba(x) {
        err = Some(e.to_string());
    }
    let post = [t.elapsed().as_secs_f64()];
    if let Some(e) = err {
        return Err(e);
    }
    let stats_s = median(e_ts);
    let post_s = median(&post);
    let v = json!({
        "work": "gmm-em",
        "n": n, "d": d, "k": k,
        "iteration_s_all": it,
        "iteration_s": median(&it),
        "stats_s_all": e_ts,
        "stats_s": stats_s,
        "m_step_s": median(m_ts),
        "stats_gflops": gflops(8.0 * (n * d * k) as f64, stats_s),
        "posteriors_s_all": post,
        "posteriors_s": post_s,
        "posteriors_gflops": gflops(4.0 * (n * d * k) as f64, post_s),
    });
    Ok((v, means))
}

/// `auto`, `sparse` or `dense`: the Fisher vector's accumulation path.
pub fn parse_accumulation(s: &str) -> Result<Accumulation, String> {
    match s {
        "auto" => Ok(Accumulation::Auto),
        "sparse" => Ok(Accumulation::Sparse),
        "dense" => Ok(Accumulation::Dense),
        _ => Err(format!(
            "unknown accumulation {s:?} (expected auto, sparse or dense)"
        )),
    }
}

/// Encodes every bag (M, D) with the default (improved: mean + var blocks,
/// signed square root, L2; exact posteriors) Fisher vector through
/// `encode_batch` (parallel over bags); per-bag time is the batch time divided
/// by the number of bags. `screening` false turns the screened kernel off
/// (after `path`, which turns it off for `Dense`). Returns the JSON record and
/// the encoding of bag 0 (1, 2KD).
pub fn fisher_vectors(
    gmm: &DiagGmm<f32>,
    bags: &[ArrayView2<'_, f32>],
    reps: usize,
    path: Accumulation,
    screening: bool,
) -> Result<(Value, Array2<f32>), String> {
    let mut enc = FisherVector::new(gmm, FisherVectorParams::default())
        .map_err(|e| e.to_string())?
        .with_accumulation(path);
    if !screening {
        enc = enc.with_screening(false);
    }
    let fv0 = enc.encode(bags[0]).map_err(|e| e.to_string())?;
    let mut err = None;
    let ts = time_reps(reps, || {
        if let Err(e) = enc.encode_batch(bags) {
            err = Some(e.to_string());
        }
    });
    if let Some(e) = err {
        return Err(e);
    }
    let nb = bags.len() as f64;
    let per_bag: Vec<f64> = ts.iter().map(|t| t / nb).collect();
    let f32_err = f32_vs_f64(gmm, &bags[..bags.len().min(4)], path, screening)?;
    let v = json!({
        "work": "fv",
        "f32_vs_f64_raw_rel": f32_err,
        "bags": bags.len(),
        "bag_size": bags[0].nrows(),
        "d": gmm.dim(),
        "k": gmm.n_components(),
        "output_dim": enc.output_dim(),
        "per_bag_s_all": per_bag,
        "per_bag_s": median(&per_bag),
    });
    let len = fv0.len();
    Ok((
        v,
        fv0.into_shape_with_order((1, len))
            .map_err(|e| e.to_string())?,
    ))
}

/// Worst relative distance ‖v₃₂ − v₆₄‖ / ‖v₆₄‖ over `bags` between the raw
/// (un-normalised) Fisher vectors of the f32 bags under `gmm` and of the same
/// bags in f64 under the same model cast to f64 (same accumulation path and
/// screening), the accuracy of the f32 encoder (docs/math.md §2.7–2.8).
fn f32_vs_f64(
    gmm: &DiagGmm<f32>,
    bags: &[ArrayView2<'_, f32>],
    path: Accumulation,
    screening: bool,
) -> Result<f64, String> {
    let raw = FisherVectorParams {
        normalization: fisherkit::Normalization::NONE,
        ..FisherVectorParams::default()
    };
    let mut e32 = FisherVector::new(gmm, raw.clone())
        .map_err(|e| e.to_string())?
        .with_accumulation(path);
    let mut e64 = FisherVector::new(&gmm.cast::<f64>(), raw)
        .map_err(|e| e.to_string())?
        .with_accumulation(path);
    if !screening {
        e32 = e32.with_screening(false);
        e64 = e64.with_screening(false);
    }
    crate::worst_f32_vs_f64(&e32, &e64, bags)
}
