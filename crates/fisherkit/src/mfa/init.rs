//! Initialisation of an MFA: k-means, then probabilistic PCA per cluster.
//!
//! The clustering is [`crate::kmeans`] (k-means++ seeding, at most
//! [`INIT_KMEANS_MAX_ITER`] GEMM Lloyd updates), seeded from the
//! restart's random stream.

use super::model::{Mfa, PsiMode};
use super::MfaError;
use crate::float::Float;
use crate::kmeans::KMeansParams;
use crate::linalg::{gemm, par_all};
use ndarray::{Array1, Array2, Array3, ArrayView2, Axis};
use rand::{Rng, RngCore};
use rand_chacha::ChaCha8Rng;

/// Lloyd updates of the k-means that initialises every restart of an MFA
/// fit (before PPCA per cluster), written once (reported by the Python
/// module's `defaults()`).
pub const INIT_KMEANS_MAX_ITER: usize = 25;

/// k-means then PPCA per cluster: $\Lambda_j = U_R (\Lambda_R - \sigma_j^2 I)^{1/2}$ from
/// the top-R eigenpairs of the cluster covariance, $\sigma_j^2$ the mean of the
/// discarded eigenvalues; $\Psi = \sum_j \frac{n_j}{N}\sigma_j^2$ (shared) or
/// $\sigma_j^2$ (per component), floored at `psi_floor` × the data variance.
pub(crate) fn init_mfa<F: Float>(
    x: ArrayView2<'_, F>,
    k: usize,
    r: usize,
    mode: PsiMode,
    psi_floor: f64,
    rng: &mut ChaCha8Rng,
) -> Result<Mfa<F>, MfaError> {
    let (n, d) = x.dim();
    let mean: Array1<f64> = {
        let mut m = Array1::<f64>::zeros(d);
        for row in x.rows() {
            m.zip_mut_with(&row, |a, v| *a += v.as_f64());
        }
        m / n as f64
    };
    let mf = mean.mapv(F::from_f64_lossy);
    let xc: Array2<F> = &x - &mf;
    let var: Array1<f64> = {
        let mut v = Array1::<f64>::zeros(d);
        for row in xc.rows() {
            v.zip_mut_with(&row, |a, x| *a += x.as_f64() * x.as_f64());
        }
        v / n as f64
    };
    let mean_var = var.mean().unwrap_or(0.0);
    let floor = super::stats::floors_of_variances::<F>(&var, psi_floor);
    let labels = if k == 1 {
        vec![0; n]
    } else {
        KMeansParams::new(k)
            .max_iter(INIT_KMEANS_MAX_ITER)
            .seed(rng.next_u64())
            .fit(xc.view())?
            .labels()
            .to_vec()
    };
    let mut members: Vec<Vec<usize>> = vec![Vec::new(); k];
    for (i, l) in labels.iter().enumerate() {
        members[*l].push(i);
    }
    let mut weights = Array1::<f64>::zeros(k);
    let mut means = Array2::<f64>::zeros((k, d));
    let mut loadings = Array3::<f64>::zeros((k, d, r));
    let mut sigma2 = vec![mean_var; k];
    for (j, mem) in members.iter().enumerate() {
        let nj = mem.len();
        weights[j] = nj.max(1) as f64;
        if nj == 0 {
            let i = rng.random_range(0..n);
            means.row_mut(j).assign(&xc.row(i).mapv(|v| v.as_f64()));
            continue;
        }
        let mut z = Array2::<f64>::zeros((nj, d));
        for (t, &i) in mem.iter().enumerate() {
            z.row_mut(t).assign(&xc.row(i).mapv(|v| v.as_f64()));
        }
        let mj = z.mean_axis(Axis(0)).expect("non-empty cluster");
        z -= &mj;
        means.row_mut(j).assign(&mj);
        if nj < 2 {
            continue;
        }
        let mut cov = Array2::<f64>::zeros((d, d));
        gemm(
            cov.view_mut(),
            false,
            z.t(),
            z.view(),
            1.0 / nj as f64,
            par_all(),
        );
        let fm = faer::Mat::<f64>::from_fn(d, d, |a, b| cov[[a, b]]);
        let Ok(eig) = fm.self_adjoint_eigen(faer::Side::Lower) else {
            continue;
        };
        let vals: Vec<f64> = (0..d)
            .map(|i| eig.S().column_vector()[i].max(0.0))
            .collect();
        // ascending order: the top R are the last R
        let s2 = vals[..d - r].iter().sum::<f64>() / (d - r) as f64;
        sigma2[j] = s2;
        let u = eig.U();
        for a in 0..r {
            let idx = d - 1 - a;
            let scale = (vals[idx] - s2).max(0.0).sqrt();
            for dd in 0..d {
                loadings[[j, dd, a]] = u[(dd, idx)] * scale;
            }
        }
    }
    let wsum = weights.sum();
    let psi = match mode {
        PsiMode::Shared => {
            let s: f64 = (0..k).map(|j| weights[j] / wsum * sigma2[j]).sum();
            Array2::from_shape_fn((1, d), |(_, dd)| s.max(floor[dd]))
        }
        PsiMode::PerComponent => Array2::from_shape_fn((k, d), |(j, dd)| sigma2[j].max(floor[dd])),
    };
    let cvt = F::from_f64_lossy;
    let means_abs = Array2::from_shape_fn((k, d), |(j, dd)| cvt(means[[j, dd]] + mean[dd]));
    Mfa::from_valid(
        weights.mapv(|w| cvt(w / wsum)),
        means_abs,
        loadings.mapv(cvt),
        psi.mapv(cvt),
    )
}
