//! GMM work: one EM iteration and Fisher-vector encoding.

use crate::{gflops, median, time_reps};
use fisherkit::gmm::DiagGmm;
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

/// Encodes every bag (M, D) with the improved Fisher vector; per-bag time is
/// the batch time divided by the number of bags.
pub fn fisher_vectors(
    _gmm: &DiagGmm<f32>,
    _bags: &[ArrayView2<'_, f32>],
    _reps: usize,
) -> Result<(Value, Array2<f32>), String> {
    Err("fisherkit::encode::FisherVector is not merged yet".into())
}
