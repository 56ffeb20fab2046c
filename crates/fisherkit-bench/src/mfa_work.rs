//! MFA work: one EM iteration and MFA Fisher scores.

use crate::{gflops, median, time_reps};
use fisherkit::encode::{MfaFisherScore, MfaFisherScoreParams, MfaPart};
use fisherkit::mfa::Mfa;
use fisherkit::Encoder;
use ndarray::{Array2, ArrayView2};
use serde_json::{json, Value};
use std::time::Instant;

/// Relative floor on ψ passed to the M-step (times the variance of each dimension).
const PSI_FLOOR: f64 = 1e-3;

/// One MFA EM iteration from `mfa` on `x` (N, D): `sufficient_statistics` then
/// `update_from_statistics`. Returns the JSON record, the means (K, D) and ψ
/// (1, D) after the iteration.
pub fn em_iteration(
    mfa: &Mfa<f32>,
    x: ArrayView2<'_, f32>,
    reps: usize,
) -> Result<(Value, Array2<f32>, Array2<f32>), String> {
    let (n, d) = x.dim();
    let (k, r) = (mfa.n_components(), mfa.n_factors());
    let mut err = None;
    let (mut e_ts, mut m_ts) = (Vec::new(), Vec::new());
    let mut out = (mfa.means().to_owned(), mfa.psi().to_owned());
    let it = time_reps(reps, || {
        let t = Instant::now();
        let st = match mfa.sufficient_statistics(x) {
            Ok(st) => st,
            Err(e) => {
                err = Some(e.to_string());
                return;
            }
        };
        let t1 = Instant::now();
        match mfa.update_from_statistics(&st, PSI_FLOOR) {
            Ok(m) => out = (m.means().to_owned(), m.psi().to_owned()),
            Err(e) => err = Some(e.to_string()),
        }
        e_ts.push((t1 - t).as_secs_f64());
        m_ts.push(t1.elapsed().as_secs_f64());
    });
    if let Some(e) = err {
        return Err(e);
    }
    let stats_s = median(&e_ts[1..]);
    let it_s = median(&it);
    let v = json!({
        "work": "mfa-em",
        "n": n, "d": d, "k": k, "r": r,
        "iteration_s_all": it,
        "iteration_s": it_s,
        "stats_s": stats_s,
        "m_step_s": median(&m_ts[1..]),
        "gflops": gflops(4.0 * (n * d * k * r) as f64, it_s),
    });
    Ok((v, out.0, out.1))
}

/// MFA Fisher scores (mean + loading blocks, signed sqrt + L2) of every bag
/// through `encode_batch`; per-bag time = batch time / number of bags.
/// Returns the JSON record and the score of bag 0 (1, K·D·(R+1)).
pub fn fisher_scores(
    mfa: &Mfa<f32>,
    bags: &[ArrayView2<'_, f32>],
    reps: usize,
) -> Result<(Value, Array2<f32>), String> {
    let params = MfaFisherScoreParams {
        parts: vec![MfaPart::Mean, MfaPart::Loading],
        ..MfaFisherScoreParams::default()
    };
    let enc = MfaFisherScore::new(mfa.clone(), params).map_err(|e| e.to_string())?;
    let fs0 = enc.encode(bags[0]).map_err(|e| e.to_string())?;
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
    let (m, d) = bags[0].dim();
    let (k, r) = (mfa.n_components(), mfa.n_factors());
    let per = median(&per_bag);
    let f32_err = f32_vs_f64(mfa, &bags[..bags.len().min(4)])?;
    let v = json!({
        "work": "mfa-fs",
        "f32_vs_f64_raw_rel": f32_err,
        "bags": bags.len(), "bag_size": m, "d": d, "k": k, "r": r,
        "output_dim": enc.output_dim(),
        "per_bag_s_all": per_bag,
        "per_bag_s": per,
        "gflops": gflops(4.0 * (m * d * k * r) as f64, per),
    });
    let len = fs0.len();
    Ok((
        v,
        fs0.into_shape_with_order((1, len))
            .map_err(|e| e.to_string())?,
    ))
}

/// Worst relative distance ‖s₃₂ − s₆₄‖ / ‖s₆₄‖ over `bags` between the raw
/// (un-normalised) mean + loading scores of the f32 bags under `mfa` and of the
/// same bags in f64 under the same model cast to f64.
fn f32_vs_f64(mfa: &Mfa<f32>, bags: &[ArrayView2<'_, f32>]) -> Result<f64, String> {
    fn raw<F: fisherkit::Float>() -> MfaFisherScoreParams<F> {
        MfaFisherScoreParams {
            parts: vec![MfaPart::Mean, MfaPart::Loading],
            normalization: fisherkit::Normalization::NONE,
            ..MfaFisherScoreParams::default()
        }
    }
    let e32 = MfaFisherScore::new(mfa.clone(), raw()).map_err(|e| e.to_string())?;
    let m64 = mfa.cast::<f64>().map_err(|e| e.to_string())?;
    let e64 = MfaFisherScore::new(m64, raw()).map_err(|e| e.to_string())?;
    crate::worst_f32_vs_f64(&e32, &e64, bags)
}

/// The large products of the MFA kernel alone (`docs/math.md` §5.2), with the kernel's
/// shapes and layouts, on chunks of `fisherkit::mfa::MFA_CHUNK_ROWS` rows: per chunk of n
/// rows, $P^\top$ (K(R+1), n) $= [W | \Psi^{-1}\mu']^\top Y^\top$, $Q^\top$ (K, n) $=
/// \Psi^{-1}(Y^2)^\top$, the statistics $Y^\top E^\top$ (D, K(R+1)) and — the EM only —
/// $\sum h y^2$ (K, D). Times `rows` rows (the EM) and one bag of `bag` rows (the Fisher
/// score), for comparison with [`em_iteration`] and [`fisher_scores`]: the kernel cannot be
/// faster than its products.
pub fn products_only(rows: usize, bag: usize, d: usize, k: usize, r: usize, reps: usize) -> Value {
    use fisherkit::linalg::{gemm, par_all, Par};
    let par = if rayon::current_num_threads() <= 1 {
        Par::Seq
    } else {
        par_all()
    };
    let chunk = fisherkit::mfa::MFA_CHUNK_ROWS;
    let w = k * (r + 1);
    let fill = |a: usize, b: usize, s: f32| {
        Array2::from_shape_fn((a, b), |(i, j)| ((i * 7 + j * 13) % 17) as f32 * s - 0.5)
    };
    let (stacked_t, inv_psi) = (fill(w, d, 0.01), fill(k, d, 0.01));
    let (y, y2) = (fill(chunk, d, 0.03), fill(chunk, d, 0.02));
    let et_full = fill(w, chunk, 0.01);
    // (w, n) contiguous copies for every chunk length that occurs, made before the timing
    let ets: std::collections::HashMap<usize, Array2<f32>> =
        [chunk, rows % chunk, bag % chunk, bag.min(chunk)]
            .into_iter()
            .filter(|&n| n > 0)
            .map(|n| {
                (
                    n,
                    et_full
                        .slice(ndarray::s![.., ..n])
                        .as_standard_layout()
                        .into_owned(),
                )
            })
            .collect();
    let (mut pt, mut qt) = (vec![0f32; w * chunk], vec![0f32; k * chunk]);
    let (mut syg, mut syy) = (Array2::<f32>::zeros((d, w)), Array2::zeros((k, d)));
    // One chunk of n rows, every buffer (rows, n) contiguous as in the kernel; `em` adds
    // the Σ h y² product.
    let mut run_chunk = |n: usize, em: bool| {
        use ndarray::{s, ArrayViewMut2};
        let (y, y2) = (y.slice(s![..n, ..]), y2.slice(s![..n, ..]));
        let et = &ets[&n];
        let ptv = ArrayViewMut2::from_shape((w, n), &mut pt[..w * n]).expect("w·n");
        gemm(ptv, false, stacked_t.view(), y.t(), 1.0, par);
        let qtv = ArrayViewMut2::from_shape((k, n), &mut qt[..k * n]).expect("k·n");
        gemm(qtv, false, inv_psi.view(), y2.t(), 1.0, par);
        gemm(syg.view_mut(), true, y.t(), et.t(), 1.0, par);
        if em {
            gemm(syy.view_mut(), true, et.slice(s![..k, ..]), y2, 1.0, par);
        }
    };
    let mut over = |total: usize, em: bool| {
        let mut left = total;
        while left > 0 {
            let n = left.min(chunk);
            run_chunk(n, em);
            left -= n;
        }
    };
    let em = time_reps(reps, || over(rows, true));
    let fs = time_reps(reps, || over(bag, false));
    let (em_s, fs_s) = (median(&em), median(&fs));
    json!({
        "work": "mfa-products",
        "n": rows, "bag": bag, "d": d, "k": k, "r": r, "chunk_rows": chunk,
        "em_products_s_all": em,
        "em_products_s": em_s,
        "fs_products_s_all": fs,
        "fs_products_s": fs_s,
        // the flops the products do, and the benchmark's count 4·N·D·K·R
        "em_products_gflops": gflops(4.0 * (rows * d * k * (r + 2)) as f64, em_s),
        "fs_products_gflops": gflops(2.0 * (bag * d * k * (2 * r + 3)) as f64, fs_s),
        "em_counted_gflops": gflops(4.0 * (rows * d * k * r) as f64, em_s),
        "fs_counted_gflops": gflops(4.0 * (bag * d * k * r) as f64, fs_s),
    })
}
