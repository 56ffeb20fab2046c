//! Tests of the operations (and of EfficientNet's fused head) against naive loops.

use crate::blocks::head_fc::{head_fc_band, head_fc_chw, HEAD_FC_BAND};
use crate::exec::team::{with_team, Team};
use crate::ops::activation::Act;
use crate::ops::conv::{same_geometry, Conv};
use crate::ops::conv1x1::{conv1x1, conv1x1_chw};
use crate::ops::im2col::{conv_chw_input, stem_gathered, stem_im2col};
use crate::ops::pooling::{max_pool, pool_out};
use crate::ops::tensor::Hwc;
use fisherkit::linalg::Par;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

#[test]
fn max_pool_matches_naive_loops() {
    for (seed, &(c, h, w)) in [(2, 7, 7), (3, 8, 10), (1, 3, 4), (4, 13, 27), (5, 40, 9)]
        .iter()
        .enumerate()
    {
        let mut rng = ChaCha8Rng::seed_from_u64(7 + seed as u64);
        let x = Hwc {
            h,
            w,
            c,
            data: (0..h * w * c)
                .map(|_| rng.random_range(-1.0f32..1.0))
                .collect(),
        };
        let ho = (h - 3) / 2 + 1;
        let wo = (w - 3) / 2 + 1;
        let mut want = vec![0.0f32; ho * wo * c];
        for i in 0..ho {
            for j in 0..wo {
                for cc in 0..c {
                    let mut m = f32::NEG_INFINITY;
                    for u in 0..3 {
                        for v in 0..3 {
                            m = m.max(x.data[((2 * i + u) * w + 2 * j + v) * c + cc]);
                        }
                    }
                    want[(i * wo + j) * c + cc] = m;
                }
            }
        }
        for par in [Par::Seq, Par::rayon(2)] {
            let got = max_pool(&x, &Team::fork_join(par));
            assert_eq!((got.h, got.w, got.c), (ho, wo, c));
            assert_eq!(got.data, want);
        }
    }
}

fn rand_vec(rng: &mut ChaCha8Rng, n: usize) -> Vec<f32> {
    (0..n).map(|_| rng.random_range(-1.0f32..1.0)).collect()
}

/// Naive "same"-padded convolution of a channel-last x (h, w, cin) by an OIHW kernel with
/// `groups` groups (1 or cin), f64 accumulation, no bias.
#[allow(clippy::too_many_arguments)]
fn naive_conv(
    x: &[f32],
    (h, w, cin): (usize, usize, usize),
    wgt: &[f32],
    cout: usize,
    k: usize,
    s: usize,
    depthwise: bool,
) -> (usize, usize, Vec<f64>) {
    let (ho, pt) = same_geometry(h, k, s);
    let (wo, pl) = same_geometry(w, k, s);
    let cpg = if depthwise { 1 } else { cin };
    let mut out = vec![0.0f64; ho * wo * cout];
    for i in 0..ho {
        for j in 0..wo {
            for o in 0..cout {
                let mut acc = 0.0f64;
                for ci in 0..cpg {
                    let c = if depthwise { o } else { ci };
                    for u in 0..k {
                        for v in 0..k {
                            let (y, xx) = (
                                (i * s + u) as isize - pt as isize,
                                (j * s + v) as isize - pl as isize,
                            );
                            if y < 0 || xx < 0 || y >= h as isize || xx >= w as isize {
                                continue;
                            }
                            let xv = x[((y as usize) * w + xx as usize) * cin + c] as f64;
                            acc += xv * wgt[((o * cpg + ci) * k + u) * k + v] as f64;
                        }
                    }
                }
                out[(i * wo + j) * cout + o] = acc;
            }
        }
    }
    (ho, wo, out)
}

fn assert_close(got: &[f32], want: &[f64], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        assert!(
            (g as f64 - w).abs() <= 1e-4 * (1.0 + w.abs()),
            "{what}[{i}]: {g} vs {w}"
        );
    }
}

#[test]
fn conv1x1_with_residual_and_strided_input_conv_match_naive_loops() {
    let mut rng = ChaCha8Rng::seed_from_u64(5);
    let (h, w, cin, cout) = (13, 17, 24, 40);
    let x = Hwc {
        h,
        w,
        c: cin,
        data: rand_vec(&mut rng, h * w * cin),
    };
    let r = Hwc {
        h,
        w,
        c: cout,
        data: rand_vec(&mut rng, h * w * cout),
    };
    let wgt = rand_vec(&mut rng, cout * cin);
    let bias = rand_vec(&mut rng, cout);
    let conv = Conv::new(wgt.clone(), bias.clone(), cin, 1, 1);
    let (_, _, lin) = naive_conv(&x.data, (h, w, cin), &wgt, cout, 1, 1, false);
    for par in [Par::Seq, Par::rayon(2)] {
        let want: Vec<f64> = lin
            .iter()
            .enumerate()
            .map(|(i, v)| v + bias[i % cout] as f64 + r.data[i] as f64)
            .collect();
        let got = conv1x1(&conv, &x, Act::None, Some(&r), &Team::fork_join(par));
        assert_close(&got.data, &want, "conv1x1 + residual");
        let want6: Vec<f64> = lin
            .iter()
            .enumerate()
            .map(|(i, v)| (v + bias[i % cout] as f64).clamp(0.0, 6.0))
            .collect();
        let got6 = conv1x1(&conv, &x, Act::Relu6, None, &Team::fork_join(par));
        assert_close(&got6.data, &want6, "conv1x1 relu6");
    }
    // The stem: 3×3 stride 2 from a CHW input, odd and even sides.
    for &(h, w) in &[(15, 16), (224, 225), (5, 2)] {
        let (c, n, k) = (3, 8, 3);
        let chw = ndarray::Array3::from_shape_fn((c, h, w), |_| rng.random_range(-2.0f32..2.0));
        let hwc: Vec<f32> = (0..h * w * c)
            .map(|i| chw[[i % c, i / c / w, (i / c) % w]])
            .collect();
        let wgt = rand_vec(&mut rng, n * c * k * k);
        let bias = rand_vec(&mut rng, n);
        let conv = Conv::new(wgt.clone(), bias.clone(), c, k, 2);
        let (ho, wo, lin) = naive_conv(&hwc, (h, w, c), &wgt, n, k, 2, false);
        let want: Vec<f64> = lin
            .iter()
            .enumerate()
            .map(|(i, v)| (v + bias[i % n] as f64).clamp(0.0, 6.0))
            .collect();
        // Unpacked (faer) and packed (the pointwise kernel where the CPU has AVX2 + FMA).
        for conv in [conv.clone(), conv.packed()] {
            for par in [Par::Seq, Par::rayon(2)] {
                let got = with_team(par, |t| conv_chw_input(&conv, chw.view(), Act::Relu6, t));
                assert_eq!((got.h, got.w, got.c), (ho, wo, n));
                assert_close(&got.data, &want, &format!("stem {h}x{w}"));
            }
        }
    }
}

#[test]
fn gathered_stem_is_bitwise_the_im2col_stem() {
    // EfficientNet's stem shape (3 → 32, 3×3 stride 2), odd and even sides, a side below
    // the kernel, and a non-contiguous (transposed) input view.
    let mut rng = ChaCha8Rng::seed_from_u64(8);
    let (c, n, k) = (3, 32, 3);
    let conv = Conv::new(
        rand_vec(&mut rng, n * c * k * k),
        rand_vec(&mut rng, n),
        c,
        k,
        2,
    )
    .packed();
    if !crate::ops::pointwise::gather_available(2) {
        return; // no AVX-512F: conv_chw_input is stem_im2col, tested above
    }
    for &(h, w) in &[(227, 227), (40, 71), (2, 9)] {
        let chw = ndarray::Array3::from_shape_fn((c, h, w), |_| rng.random_range(-2.0f32..2.0));
        let wide = ndarray::Array3::from_shape_fn((c, w, h), |(ch, j, i)| chw[[ch, i, j]]);
        for par in [Par::Seq, Par::rayon(2)] {
            let want = stem_im2col(&conv, chw.view(), Act::Relu6, &Team::fork_join(par));
            let pk = conv.packed.as_ref().unwrap();
            for x in [chw.view(), wide.view().permuted_axes([0, 2, 1])] {
                let got = with_team(par, |t| stem_gathered(&conv, pk, x, Act::Relu6, t));
                assert_eq!((got.h, got.w, got.c), (want.h, want.w, want.c));
                let same = got
                    .data
                    .iter()
                    .zip(&want.data)
                    .all(|(a, b)| a.to_bits() == b.to_bits());
                assert!(same, "stem {h}x{w}: gathered differs from im2col");
            }
        }
    }
}

#[test]
fn weight_reorder_is_a_permutation_of_the_oihw_kernel() {
    let (cout, cin, k) = (3, 4, 3);
    let w: Vec<f32> = (0..cout * cin * k * k).map(|v| v as f32).collect();
    let conv = Conv::new(w, vec![0.0; cout], cin, k, 1);
    for o in 0..cout {
        for c in 0..cin {
            for u in 0..k {
                for v in 0..k {
                    let oihw = ((o * cin + c) * k + u) * k + v;
                    assert_eq!(conv.wt[[(u * k + v) * cin + c, o]], oihw as f32);
                }
            }
        }
    }
}

#[test]
fn head_fc_matches_the_two_convolutions_for_any_team() {
    // 300 pixels: two bands of 150 with one or two threads, three of 100 with three.
    let mut rng = ChaCha8Rng::seed_from_u64(17);
    let (h, w, cin, ch, n) = (15, 20, 24, 40, 33);
    let x = Hwc {
        h,
        w,
        c: cin,
        data: rand_vec(&mut rng, h * w * cin),
    };
    let head = Conv::new(
        rand_vec(&mut rng, ch * cin),
        rand_vec(&mut rng, ch),
        cin,
        1,
        1,
    );
    let fc = Conv::new(rand_vec(&mut rng, n * ch), rand_vec(&mut rng, n), ch, 1, 1);
    let seq = Team::fork_join(Par::Seq);
    let f = conv1x1(&head, &x, Act::Relu6, None, &seq);
    let want = conv1x1_chw(&fc, &f, &seq);
    let (head, fc) = (head.packed(), fc.packed());
    let one = with_team(Par::Seq, |t| head_fc_chw(&head, &fc, &x, t));
    let Some(one) = one else {
        return; // no AVX2 + FMA here: the caller's fallback is what `want` ran
    };
    assert_eq!(one.dim(), (n, h * w));
    let want: Vec<f64> = want.iter().map(|&v| v as f64).collect();
    assert_close(one.as_slice().unwrap(), &want, "head_fc");
    for t in [2, 3] {
        let got = with_team(Par::rayon(t), |tm| head_fc_chw(&head, &fc, &x, tm));
        assert_eq!(got.as_ref(), Some(&one), "{t} threads differ from one");
    }
}

#[test]
fn head_fc_bands_are_one_per_thread_on_small_maps() {
    for p in [1, 20, 64, 100, 225, 256, 257, 841, 3600] {
        for t in 1..=4 {
            let band = head_fc_band(p, t);
            let bands = p.div_ceil(band);
            assert!(band <= HEAD_FC_BAND, "{p} px, {t} threads: band {band}");
            if p >= t * HEAD_FC_BAND / 2 {
                // Enough pixels: the bands keep every thread busy, in equal shares.
                assert_eq!(bands % t, 0, "{p} px, {t} threads: {bands} bands");
            }
            if p <= t * HEAD_FC_BAND && p >= t {
                assert_eq!(bands, t, "{p} px, {t} threads: {bands} bands");
            }
        }
    }
}

#[test]
fn same_padding_geometry() {
    // conv1 at 227 (odd): 114 outputs, one pixel of padding before.
    assert_eq!(same_geometry(227, 3, 2), (114, 1));
    // even side: 113 outputs, no padding before (one after).
    assert_eq!(same_geometry(226, 3, 2), (113, 0));
    assert_eq!(same_geometry(13, 3, 1), (13, 1));
    assert_eq!(pool_out(114), Some(56));
    assert_eq!(pool_out(2), None);
}
