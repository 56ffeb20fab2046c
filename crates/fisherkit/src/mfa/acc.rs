//! What the MFA E-step kernel sums ([`GAcc`]), what a caller asks of it
//! ([`Want`]), and the scratch views both of its paths ([`super::kernel`]'s
//! GEMMs and [`super::sparse`]'s pairs) write through.

use ndarray::{Array1, Array2, Array3, ArrayViewMut2};

/// What the kernel must accumulate besides log-likelihoods.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Want {
    /// $n_k$, $\sum h g$, $\sum h g g^\top$, $\sum h y g^\top$, $\sum h y$.
    pub stats: bool,
    /// $\sum h y^2$ (per component) or $\sum y^2$ (shared $\Psi$).
    pub syy: bool,
    /// With `stats`: also $\sum h y g^\top$ and $\sum h g g^\top$ (otherwise
    /// only $n_k$, $\sum h g$ and $\sum h y$, a GEMM R+1 times narrower).
    pub yg: bool,
}

impl Want {
    pub const NONE: Self = Self {
        stats: false,
        syy: false,
        yg: false,
    };
    /// What the Fisher score with respect to the means needs.
    pub const SCORES_MEAN: Self = Self {
        stats: true,
        syy: false,
        yg: false,
    };
    pub const SCORES: Self = Self {
        stats: true,
        syy: false,
        yg: true,
    };
    pub const EM: Self = Self {
        stats: true,
        syy: true,
        yg: true,
    };
}

/// A (rows, cols) row-major view of the first rows·cols elements of `v`, grown as needed.
pub(crate) fn view2<T: Clone + num_traits::Zero>(
    v: &mut Vec<T>,
    shape: (usize, usize),
) -> ArrayViewMut2<'_, T> {
    let len = shape.0 * shape.1;
    if v.len() < len {
        v.resize(len, T::zero());
    }
    ArrayViewMut2::from_shape(shape, &mut v[..len]).expect("length matches shape")
}

/// Sufficient statistics in whitened-factor space ($g$, not $e = C^{-\top} g$), `f64`.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct GAcc {
    pub n_rows: usize,
    pub ll: f64,
    /// (K): $\sum_i h_{ik}$.
    pub nk: Array1<f64>,
    /// (K, R): $\sum_i h_{ik} g_{ik}$.
    pub sg: Array2<f64>,
    /// (K, R, R): $\sum_i h_{ik} g_{ik} g_{ik}^\top$.
    pub sgg: Array3<f64>,
    /// (D, K·R + K): columns $kR..kR+R$ hold $\sum_i h_{ik} y_i g_{ik}^\top$, column $KR+k$ holds $\sum_i h_{ik} y_i$.
    pub syg: Array2<f64>,
    /// (P, D): $\sum_i y_i^2$ (P = 1) or $\sum_i h_{ik} y_i^2$ (P = K); empty when not wanted.
    pub syy: Array2<f64>,
}

impl GAcc {
    pub fn zeros(k: usize, d: usize, r: usize, p: usize, want: Want) -> Self {
        let (sk, sd, sr) = if want.stats { (k, d, r) } else { (0, 0, 0) };
        Self {
            n_rows: 0,
            ll: 0.0,
            nk: Array1::zeros(sk),
            sg: Array2::zeros((sk, sr)),
            sgg: Array3::zeros((sk, sr, sr)),
            syg: Array2::zeros((sd, sk * sr + sk)),
            syy: if want.syy {
                Array2::zeros((p, d))
            } else {
                Array2::zeros((0, 0))
            },
        }
    }

    pub fn add(&mut self, o: &GAcc) {
        self.n_rows += o.n_rows;
        self.ll += o.ll;
        self.nk += &o.nk;
        self.sg += &o.sg;
        self.sgg += &o.sgg;
        self.syg += &o.syg;
        self.syy += &o.syy;
    }
}
