//! The two kinds of [`crate::mixture`]: the diagonal GMM and the MFA, with
//! their numpy parameters and statistics classes.

use crate::gmm::GmmStatistics;
use crate::mfa::{Arr3, MfaStatistics};
use crate::mixture::{Mixture, ModelArgs};
use crate::{value_error, Mat, PyFloat, Vec1};
use fisherkit::gmm::{DiagGmm, GmmError, GmmStats};
use fisherkit::mfa::{Mfa, MfaError, MfaStats};
use ndarray::{Array1, Array2, ArrayView2};
use numpy::IntoPyArray;
use pyo3::prelude::*;

impl<F: PyFloat> Mixture<F> for DiagGmm<F> {
    type Error = GmmError;
    type Stats = GmmStats;
    type PyStats = GmmStatistics;
    type Out<'py> = (Bound<'py, PyAny>, Bound<'py, PyAny>, Bound<'py, PyAny>);
    const STATS_CLASS: &'static str = "GmmStatistics";

    fn to_py(self, py: Python<'_>) -> Self::Out<'_> {
        let (w, m, v) = self.into_parts();
        (
            w.into_pyarray(py).into_any(),
            m.into_pyarray(py).into_any(),
            v.into_pyarray(py).into_any(),
        )
    }
    fn score_samples(&self, x: ArrayView2<'_, F>) -> Result<Array1<f64>, GmmError> {
        DiagGmm::score_samples(self, x)
    }
    fn predict_proba(&self, x: ArrayView2<'_, F>) -> Result<Array2<F>, GmmError> {
        DiagGmm::predict_proba(self, x)
    }
    fn statistics(&self, x: ArrayView2<'_, F>) -> Result<GmmStats, GmmError> {
        self.sufficient_statistics(x)
    }
    fn wrap(inner: GmmStats) -> GmmStatistics {
        GmmStatistics { inner }
    }
    fn unwrap(st: &GmmStatistics) -> GmmStats {
        st.inner.clone()
    }
}

/// `(weights (K), means (K, D), variances (K, D))`.
impl ModelArgs for (Vec1<'_>, Mat<'_>, Mat<'_>) {
    type Model<F: PyFloat> = DiagGmm<F>;
    fn model<F: PyFloat>(&self) -> PyResult<DiagGmm<F>> {
        let (w, m, v) = self;
        DiagGmm::new(w.to_owned_as(), m.to_owned_as(), v.to_owned_as()).map_err(value_error)
    }
}

impl<F: PyFloat> Mixture<F> for Mfa<F> {
    type Error = MfaError;
    type Stats = MfaStats;
    type PyStats = MfaStatistics;
    type Out<'py> = (
        Bound<'py, PyAny>,
        Bound<'py, PyAny>,
        Bound<'py, PyAny>,
        Bound<'py, PyAny>,
    );
    const STATS_CLASS: &'static str = "MfaStatistics";

    fn to_py(self, py: Python<'_>) -> Self::Out<'_> {
        let (w, mu, l, psi) = self.into_parts();
        (
            w.into_pyarray(py).into_any(),
            mu.into_pyarray(py).into_any(),
            l.into_pyarray(py).into_any(),
            psi.into_pyarray(py).into_any(),
        )
    }
    fn score_samples(&self, x: ArrayView2<'_, F>) -> Result<Array1<f64>, MfaError> {
        Mfa::score_samples(self, x)
    }
    fn predict_proba(&self, x: ArrayView2<'_, F>) -> Result<Array2<F>, MfaError> {
        Mfa::predict_proba(self, x)
    }
    fn statistics(&self, x: ArrayView2<'_, F>) -> Result<MfaStats, MfaError> {
        self.sufficient_statistics(x)
    }
    fn wrap(inner: MfaStats) -> MfaStatistics {
        MfaStatistics { inner }
    }
    fn unwrap(st: &MfaStatistics) -> MfaStats {
        st.inner.clone()
    }
}

/// `(weights (K), means (K, D), loadings (K, D, R), psi (1, D) or (K, D))`.
impl ModelArgs for (Vec1<'_>, Mat<'_>, Arr3<'_>, Mat<'_>) {
    type Model<F: PyFloat> = Mfa<F>;
    fn model<F: PyFloat>(&self) -> PyResult<Mfa<F>> {
        let (w, m, l, psi) = self;
        Mfa::new(
            w.to_owned_as(),
            m.to_owned_as(),
            l.to_owned_as(),
            psi.to_owned_as(),
        )
        .map_err(value_error)
    }
}
