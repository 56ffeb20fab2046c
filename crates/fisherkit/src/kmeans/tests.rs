use super::distances::sq_dist;
use super::*;
use ndarray::{s, Array2, ArrayView2, Axis};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rand_distr::{Distribution, StandardNormal};

/// `k` planted clusters of `per` rows in `d` dims, centres 20 apart per axis.
fn planted(k: usize, per: usize, d: usize, seed: u64) -> (Array2<f64>, Array2<f64>) {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let centres = Array2::from_shape_fn((k, d), |_| {
        let z: f64 = StandardNormal.sample(&mut rng);
        20.0 * z
    });
    let mut x = Array2::zeros((k * per, d));
    for i in 0..k * per {
        for j in 0..d {
            let z: f64 = StandardNormal.sample(&mut rng);
            x[[i, j]] = centres[[i % k, j]] + z;
        }
    }
    (x, centres)
}

#[test]
fn gemm_distances_equal_direct_ones() {
    let (x, _) = planted(3, 200, 7, 1);
    let x = x.mapv(|v| v + 1000.0);
    let c = x.slice(s![..5, ..]).to_owned() + 0.5;
    let g = squared_distances(x.view(), c.view()).unwrap();
    for i in 0..x.nrows() {
        for k in 0..5 {
            let want = sq_dist(x.row(i), c.row(k));
            assert!((g[[i, k]] - want).abs() < 1e-9 * (1.0 + want), "{i} {k}");
        }
    }
    // f32: relative to the spread of the data, not its offset from 0
    let x32 = x.mapv(|v| v as f32);
    let c32 = c.mapv(|v| v as f32);
    let g32 = squared_distances(x32.view(), c32.view()).unwrap();
    let m = x32.mean_axis(Axis(0)).unwrap();
    for i in 0..x.nrows() {
        for k in 0..5 {
            let want = sq_dist(x32.row(i), c32.row(k));
            // rounding of the expansion is relative to ‖x − m‖² + ‖c − m‖²
            let scale = sq_dist(x32.row(i), m.view()) + sq_dist(c32.row(k), m.view());
            assert!((g32[[i, k]] as f64 - want).abs() < 1e-6 * scale, "{i} {k}");
            // and far below the 1e-3 relative error of the uncentred form
            assert!((g32[[i, k]] as f64 - want).abs() < 1e-3 * (1.0 + want));
        }
    }
}

#[test]
fn planted_clusters_are_recovered() {
    let (x, centres) = planted(5, 100, 4, 2);
    let km = KMeansParams::new(5)
        .n_init(3)
        .seed(7)
        .fit(x.view())
        .unwrap();
    // every true cluster is one found cluster, centroid within 0.5
    for (i, l) in km.labels().iter().enumerate() {
        assert_eq!(*l, km.labels()[i % 5], "row {i}");
    }
    for t in 0..5 {
        let c = km.centroids().row(km.labels()[t]).to_owned();
        assert!(sq_dist(c.view(), centres.row(t)).sqrt() < 0.5);
    }
    assert!(km.converged());
    let direct: f64 = (0..x.nrows())
        .map(|i| sq_dist(x.row(i), km.centroids().row(km.labels()[i])))
        .sum();
    assert!((direct - km.inertia()).abs() < 1e-9 * direct);
}

#[test]
fn inertia_never_increases() {
    let mut rng = ChaCha8Rng::seed_from_u64(3);
    let x = Array2::from_shape_fn((1500, 6), |_| rng.random::<f64>());
    let km = KMeansParams::new(20)
        .tol(0.0)
        .max_iter(50)
        .fit(x.view())
        .unwrap();
    let h = km.inertia_history();
    assert_eq!(h.len(), km.n_iter() + 1);
    assert!(h.len() > 3);
    for w in h.windows(2) {
        assert!(w[1] <= w[0] * (1.0 + 1e-12), "{} -> {}", w[0], w[1]);
    }
    assert_eq!(km.inertia(), *h.last().unwrap());
    // predict on the training data gives the training labels
    assert_eq!(km.predict(x.view()).unwrap(), km.labels());
}

#[test]
fn same_seed_same_result_for_any_thread_count() {
    let (x, _) = planted(4, 300, 5, 4);
    let x = x.mapv(|v| v as f32);
    let run = |t| {
        rayon::ThreadPoolBuilder::new()
            .num_threads(t)
            .build()
            .unwrap()
            .install(|| {
                KMeansParams::new(6)
                    .seed(11)
                    .n_init(2)
                    .fit(x.view())
                    .unwrap()
            })
    };
    assert_eq!(run(1), run(3));
}

/// Greedy k-means++ written from its definition, without the
/// triangle-inequality pruning and the parallel reductions: `trials`
/// candidates per step, each scored by the full potential.
fn naive_plus_plus(
    x: ArrayView2<f64>,
    k: usize,
    trials: usize,
    rng: &mut ChaCha8Rng,
) -> Array2<f64> {
    let n = x.nrows();
    let mut out = Array2::zeros((k, x.ncols()));
    let first = rng.random_range(0..n);
    out.row_mut(0).assign(&x.row(first));
    let mut d2: Vec<f64> = (0..n).map(|i| sq_dist(x.row(i), x.row(first))).collect();
    for j in 1..k {
        let total: f64 = d2.iter().sum();
        let mut best: Option<(f64, usize)> = None;
        for _ in 0..trials {
            let target = rng.random::<f64>() * total;
            let mut acc = 0.0;
            let cand = (0..n)
                .find(|&i| {
                    acc += d2[i];
                    acc > target && d2[i] > 0.0
                })
                .unwrap();
            let pot: f64 = (0..n)
                .map(|i| d2[i].min(sq_dist(x.row(i), x.row(cand))))
                .sum();
            if best.is_none_or(|(b, _)| pot < b) {
                best = Some((pot, cand));
            }
        }
        let pick = best.unwrap().1;
        out.row_mut(j).assign(&x.row(pick));
        for (i, v) in d2.iter_mut().enumerate() {
            *v = v.min(sq_dist(x.row(i), x.row(pick)));
        }
    }
    out
}

#[test]
fn pruned_seeding_equals_its_definition() {
    let (x, _) = planted(12, 40, 5, 9);
    assert_eq!(default_local_trials(12), 4);
    for trials in [1, 2, default_local_trials(12)] {
        for seed in 0..5 {
            let mut rng = ChaCha8Rng::seed_from_u64(seed);
            let a = kmeans_plus_plus_with_trials(x.view(), 12, trials, &mut rng).unwrap();
            let b = naive_plus_plus(x.view(), 12, trials, &mut ChaCha8Rng::seed_from_u64(seed));
            // the potentials are summed in another order: equal seeds
            // unless two candidates tie to rounding (not on these data)
            assert_eq!(a, b, "trials {trials}, seed {seed}");
        }
    }
    let mut rng = ChaCha8Rng::seed_from_u64(0);
    let g = kmeans_plus_plus(x.view(), 12, &mut rng).unwrap();
    let b = naive_plus_plus(x.view(), 12, 4, &mut ChaCha8Rng::seed_from_u64(0));
    assert_eq!(g, b, "the default is greedy with 2 + floor(ln K) trials");
}

#[test]
fn default_local_trials_is_two_plus_floor_ln_k() {
    for (k, want) in [
        (1, 2),
        (2, 2),
        (3, 3),
        (7, 3),
        (8, 4),
        (20, 4),
        (21, 5),
        (32, 5),
        (256, 7),
    ] {
        assert_eq!(default_local_trials(k), want, "K = {k}");
    }
}

#[test]
fn greedy_seeding_is_the_same_for_any_thread_count() {
    // enough rows for several leaves of the reduction tree
    let (x, _) = planted(16, 2000, 6, 5);
    let x = x.mapv(|v| v as f32);
    let run = |t| {
        rayon::ThreadPoolBuilder::new()
            .num_threads(t)
            .build()
            .unwrap()
            .install(|| kmeans_plus_plus(x.view(), 16, &mut ChaCha8Rng::seed_from_u64(3)).unwrap())
    };
    assert_eq!(run(1), run(2));
    assert_eq!(run(1), run(4));
}

#[test]
fn fewer_distinct_points_than_clusters() {
    let x = ndarray::array![[1.0, 2.0], [1.0, 2.0], [3.0, 4.0], [3.0, 4.0], [3.0, 4.0]];
    let km = KMeansParams::new(4).fit(x.view()).unwrap();
    assert_eq!(km.inertia(), 0.0);
    assert!(km.centroids().iter().all(|v: &f64| v.is_finite()));
    assert_eq!(km.labels()[0], km.labels()[1]);
    assert_ne!(km.labels()[0], km.labels()[2]);
}

#[test]
fn invalid_inputs_are_clear_errors() {
    let x = Array2::<f64>::zeros((3, 2));
    let e = KMeansParams::new(0).fit(x.view()).unwrap_err();
    assert!(e.to_string().contains("n_clusters"));
    let e = KMeansParams::new(4).fit(x.view()).unwrap_err();
    assert!(e.to_string().contains("4 clusters from 3 rows"), "{e}");
    let e = KMeansParams::new(2).max_iter(0).fit(x.view()).unwrap_err();
    assert!(e.to_string().contains("max_iter"));
    let e = KMeansParams::new(2).tol(-1.0).fit(x.view()).unwrap_err();
    assert!(e.to_string().contains("tol"));
    let mut y = x.clone();
    y[[2, 1]] = f64::INFINITY;
    let e = KMeansParams::new(2).fit(y.view()).unwrap_err();
    assert!(e.to_string().contains("row 2"), "{e}");
    let km = KMeansParams::new(2).fit(x.view()).unwrap();
    assert!(km.predict(Array2::<f64>::zeros((2, 3)).view()).is_err());
    let mut rng = ChaCha8Rng::seed_from_u64(0);
    assert!(kmeans_plus_plus(x.view(), 5, &mut rng).is_err());
    let e = KMeansParams::new(2)
        .n_local_trials(Some(0))
        .fit(x.view())
        .unwrap_err();
    assert!(e.to_string().contains("n_local_trials"), "{e}");
    assert!(kmeans_plus_plus_with_trials(x.view(), 2, 0, &mut rng).is_err());
}
