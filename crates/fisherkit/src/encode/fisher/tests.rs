use super::bag::{DENSE_FRACTION, FV_CHUNK, REFINED_DENSE_FRACTION};
use super::*;
use crate::data::DataError;
use crate::encode::{EncodeError, Encoder};
use crate::float::Float;
use crate::gmm::DiagGmm;
use crate::kernels::screen::{SparseRows, REFINE_MIN};
use crate::normalize::Normalization;
use ndarray::{array, s, Array1, Array2, ArrayView2, Axis};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// log w_k N(x; mu_k, var_k) straight from the formula, f64.
fn log_joint(w: &[f64], mu: &Array2<f64>, var: &Array2<f64>, x: &[f64]) -> Vec<f64> {
    (0..w.len())
        .map(|k| {
            let mut acc = 0.0;
            for (d, &xd) in x.iter().enumerate() {
                let v = var[[k, d]];
                let z = xd - mu[[k, d]];
                acc += (2.0 * std::f64::consts::PI * v).ln() + z * z / v;
            }
            w[k].ln() - 0.5 * acc
        })
        .collect()
}

fn lse(v: &[f64]) -> f64 {
    let m = v.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
    m + v.iter().map(|a| (a - m).exp()).sum::<f64>().ln()
}

/// Mean log-likelihood of the bag.
fn mean_ll(w: &[f64], mu: &Array2<f64>, var: &Array2<f64>, x: &Array2<f64>) -> f64 {
    x.outer_iter()
        .map(|r| lse(&log_joint(w, mu, var, r.as_slice().unwrap())))
        .sum::<f64>()
        / x.nrows() as f64
}

/// [prior, mean, var] straight from docs/math.md §3.2 with naive loops.
fn naive_fv(g: &DiagGmm<f64>, x: &Array2<f64>, hard: bool) -> Vec<f64> {
    let (k, d) = (g.n_components(), g.dim());
    let w = g.weights().to_vec();
    let mu = g.means().to_owned();
    let var = g.variances().to_owned();
    let n = x.nrows() as f64;
    let mut prior = vec![0.0; k];
    let mut u = vec![0.0; k * d];
    let mut v = vec![0.0; k * d];
    for r in x.outer_iter() {
        let lj = log_joint(&w, &mu, &var, r.as_slice().unwrap());
        let l = lse(&lj);
        let arg = (0..k).fold(0, |a, j| if lj[j] > lj[a] { j } else { a });
        for kk in 0..k {
            let q = if hard {
                f64::from(u8::from(kk == arg))
            } else {
                (lj[kk] - l).exp()
            };
            prior[kk] += q;
            for dd in 0..d {
                let z = (r[dd] - mu[[kk, dd]]) / var[[kk, dd]].sqrt();
                u[kk * d + dd] += q * z;
                v[kk * d + dd] += q * (z * z - 1.0);
            }
        }
    }
    for kk in 0..k {
        prior[kk] = (prior[kk] / n - w[kk]) / w[kk].sqrt();
        for dd in 0..d {
            u[kk * d + dd] /= n * w[kk].sqrt();
            v[kk * d + dd] /= n * (2.0 * w[kk]).sqrt();
        }
    }
    [prior, u, v].concat()
}

fn random_gmm(rng: &mut ChaCha8Rng, k: usize, d: usize, spread: f64) -> DiagGmm<f64> {
    let mut w: Vec<f64> = (0..k).map(|_| rng.random_range(0.2..1.0)).collect();
    let s: f64 = w.iter().sum();
    w.iter_mut().for_each(|v| *v /= s);
    let mu = Array2::from_shape_fn((k, d), |_| rng.random_range(-spread..spread));
    let var = Array2::from_shape_fn((k, d), |_| rng.random_range(0.3..2.0));
    DiagGmm::new(Array1::from(w), mu, var).unwrap()
}

fn random_bag(rng: &mut ChaCha8Rng, n: usize, d: usize, spread: f64) -> Array2<f64> {
    Array2::from_shape_fn((n, d), |_| rng.random_range(-spread..spread))
}

fn raw_params(parts: Vec<FvPart>, fast: bool) -> FisherVectorParams {
    FisherVectorParams {
        parts,
        normalization: Normalization::NONE,
        fast,
        vlfeat_skips: false,
    }
}

fn assert_close(a: &[f64], b: &[f64], tol: f64) {
    assert_eq!(a.len(), b.len());
    let scale = b.iter().fold(1e-300f64, |m, v| m.max(v.abs()));
    for (i, (x, y)) in a.iter().zip(b).enumerate() {
        assert!(
            (x - y).abs() <= tol * scale,
            "entry {i}: {x} vs {y} (scale {scale})"
        );
    }
}

#[test]
fn hand_sized_case_matches_formula_on_every_path() {
    let mut rng = ChaCha8Rng::seed_from_u64(1);
    // Overlapping components (dense posteriors) and separated ones (sparse);
    // more rows than CHUNK_ROWS so several chunks are summed.
    for (spread, n) in [(0.5, 7), (6.0, 300), (2.0, 600)] {
        let g = random_gmm(&mut rng, 4, 3, spread);
        let x = random_bag(&mut rng, n, 3, spread + 1.0);
        for fast in [false, true] {
            let want = naive_fv(&g, &x, fast);
            for path in [
                Accumulation::Auto,
                Accumulation::Sparse,
                Accumulation::Dense,
            ] {
                let fv = FisherVector::new(&g, raw_params(FvPart::ALL.to_vec(), fast))
                    .unwrap()
                    .with_accumulation(path);
                let got = fv.encode(x.view()).unwrap();
                assert_eq!(got.len(), fv.output_dim());
                assert_close(got.as_slice().unwrap(), &want, 1e-10);
            }
        }
    }
}

#[test]
fn dense_and_sparse_chunks_of_one_bag_add_up() {
    // K = 24: components 0..4 share the mean 0 (rows there have 4 non-zero
    // posteriors: a dense chunk), the others sit 60 apart (one non-zero
    // posterior per row, exp of the rest underflows: sparse chunks).
    // 600 rows = 3 chunks of 200. The dense chunk expands around the
    // mixture mean, |x − c| ≈ 700 σ: rounding ≈ 1e-16·700², hence 1e-8.
    let (k, d) = (24, 2);
    let mut rng = ChaCha8Rng::seed_from_u64(9);
    let mu = Array2::from_shape_fn(
        (k, d),
        |(kk, j)| if kk < 4 { 0.0 } else { 60.0 * (kk + j) as f64 },
    );
    let var = Array2::from_shape_fn((k, d), |(kk, _)| 1.0 + 0.2 * (kk % 4) as f64);
    let g = DiagGmm::new(Array1::from_elem(k, 1.0 / k as f64), mu.clone(), var).unwrap();
    let x = Array2::from_shape_fn((600, d), |(i, j)| {
        let c = if i < 200 { 0 } else { 4 + i % 20 };
        mu[[c, j]] + rng.random_range(-1.0..1.0)
    });
    let want = naive_fv(&g, &x, false);
    let fv = FisherVector::new(&g, raw_params(FvPart::ALL.to_vec(), false)).unwrap();
    let got = fv.encode(x.view()).unwrap();
    assert_close(got.as_slice().unwrap(), &want, 1e-8);
}

#[test]
fn parts_select_blocks_in_layout_order() {
    let mut rng = ChaCha8Rng::seed_from_u64(2);
    let g = random_gmm(&mut rng, 3, 2, 1.0);
    let x = random_bag(&mut rng, 20, 2, 2.0);
    let full = naive_fv(&g, &x, false);
    let (k, kd) = (3, 6);
    for (parts, want) in [
        (vec![FvPart::Var, FvPart::Mean], full[k..].to_vec()),
        (vec![FvPart::Mean], full[k..k + kd].to_vec()),
        (vec![FvPart::Var], full[k + kd..].to_vec()),
        (vec![FvPart::Prior], full[..k].to_vec()),
        (
            vec![FvPart::Var, FvPart::Prior],
            [&full[..k], &full[k + kd..]].concat(),
        ),
    ] {
        let fv = FisherVector::new(&g, raw_params(parts, false)).unwrap();
        let got = fv.encode(x.view()).unwrap();
        assert_close(got.as_slice().unwrap(), &want, 1e-10);
    }
}

#[test]
fn blocks_are_scaled_gradients_of_mean_log_likelihood() {
    let mut rng = ChaCha8Rng::seed_from_u64(3);
    let (k, d) = (3, 4);
    let g = random_gmm(&mut rng, k, d, 1.5);
    let x = random_bag(&mut rng, 40, d, 2.5);
    let fv = FisherVector::new(&g, raw_params(FvPart::ALL.to_vec(), false)).unwrap();
    let got = fv.encode(x.view()).unwrap();
    let w = g.weights().to_vec();
    let mu = g.means().to_owned();
    let var = g.variances().to_owned();
    let h = 1e-5;
    let mut fd = Vec::new();
    // prior: softmax parametrisation w = softmax(alpha), alpha = ln w.
    for kk in 0..k {
        let f = |e: f64| {
            let a: Vec<f64> = (0..k)
                .map(|j| w[j].ln() + if j == kk { e } else { 0.0 })
                .collect();
            let z = lse(&a);
            let ww: Vec<f64> = a.iter().map(|v| (v - z).exp()).collect();
            mean_ll(&ww, &mu, &var, &x)
        };
        fd.push((f(h) - f(-h)) / (2.0 * h) / w[kk].sqrt());
    }
    for kk in 0..k {
        for dd in 0..d {
            let mut p = mu.clone();
            p[[kk, dd]] += h;
            let mut m = mu.clone();
            m[[kk, dd]] -= h;
            let grad = (mean_ll(&w, &p, &var, &x) - mean_ll(&w, &m, &var, &x)) / (2.0 * h);
            fd.push(var[[kk, dd]].sqrt() / w[kk].sqrt() * grad);
        }
    }
    for kk in 0..k {
        for dd in 0..d {
            let mut p = var.clone();
            p[[kk, dd]] += h;
            let mut m = var.clone();
            m[[kk, dd]] -= h;
            let grad = (mean_ll(&w, &mu, &p, &x) - mean_ll(&w, &mu, &m, &x)) / (2.0 * h);
            fd.push(2.0 * var[[kk, dd]] / (2.0 * w[kk]).sqrt() * grad);
        }
    }
    for (i, (a, b)) in got.iter().zip(&fd).enumerate() {
        assert!(
            (a - b).abs() <= 1e-6 * b.abs().max(1e-3),
            "entry {i}: encoder {a} vs finite difference {b}"
        );
    }
}

#[test]
fn f32_matches_f64() {
    let mut rng = ChaCha8Rng::seed_from_u64(4);
    let g = random_gmm(&mut rng, 5, 6, 2.0);
    let x = random_bag(&mut rng, 50, 6, 3.0);
    let g32: DiagGmm<f32> = g.cast();
    let x32 = x.mapv(|v| v as f32);
    for path in [Accumulation::Sparse, Accumulation::Dense] {
        let p = FisherVectorParams::default();
        let a = FisherVector::new(&g, p.clone())
            .unwrap()
            .encode(x.view())
            .unwrap();
        let b = FisherVector::new(&g32, p)
            .unwrap()
            .with_accumulation(path)
            .encode(x32.view())
            .unwrap();
        let b: Vec<f64> = b.iter().map(|&v| v as f64).collect();
        assert_close(&b, a.as_slice().unwrap(), 1e-4);
    }
}

/// A mixture of K components in D dims around `offset` whose means are
/// `spread` apart along dimensions of decaying scale (as PCA'd
/// descriptors), and n rows drawn from it (a fifth of them half-way
/// between two components, where two posteriors are alive).
pub(crate) fn planted_mixture(
    seed: u64,
    k: usize,
    d: usize,
    n: usize,
    spread: f64,
    offset: f64,
) -> (DiagGmm<f64>, Array2<f64>) {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut w: Vec<f64> = (0..k).map(|_| rng.random_range(0.2..1.0)).collect();
    let s: f64 = w.iter().sum();
    w.iter_mut().for_each(|v| *v /= s);
    let scale: Vec<f64> = (0..d).map(|j| (-(j as f64) / 8.0).exp() + 0.1).collect();
    let mu = Array2::from_shape_fn((k, d), |(_, j)| {
        offset + spread * scale[j] * rng.random_range(-1.0..1.0)
    });
    let var = Array2::from_shape_fn((k, d), |(_, j)| {
        scale[j] * scale[j] * rng.random_range(0.1..0.4)
    });
    let x = Array2::from_shape_fn((n, d), |(i, j)| {
        let (a, b) = (i % k, (i * 7 + 3) % k);
        let t = if i % 5 == 0 { 0.5 } else { 0.0 };
        let m = (1.0 - t) * mu[[a, j]] + t * mu[[b, j]];
        m + var[[a, j]].sqrt() * rng.random_range(-1.5..1.5)
    });
    (DiagGmm::new(Array1::from(w), mu, var).unwrap(), x)
}

/// Relative L2 distance |a − b| / |b|.
fn rel_l2(a: &[f64], b: &[f64]) -> f64 {
    let num: f64 = a.iter().zip(b).map(|(x, y)| (x - y) * (x - y)).sum();
    let den: f64 = b.iter().map(|y| y * y).sum();
    (num / den).sqrt()
}

/// Whether every chunk of `x` goes through the screened kernel.
fn all_chunks_screened<F: Float>(g: &DiagGmm<F>, x: ArrayView2<'_, F>) -> bool {
    let mut ws = crate::kernels::screen::ScreenScratch::default();
    let mut rows = SparseRows::default();
    x.axis_chunks_iter(Axis(0), FV_CHUNK)
        .all(|xc| g.screen().survivors(xc, None, &mut ws, &mut rows))
}

#[test]
fn screened_equals_unscreened_on_sparse_and_dense_posteriors() {
    // sparse: separated components (a row has 1-2 live posteriors);
    // dense: overlapping ones, where the screening falls back to the GEMM.
    for (spread, sparse) in [(12.0, true), (0.3, false)] {
        let (g, x) = planted_mixture(11, 48, 40, 700, spread, 3.0);
        assert_eq!(all_chunks_screened(&g, x.view()), sparse, "spread {spread}");
        for fast in [false, true] {
            for skips in [false, true] {
                let mut p = raw_params(FvPart::ALL.to_vec(), fast);
                p.vlfeat_skips = skips;
                let fv = FisherVector::new(&g, p).unwrap();
                let on = fv.clone().encode(x.view()).unwrap();
                let off = fv.with_screening(false).encode(x.view()).unwrap();
                assert_close(on.as_slice().unwrap(), off.as_slice().unwrap(), 1e-12);
            }
        }
        let want = naive_fv(&g, &x, false);
        let fv = FisherVector::new(&g, raw_params(FvPart::ALL.to_vec(), false)).unwrap();
        assert_close(
            fv.encode(x.view()).unwrap().as_slice().unwrap(),
            &want,
            1e-12,
        );
    }
}

#[test]
fn f32_is_within_1e_6_of_f64_far_from_the_origin() {
    // Means ~1000 away from the origin, in units of σ ≈ 0.3-0.6: the
    // expanded form of the log-joint in f32 loses ~1e-7·|y|²/σ² nats.
    let (g, x) = planted_mixture(12, 24, 64, 1000, 10.0, 1000.0);
    let g32: DiagGmm<f32> = g.cast();
    let x32 = x.mapv(|v| v as f32);
    // the f64 reference encodes the same (f32-rounded) model and data
    let g64: DiagGmm<f64> = g32.cast();
    let x64 = x32.mapv(|v| v as f64);
    assert!(all_chunks_screened(&g32, x32.view()));
    for params in [
        FisherVectorParams::default(),
        raw_params(FvPart::ALL.to_vec(), false),
    ] {
        let want = FisherVector::new(&g64, params.clone())
            .unwrap()
            .encode(x64.view())
            .unwrap();
        let fv32 = FisherVector::new(&g32, params).unwrap();
        let got: Vec<f64> = fv32
            .encode(x32.view())
            .unwrap()
            .iter()
            .map(|&v| v as f64)
            .collect();
        let err = rel_l2(&got, want.as_slice().unwrap());
        assert!(err <= 1e-6, "screened f32 vs f64: {err:e}");
    }
}

#[test]
fn gemm_path_f32_is_within_1e_6_of_f64_far_from_the_origin() {
    // As above, but every chunk through the GEMM (no screening), as on real descriptors
    // where the bound prunes nothing: the sparse posteriors are refined (docs/math.md §2.8).
    // Without the refinement this case measured 2.3e-3.
    for (seed, sep) in [(21, 10.0), (22, 3.0)] {
        let (g, x) = planted_mixture(seed, 24, 64, 1000, sep, 1000.0);
        let g32: DiagGmm<f32> = g.cast();
        let x32 = x.mapv(|v| v as f32);
        let g64: DiagGmm<f64> = g32.cast();
        let x64 = x32.mapv(|v| v as f64);
        for params in [
            FisherVectorParams::default(),
            raw_params(FvPart::ALL.to_vec(), false),
        ] {
            let want = FisherVector::new(&g64, params.clone())
                .unwrap()
                .encode(x64.view())
                .unwrap();
            let fv32 = FisherVector::new(&g32, params)
                .unwrap()
                .with_screening(false);
            let got: Vec<f64> = fv32
                .encode(x32.view())
                .unwrap()
                .iter()
                .map(|&v| v as f64)
                .collect();
            let err = rel_l2(&got, want.as_slice().unwrap());
            assert!(
                err <= 1e-6,
                "GEMM-path f32 vs f64 (separation {sep}): {err:e}"
            );
        }
    }
}

#[test]
fn f32_rows_with_a_few_live_posteriors_are_refined() {
    // Real descriptors' regime (docs/math.md §2.8): per row about two
    // posteriors >= 1e-10 but five or more above f32's flush. Counting
    // every unflushed posterior sent such chunks through the dense GEMM
    // (5.8e-6 from f64 on the bench's real descriptors); the choice now
    // counts the pairs the refined loop keeps.
    let (k, n) = (48, 1000);
    let (g, x) = planted_mixture(31, k, 64, n, 0.9, 1000.0);
    let g32: DiagGmm<f32> = g.cast();
    let x32 = x.mapv(|v| v as f32);
    let g64: DiagGmm<f64> = g32.cast();
    let x64 = x32.mapv(|v| v as f64);
    let q = g64.predict_proba(x64.view()).unwrap();
    let unflushed = q.iter().filter(|&&v| v >= 1e-19).count();
    let kept = q.iter().filter(|&&v| v >= REFINE_MIN).count();
    assert!(unflushed * DENSE_FRACTION > n * k, "{unflushed}");
    assert!(kept * REFINED_DENSE_FRACTION <= n * k, "{kept}");
    for screening in [true, false] {
        for params in [
            FisherVectorParams::default(),
            raw_params(FvPart::ALL.to_vec(), false),
        ] {
            let want = FisherVector::new(&g64, params.clone())
                .unwrap()
                .encode(x64.view())
                .unwrap();
            let got: Vec<f64> = FisherVector::new(&g32, params)
                .unwrap()
                .with_screening(screening)
                .encode(x32.view())
                .unwrap()
                .iter()
                .map(|&v| v as f64)
                .collect();
            let err = rel_l2(&got, want.as_slice().unwrap());
            assert!(err <= 1e-6, "screening {screening}: f32 vs f64 {err:e}");
        }
    }
}

#[test]
fn screened_encodings_do_not_depend_on_threads_or_batching() {
    let (g, x) = planted_mixture(13, 32, 30, 900, 8.0, -50.0);
    let fv = FisherVector::new(&g, FisherVectorParams::default()).unwrap();
    let bags: Vec<_> = (0..5)
        .map(|b| x.slice(s![b * 150..b * 150 + 300, ..]))
        .collect();
    let run = |threads| {
        rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .unwrap()
            .install(|| fv.encode_batch(&bags).unwrap())
    };
    let one = run(1);
    assert_eq!(one, run(3));
    for (b, bag) in bags.iter().enumerate() {
        assert_eq!(fv.encode(*bag).unwrap(), one.row(b));
    }
}

#[test]
fn bad_options_and_bags_are_errors() {
    let g = DiagGmm::new(array![1.0], array![[0.0, 0.0]], array![[1.0, 1.0]]).unwrap();
    let msg = |p: FisherVectorParams| FisherVector::new(&g, p).unwrap_err().to_string();
    assert!(msg(raw_params(vec![], false)).contains("no Fisher vector part"));
    assert!(
        msg(raw_params(vec![FvPart::Mean, FvPart::Mean], false)).contains("`mean` is given twice")
    );
    let mut p = FisherVectorParams::default();
    p.normalization.power = 0.0;
    assert!(msg(p).contains("power"));

    let fv = FisherVector::new(&g, FisherVectorParams::default()).unwrap();
    let e = fv.encode(Array2::<f64>::zeros((0, 2)).view()).unwrap_err();
    assert!(matches!(
        e,
        EncodeError::Bag {
            index: 0,
            source: DataError::Empty { .. }
        }
    ));
    let e = fv.encode(array![[1.0, 2.0, 3.0]].view()).unwrap_err();
    assert!(e.to_string().contains("3 columns"), "{e}");
    let e = fv
        .encode(array![[1.0, 2.0], [0.0, f64::NAN]].view())
        .unwrap_err();
    assert!(e.to_string().contains("row 1"), "{e}");
    let bags = [array![[1.0, 2.0]], array![[1.0]]];
    let views: Vec<_> = bags.iter().map(|b| b.view()).collect();
    let e = fv.encode_batch(&views).unwrap_err();
    assert!(matches!(e, EncodeError::Bag { index: 1, .. }), "{e}");
}

#[test]
fn overflowing_models_and_bags_are_errors_not_nan() {
    // |μ|/σ² = 1e50 does not fit in f32: refused when the encoder is built
    let g = DiagGmm::<f32>::new(
        array![0.5, 0.5],
        array![[1e30, 0.0], [0.0, 1.0]],
        array![[1e-20, 1.0], [1.0, 1.0]],
    )
    .unwrap();
    let err = FisherVector::new(&g, FisherVectorParams::default()).unwrap_err();
    assert!(err.to_string().contains("component 0"), "{err}");
    assert!(err.to_string().contains("f32"), "{err}");
    // a finite bag whose squares overflow f32: an error naming the bag
    let g = DiagGmm::<f32>::new(
        array![0.5, 0.5],
        array![[0.0, 0.0], [1.0, 1.0]],
        array![[1e-6, 1.0], [1.0, 1.0]],
    )
    .unwrap();
    let fv = FisherVector::new(&g, FisherVectorParams::default()).unwrap();
    let ok = array![[0.5f32, 0.5], [0.1, 0.2]];
    let huge = array![[1e30f32, 0.0], [0.1, 0.2]];
    assert!(fv.encode(ok.view()).unwrap().iter().all(|v| v.is_finite()));
    let err = fv.encode_batch(&[ok.view(), huge.view()]).unwrap_err();
    assert!(
        matches!(
            err,
            EncodeError::NonFiniteOutput {
                index: 1,
                dtype: "f32"
            }
        ),
        "{err}"
    );
    assert!(matches!(
        fv.encode(huge.view()).unwrap_err(),
        EncodeError::NonFiniteOutput { index: 0, .. }
    ));
}

#[test]
fn parse_parts() {
    assert_eq!(
        parse_fv_parts("prior, Mean,var").unwrap(),
        vec![FvPart::Prior, FvPart::Mean, FvPart::Var]
    );
    let e = parse_fv_parts("mean,sigma").unwrap_err().to_string();
    assert!(
        e.contains("`sigma`") && e.contains("prior, mean, var"),
        "{e}"
    );
    assert!(parse_fv_parts("var,var")
        .unwrap_err()
        .to_string()
        .contains("twice"));
    assert!(parse_fv_parts("").is_err());
}

#[test]
fn vlfeat_skips_drop_small_priors_and_posteriors() {
    // Component 1 has a prior below 1e-6: with skips it leaves the mixture
    // (VLFeat's log-weight −∞), so component 0 takes every posterior 1.
    let w0: f64 = 1.0 - 5e-7;
    let g = DiagGmm::new(array![w0, 5e-7], array![[0.0], [0.5]], array![[1.0], [1.0]]).unwrap();
    let x = array![[0.3], [0.6], [-1.0]];
    let mut p = raw_params(vec![FvPart::Mean, FvPart::Var], false);
    p.vlfeat_skips = true;
    let got = FisherVector::new(&g, p.clone())
        .unwrap()
        .encode(x.view())
        .unwrap();
    let (u0, v0) = x
        .iter()
        .fold((0.0, 0.0), |(u, v), &z| (u + z, v + z * z - 1.0));
    let want = [
        u0 / (3.0 * w0.sqrt()),
        0.0,
        v0 / (3.0 * (2.0 * w0).sqrt()),
        0.0,
    ];
    for (a, b) in got.iter().zip(&want) {
        assert!((a - b).abs() < 1e-12, "{got} vs {want:?}");
    }
    // Posterior skip: at x = 0 component 1 (mean 6) has q ≈ 1.5e-8 < 1e-6,
    // dropped without renormalising; at x = 3 both have q = 1/2.
    let g = DiagGmm::new(array![0.5, 0.5], array![[0.0], [6.0]], array![[1.0], [1.0]]).unwrap();
    let x = array![[0.0], [3.0]];
    let got = FisherVector::new(&g, p).unwrap().encode(x.view()).unwrap();
    let q10 = 1.0 / (1.0 + 18f64.exp());
    assert!(q10 < 1e-6 && q10 > 1e-9);
    let s = 1.0 / (2.0 * 0.5f64.sqrt());
    let t = 1.0 / (2.0 * 1f64.sqrt());
    let want = [
        0.5 * 3.0 * s,
        0.5 * -3.0 * s,
        (-(1.0 - q10) + 0.5 * 8.0) * t,
        0.5 * 8.0 * t,
    ];
    for (a, b) in got.iter().zip(&want) {
        assert!((a - b).abs() < 1e-12, "{got} vs {want:?}");
    }
}
