//! GMM work: one EM iteration and Fisher-vector encoding.

use crate::{gflops, median, time_reps};
use fisherkit::encode::{FisherVector, FisherVectorParams};
use fisherkit::gmm::DiagGmm;
use fisherkit::Encoder;
use ndarray::{Array2, ArrayView2};
use serde_json::{json, Value};

/// Times the posterior kernel (`predict_proba`, (N, 2D)·(2D, K): 4NDK flops)
/// on `x` (N, D). Returns the JSON record and the means after the iteration.
pub fn em_iteration(
    gmm: &DiagGmm<f32>,
    x: ArrayView2<'_, f32>,
    reps: usize,
) -> Result<(Value, Array2<f32>), String> {
    let (n, d) = x.dim();
    let k = gmm.n_components();
    let mut err = None;
    let post = time_reps(reps, || {
        if let Err(e) = gmm.predict_proba(x) {
            err = Some(e.to_string());
        }
    });
    if let Some(e) = err {
        return Err(e);
    }
    let post_s = median(&post);
    // Breakdown of the posterior kernel on one thread: GEMM-form log-joints, then exp/normalise.
    let chunk = fisherkit::gmm::CHUNK_ROWS;
    let mut scratch = Array2::<f32>::zeros((0, 0));
    let mut lj = Array2::<f32>::zeros((chunk, k));
    let mut ll = vec![0.0f64; chunk];
    let (mut t_lj, mut t_post) = (0.0, 0.0);
    for xc in x.axis_chunks_iter(ndarray::Axis(0), chunk) {
        if xc.nrows() != chunk {
            continue;
        }
        let t = std::time::Instant::now();
        gmm.log_joint_into(xc, lj.view_mut(), &mut scratch, fisherkit::linalg::Par::Seq);
        let t1 = std::time::Instant::now();
        DiagGmm::<f32>::log_joint_to_posteriors(lj.view_mut(), &mut ll);
        t_lj += (t1 - t).as_secs_f64();
        t_post += t1.elapsed().as_secs_f64();
    }
    let v = json!({
        "work": "gmm-em",
        "n": n, "d": d, "k": k,
        "posteriors_s_all": post,
        "posteriors_s": post_s,
        "posteriors_gflops": gflops(4.0 * (n * d * k) as f64, post_s),
        "iteration_s": null,
        "log_joint_seq_s": t_lj,
        "to_posteriors_seq_s": t_post,
    });
    Ok((v, gmm.means().to_owned()))
}

/// Encodes every bag (M, D) with the default (improved: mean + var blocks,
/// signed square root, L2; exact posteriors) Fisher vector through
/// `encode_batch` (parallel over bags); per-bag time is the batch time divided
/// by the number of bags. Returns the JSON record and the encoding of bag 0 (1, 2KD).
pub fn fisher_vectors(
    gmm: &DiagGmm<f32>,
    bags: &[ArrayView2<'_, f32>],
    reps: usize,
) -> Result<(Value, Array2<f32>), String> {
    let enc = FisherVector::new(gmm, FisherVectorParams::default()).map_err(|e| e.to_string())?;
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
    let v = json!({
        "work": "fv",
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
