//! Invariants of the Fisher vector encoder on random models and bags.

use fisherkit::encode::{FisherVector, FisherVectorParams, FvPart};
use fisherkit::gmm::DiagGmm;
use fisherkit::{Encoder, Normalization};
use ndarray::{Array1, Array2};
use proptest::prelude::*;

/// A random GMM (K ≤ 5, D ≤ 6) and a few bags, from flat value vectors.
fn case() -> impl Strategy<Value = (DiagGmm<f64>, Vec<Array2<f64>>, Vec<FvPart>, bool)> {
    (1usize..=5, 1usize..=6, 1usize..=4).prop_flat_map(|(k, d, nb)| {
        (
            prop::collection::vec(0.05f64..1.0, k),
            prop::collection::vec(-3.0f64..3.0, k * d),
            prop::collection::vec(0.1f64..3.0, k * d),
            prop::collection::vec(
                (1usize..40).prop_flat_map(move |n| prop::collection::vec(-5.0f64..5.0, n * d)),
                nb,
            ),
            prop::sample::subsequence(FvPart::ALL.to_vec(), 1..=3),
            any::<bool>(),
        )
            .prop_map(move |(w, mu, var, bags, parts, fast)| {
                let s: f64 = w.iter().sum();
                let g = DiagGmm::new(
                    Array1::from_iter(w.iter().map(|v| v / s)),
                    Array2::from_shape_vec((k, d), mu).unwrap(),
                    Array2::from_shape_vec((k, d), var).unwrap(),
                )
                .unwrap();
                let bags = bags
                    .into_iter()
                    .map(|b| Array2::from_shape_vec((b.len() / d, d), b).unwrap())
                    .collect();
                (g, bags, parts, fast)
            })
    })
}

/// Whether the raw Fisher vector is identically zero for every bag: only the
/// prior block of a one-component GMM, $(\frac1N\sum_i q_{i1} - w_1)/\sqrt{w_1}
/// = (1 - 1)/1$ (`docs/math.md` §3.2). Every other model and part gives a
/// non-zero vector for generic data.
fn identically_zero(g: &DiagGmm<f64>, parts: &[FvPart]) -> bool {
    parts == [FvPart::Prior] && g.n_components() == 1
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn improved_is_normalised_raw_and_batch_matches_single((g, bags, parts, fast) in case()) {
        let raw = FisherVector::new(&g, FisherVectorParams {
            parts: parts.clone(), normalization: Normalization::NONE, fast, vlfeat_skips: false,
        }).unwrap();
        let imp = FisherVector::new(&g, FisherVectorParams {
            parts: parts.clone(), normalization: Normalization::default(), fast, vlfeat_skips: false,
        }).unwrap();
        let views: Vec<_> = bags.iter().map(|b| b.view()).collect();
        let batch = imp.encode_batch(&views).unwrap();
        prop_assert_eq!(batch.dim(), (bags.len(), imp.output_dim()));
        for (i, b) in bags.iter().enumerate() {
            let r = raw.encode(b.view()).unwrap();
            let v = imp.encode(b.view()).unwrap();
            prop_assert!(v.iter().all(|x| x.is_finite()));
            // Same bag, same vector, alone or in a batch.
            prop_assert_eq!(&batch.row(i), &v.view());
            // improved = signed sqrt then L2 of the raw vector.
            let p = r.mapv(|x| x.signum() * x.abs().sqrt());
            let norm = p.iter().map(|x| x * x).sum::<f64>().sqrt();
            let vn = v.iter().map(|x| x * x).sum::<f64>().sqrt();
            if identically_zero(&g, &parts) {
                prop_assert!(r.iter().all(|&x| x == 0.0), "raw {}", r);
                prop_assert!(v.iter().all(|&x| x == 0.0), "improved {}", v);
            } else {
                prop_assert!(norm > 1e-12, "raw norm {} for parts {:?}, K = {}", norm, parts, g.n_components());
                prop_assert!((vn - 1.0).abs() < 1e-12, "norm {}", vn);
                for (a, b) in v.iter().zip(p.iter()) {
                    prop_assert!((a - b / norm).abs() < 1e-12);
                }
            }
        }
    }

    #[test]
    fn bags_far_from_every_component_give_finite_vectors(
        (g, bags, parts, fast) in case(), shift in 1e2f64..1e6, sign in prop::bool::ANY,
    ) {
        let shift = if sign { shift } else { -shift };
        let enc = |p: Normalization| FisherVector::new(&g, FisherVectorParams {
            parts: parts.clone(), normalization: p, fast, vlfeat_skips: false,
        }).unwrap();
        let g32: DiagGmm<f32> = g.cast();
        let enc32 = FisherVector::new(&g32, FisherVectorParams {
            parts: parts.clone(), normalization: Normalization::default(), fast, vlfeat_skips: false,
        }).unwrap();
        for b in &bags {
            let far = b.mapv(|x| x + shift);
            let raw = enc(Normalization::NONE).encode(far.view()).unwrap();
            prop_assert!(raw.iter().all(|x| x.is_finite()));
            let v = enc(Normalization::default()).encode(far.view()).unwrap();
            prop_assert!(v.iter().all(|x| x.is_finite()));
            let n = v.iter().map(|x| x * x).sum::<f64>().sqrt();
            // Unit norm; all zero only where the raw vector is identically zero.
            if identically_zero(&g, &parts) {
                prop_assert!(n == 0.0, "norm {}", n);
            } else {
                prop_assert!((n - 1.0).abs() < 1e-9, "norm {} for parts {:?}, K = {}", n, parts, g.n_components());
            }
            let v32 = enc32.encode(far.mapv(|x| x as f32).view()).unwrap();
            prop_assert!(v32.iter().all(|x| x.is_finite()));
        }
    }
}
