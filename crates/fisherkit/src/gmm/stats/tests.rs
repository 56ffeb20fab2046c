use super::*;
use crate::gmm::DiagGmm;
use crate::kernels::softmax::log_joint_to_posteriors_flushed;
use ndarray::{array, Axis};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

fn random_data(n: usize, d: usize, seed: u64) -> Array2<f64> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    Array2::from_shape_fn((n, d), |(i, j)| {
        rng.random::<f64>() * (1.0 + j as f64) + 5.0 * ((i % 3) as f64) + 100.0
    })
}

fn model(d: usize) -> DiagGmm<f64> {
    let k = 3;
    let means = Array2::from_shape_fn((k, d), |(a, b)| 100.0 + 5.0 * a as f64 + 0.1 * b as f64);
    let vars = Array2::from_shape_fn((k, d), |(a, b)| 0.5 + 0.1 * (a + b) as f64);
    DiagGmm::new(array![0.2, 0.3, 0.5], means, vars).unwrap()
}

/// Statistics computed directly from the posteriors, in f64, about 0.
fn direct(g: &DiagGmm<f64>, x: &Array2<f64>) -> (Array1<f64>, Array2<f64>, Array2<f64>, f64) {
    let q = g.predict_proba(x.view()).unwrap();
    let ll = g.score_samples(x.view()).unwrap().sum();
    let nk = q.sum_axis(Axis(0));
    let sx = q.t().dot(x);
    let sx2 = q.t().dot(&x.mapv(|v| v * v));
    (nk, sx, sx2, ll)
}

fn close(a: &Array2<f64>, b: &Array2<f64>, rtol: f64) {
    assert_eq!(a.dim(), b.dim());
    for (u, v) in a.iter().zip(b) {
        assert!(
            (u - v).abs() <= rtol * (1.0 + u.abs().max(v.abs())),
            "{u} vs {v}"
        );
    }
}

#[test]
fn statistics_equal_direct_sums() {
    let x = random_data(700, 4, 1);
    let g = model(4);
    let st = g.sufficient_statistics(x.view()).unwrap();
    let (nk, sx, sx2, ll) = direct(&g, &x);
    assert_eq!(st.n_rows(), 700.0);
    assert!((st.log_likelihood() - ll).abs() < 1e-9 * ll.abs());
    for (a, b) in st.resp_sums().iter().zip(&nk) {
        assert!((a - b).abs() < 1e-9 * 700.0);
    }
    close(&st.sum_x(), &sx, 1e-10);
    close(&st.sum_x2(), &sx2, 1e-10);
}

#[test]
fn sparse_accumulation_equals_direct_sums() {
    // clusters 1000 apart: all but one posterior per row flush to 0, so
    // every chunk takes the sparse path, in f64 and f32
    let g = DiagGmm::new(
        array![0.25, 0.25, 0.5],
        array![[0.0, 0.0], [1000.0, 0.0], [0.0, 1000.0]],
        array![[1.0, 2.0], [1.0, 1.0], [3.0, 1.0]],
    )
    .unwrap();
    let mut rng = ChaCha8Rng::seed_from_u64(5);
    let x = Array2::from_shape_fn((600, 2), |(i, j)| {
        let c = g.means()[[i % 3, j]];
        c + rng.random::<f64>() - 0.5
    });
    let mut ll = vec![0.0; 600];
    let mut lj = Array2::zeros((600, 3));
    g.log_joint_into(
        x.view(),
        lj.view_mut(),
        &mut Array2::zeros((0, 0)),
        Par::Seq,
    );
    let nnz = log_joint_to_posteriors_flushed(lj.view_mut(), &mut ll);
    assert_eq!(nnz, 600);
    let st = g.sufficient_statistics(x.view()).unwrap();
    // direct sums about the same centre (re-adding a far centre would
    // lose more digits than the statistics themselves)
    let y = &x - &st.center().insert_axis(Axis(0));
    let shifted = DiagGmm::new(
        g.weights().to_owned(),
        &g.means() - &st.center().insert_axis(Axis(0)),
        g.variances().to_owned(),
    )
    .unwrap();
    let (nk, sy, sy2, llsum) = direct(&shifted, &y);
    assert!((st.log_likelihood() - llsum).abs() < 1e-9 * llsum.abs());
    for (a, b) in st.resp_sums().iter().zip(&nk) {
        assert!((a - b).abs() < 1e-9);
    }
    close(&st.sum_y().to_owned(), &sy, 1e-12);
    close(&st.sum_y2().to_owned(), &sy2, 1e-12);
    let st32 = g
        .cast::<f32>()
        .sufficient_statistics(x.mapv(|v| v as f32).view())
        .unwrap();
    let mut st32 = st32;
    st32.recenter(st.center()).unwrap();
    close(&st32.sum_y().to_owned(), &sy, 1e-5);
    close(&st32.sum_y2().to_owned(), &sy2, 1e-5);
}

#[test]
fn merged_shards_equal_the_whole_and_the_batch_m_step() {
    let x = random_data(1000, 5, 2);
    let g = model(5);
    let whole = g.sufficient_statistics(x.view()).unwrap();
    for cuts in [
        vec![0, 1, 1000],
        vec![0, 300, 301, 777, 1000],
        vec![0, 999, 1000],
    ] {
        let parts: Vec<GmmStats> = cuts
            .windows(2)
            .filter(|w| w[1] > w[0])
            .map(|w| {
                g.sufficient_statistics(x.slice(s![w[0]..w[1], ..]))
                    .unwrap()
            })
            .collect();
        let merged = GmmStats::sum(&parts).unwrap();
        assert_eq!(merged.n_rows(), whole.n_rows());
        assert!(
            (merged.log_likelihood() - whole.log_likelihood()).abs()
                < 1e-9 * whole.log_likelihood().abs()
        );
        close(&merged.sum_y().to_owned(), &whole.sum_y().to_owned(), 1e-10);
        close(
            &merged.sum_y2().to_owned(),
            &whole.sum_y2().to_owned(),
            1e-10,
        );
        let a = g
            .update_from_statistics(&merged, VarianceFloor::default())
            .unwrap();
        let b = g
            .update_from_statistics(&whole, VarianceFloor::default())
            .unwrap();
        close(&a.means().to_owned(), &b.means().to_owned(), 1e-10);
        close(&a.variances().to_owned(), &b.variances().to_owned(), 1e-10);
    }
}

#[test]
fn merging_different_centres_shifts_exactly() {
    let x = random_data(400, 3, 3);
    let g1 = model(3);
    let st_a = g1.sufficient_statistics(x.slice(s![..150, ..])).unwrap();
    let mut st_b = g1.sufficient_statistics(x.slice(s![150.., ..])).unwrap();
    st_b.recenter(array![1.0, -2.0, 50.0].view()).unwrap();
    let mut m = st_a.clone();
    m.merge(&st_b).unwrap();
    let whole = g1.sufficient_statistics(x.view()).unwrap();
    close(&m.sum_x(), &whole.sum_x(), 1e-10);
    close(&m.sum_x2(), &whole.sum_x2(), 1e-10);
    let bad = GmmStats::zeros(2, Array1::zeros(3));
    assert!(m
        .merge(&bad)
        .unwrap_err()
        .to_string()
        .contains("2 components"));
}

#[test]
fn m_step_matches_direct_formulas() {
    let x = random_data(600, 4, 4);
    let g = model(4);
    let st = g.sufficient_statistics(x.view()).unwrap();
    let new = g
        .update_from_statistics(&st, VarianceFloor::Absolute(1e-12))
        .unwrap();
    let q = g.predict_proba(x.view()).unwrap();
    for k in 0..3 {
        let nk: f64 = q.column(k).sum();
        assert!((new.weights()[k] - nk / 600.0).abs() < 1e-12);
        for d in 0..4 {
            let mu: f64 = (0..600).map(|i| q[[i, k]] * x[[i, d]]).sum::<f64>() / nk;
            let var: f64 = (0..600)
                .map(|i| q[[i, k]] * (x[[i, d]] - mu).powi(2))
                .sum::<f64>()
                / nk;
            assert!((new.means()[[k, d]] - mu).abs() < 1e-10 * mu.abs());
            assert!((new.variances()[[k, d]] - var).abs() < 1e-9 * var);
        }
    }
}

#[test]
fn starved_component_is_split_not_nan() {
    let mut st = GmmStats::zeros(3, array![0.0, 0.0]);
    st.n_rows = 10.0;
    st.resp_sums = array![6.0, 4.0, 0.0];
    st.sum_y = array![[6.0, 12.0], [-4.0, 0.0], [0.0, 0.0]];
    st.sum_y2 = array![[6.0 + 6.0 * 4.0, 24.0 + 6.0], [4.0 + 4.0, 4.0], [0.0, 0.0]];
    let m = m_step::<f64, DiagGmm<f64>>(&st, VarianceFloor::default()).unwrap();
    assert_eq!(m.reseeded, 1);
    let g = m.model;
    assert!(g
        .means()
        .iter()
        .chain(g.variances().iter())
        .all(|v| v.is_finite()));
    // component 0 (weight 0.6, mean (1, 2), variances (4, 1)) is split in
    // two along dim 0, ± half a standard deviation
    assert!((g.weights()[0] - 0.3).abs() < 1e-12 && (g.weights()[2] - 0.3).abs() < 1e-12);
    assert_eq!(g.means()[[0, 1]], g.means()[[2, 1]]);
    assert!((g.means()[[0, 0]] - 0.0).abs() < 1e-12);
    assert!((g.means()[[2, 0]] - 2.0).abs() < 1e-12);
    assert_eq!(g.variances().row(0), g.variances().row(2));
}

#[test]
fn floors_and_invalid_statistics() {
    // a constant column: its floor falls back to the mean variance of the
    // non-constant columns, here Var(1, 2, 3, 4) = 1.25
    let x: Array2<f64> = array![[1.0, 5.0], [2.0, 5.0], [3.0, 5.0], [4.0, 5.0]];
    let g = DiagGmm::new(array![1.0], array![[2.5, 5.0]], array![[1.0, 1.0]]).unwrap();
    let st = g.sufficient_statistics(x.view()).unwrap();
    let new: DiagGmm<f64> = g
        .update_from_statistics(&st, VarianceFloor::Relative(0.01))
        .unwrap();
    assert!((new.variances()[[0, 0]] - 1.25).abs() < 1e-12);
    assert!((new.variances()[[0, 1]] - 0.01 * 1.25).abs() < 1e-12);
    let new = g
        .update_from_statistics(&st, VarianceFloor::Absolute(0.5))
        .unwrap();
    assert_eq!(new.variances()[[0, 1]], 0.5);
    assert!(g
        .update_from_statistics(&st, VarianceFloor::Absolute(0.0))
        .is_err());
    assert!(g
        .update_from_statistics(&st, VarianceFloor::Relative(f64::NAN))
        .is_err());
    let empty = GmmStats::zeros(1, array![0.0, 0.0]);
    assert!(g
        .update_from_statistics(&empty, VarianceFloor::default())
        .is_err());
    let wrong = GmmStats::zeros(2, array![0.0, 0.0]);
    assert!(g
        .update_from_statistics(&wrong, VarianceFloor::default())
        .is_err());
    assert!(GmmStats::from_parts(
        1.0,
        0.0,
        array![0.0],
        array![1.0],
        array![[0.0]],
        array![[-1.0]]
    )
    .is_err());
}

mod merge_props {
    use super::*;
    use proptest::prelude::*;
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(24))]
        /// Statistics of shards, merged in any grouping, equal those of the
        /// whole, and so does the M-step from them; f32 and f64.
        #[test]
        fn shard_statistics_merge_to_the_whole(
            seed in 0u64..1000,
            n in 1usize..700,
            cuts in proptest::collection::vec(0.0f64..1.0, 0..5),
            shift in -100.0f64..100.0,
        ) {
            let mut rng = ChaCha8Rng::seed_from_u64(seed);
            let d = 1 + (seed % 4) as usize;
            let x = Array2::from_shape_fn((n, d), |(i, _)| {
                shift + rng.random::<f64>() + (i % 3) as f64
            });
            let k = 3;
            let means = Array2::from_shape_fn((k, d), |(a, _)| shift + a as f64 + rng.random::<f64>());
            let vars = Array2::from_shape_fn((k, d), |_| 0.2 + rng.random::<f64>());
            let g = DiagGmm::new(Array1::from_elem(k, 1.0 / 3.0), means, vars).unwrap();
            let mut bounds: Vec<usize> = cuts.iter().map(|c| (c * n as f64) as usize).collect();
            bounds.push(0);
            bounds.push(n);
            bounds.sort();
            bounds.dedup();
            let whole = g.sufficient_statistics(x.view()).unwrap();
            let parts: Vec<GmmStats> = bounds
                .windows(2)
                .map(|w| g.sufficient_statistics(x.slice(s![w[0]..w[1], ..])).unwrap())
                .collect();
            // merge right to left, to vary the grouping
            let mut merged = parts.last().unwrap().clone();
            for p in parts.iter().rev().skip(1) {
                merged.merge(p).unwrap();
            }
            let tol = |a: f64, b: f64, scale: f64| (a - b).abs() <= 1e-9 * (scale + a.abs().max(b.abs()));
            prop_assert_eq!(merged.n_rows(), n as f64);
            prop_assert!(tol(merged.log_likelihood(), whole.log_likelihood(), 1.0));
            for (a, b) in merged.resp_sums().iter().zip(whole.resp_sums()) {
                prop_assert!(tol(*a, *b, 1.0));
            }
            for (a, b) in merged.sum_y().iter().zip(whole.sum_y()) {
                prop_assert!(tol(*a, *b, n as f64));
            }
            for (a, b) in merged.sum_y2().iter().zip(whole.sum_y2()) {
                prop_assert!(tol(*a, *b, n as f64));
            }
            let floor = VarianceFloor::Relative(1e-3);
            let ga = g.update_from_statistics(&merged, floor).unwrap();
            let gb = g.update_from_statistics(&whole, floor).unwrap();
            for (a, b) in ga.means().iter().zip(gb.means()) {
                prop_assert!(tol(*a, *b, 1.0));
            }
            for (a, b) in ga.variances().iter().zip(gb.variances()) {
                prop_assert!((a - b).abs() <= 1e-6 * b);
            }
            // f32: the same merge property at f32 precision
            let x32 = x.mapv(|v| v as f32);
            let g32: DiagGmm<f32> = g.cast();
            let w32 = g32.sufficient_statistics(x32.view()).unwrap();
            let parts32: Vec<GmmStats> = bounds
                .windows(2)
                .map(|w| g32.sufficient_statistics(x32.slice(s![w[0]..w[1], ..])).unwrap())
                .collect();
            let m32 = GmmStats::sum(&parts32).unwrap();
            for (a, b) in m32.sum_y2().iter().zip(w32.sum_y2()) {
                prop_assert!((a - b).abs() <= 1e-5 * (1.0 + a.abs().max(b.abs())));
            }
        }
    }
}
