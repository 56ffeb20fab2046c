//! What the Python statistics classes (`GmmStatistics`, `MfaStatistics`)
//! share, written once: [`statistics_class!`] declares a frozen pyclass
//! around the library's mergeable E-step sums (`fisherkit::gmm::GmmStats`,
//! `fisherkit::mfa::MfaStats`, which have the same method names) with
//! `a + b` / `sum([...])` merging, pickling through the constructor from
//! parts (numpy arrays), the common properties and one property per array.

/// Declares a frozen pyclass `$name` holding `inner: $inner` with:
///
/// * the properties `n_rows`, `log_likelihood`, `mean_log_likelihood`,
///   `n_components`, `n_features` (the library's `dim`), `center` and
///   `resp_sums` (the library method named by `resp_sums:`);
/// * one float64 numpy property per entry of `arrays:` (`name: PyArrayN`,
///   copied from the library's getter of the same name);
/// * `__add__` / `__radd__`: merging with another `$name` (the library's
///   `merge`), `x + 0 = x` so that `sum([...])` works;
/// * `__reduce__`: pickles as the class and the tuple `reduce:` builds from
///   the statistics `$st` (the arguments of the class's constructor);
/// * `__repr__`;
/// * and the methods given in `methods:` (the `#[new]` constructor).
macro_rules! statistics_class {
    (
        $(#[$doc:meta])*
        $name:ident($inner:ty) {
            resp_sums: $resp:ident,
            arrays: { $($(#[$adoc:meta])* $arr:ident: $kind:ident),* $(,)? },
            reduce: |$st:ident, $py:ident| $args:expr,
            methods: { $($methods:tt)* } $(,)?
        }
    ) => {
        $(#[$doc])*
        #[pyo3::pyclass(frozen, module = "fisherkit._fisherkit")]
        pub(crate) struct $name {
            pub(crate) inner: $inner,
        }

        #[pyo3::pymethods]
        impl $name {
            $($methods)*

            $(
                $(#[$adoc])*
                #[getter]
                fn $arr<'py>(&self, py: pyo3::Python<'py>) -> pyo3::Bound<'py, numpy::$kind<f64>> {
                    numpy::ToPyArray::to_pyarray(&self.inner.$arr(), py)
                }
            )*

            /// Number of rows summed (the library's type: float for the GMM,
            /// int for the MFA).
            #[getter]
            fn n_rows<'py>(&self, py: pyo3::Python<'py>) -> pyo3::PyResult<pyo3::Bound<'py, pyo3::PyAny>> {
                pyo3::IntoPyObjectExt::into_bound_py_any(self.inner.n_rows(), py)
            }

            /// sum_i log p(x_i) under the model that computed the statistics.
            #[getter]
            fn log_likelihood(&self) -> f64 {
                self.inner.log_likelihood()
            }

            /// Mean log-likelihood per row (0 with no rows).
            #[getter]
            fn mean_log_likelihood(&self) -> f64 {
                self.inner.mean_log_likelihood()
            }

            /// Number of components K.
            #[getter]
            fn n_components(&self) -> usize {
                self.inner.n_components()
            }

            /// Dimension D.
            #[getter]
            fn n_features(&self) -> usize {
                self.inner.dim()
            }

            /// Reference point c (D) the rows were centred on.
            #[getter]
            fn center<'py>(&self, py: pyo3::Python<'py>) -> pyo3::Bound<'py, numpy::PyArray1<f64>> {
                numpy::ToPyArray::to_pyarray(&self.inner.center(), py)
            }

            /// Soft counts n_k = sum_i q_ik (K).
            #[getter]
            fn resp_sums<'py>(&self, py: pyo3::Python<'py>) -> pyo3::Bound<'py, numpy::PyArray1<f64>> {
                numpy::ToPyArray::to_pyarray(&self.inner.$resp(), py)
            }

            /// ``a + b``: statistics of the union of the rows (an error if the
            /// two were computed with models of different shapes). ``a + 0``
            /// is ``a`` (for ``sum``).
            fn __add__(
                &self,
                py: pyo3::Python<'_>,
                other: &pyo3::Bound<'_, pyo3::PyAny>,
            ) -> pyo3::PyResult<pyo3::Py<pyo3::PyAny>> {
                let mut acc = self.inner.clone();
                if let Ok(o) = other.cast::<$name>() {
                    acc.merge(&o.get().inner).map_err($crate::value_error)?;
                } else if !(other.is_instance_of::<pyo3::types::PyInt>()
                    && other.extract::<i64>().ok() == Some(0))
                {
                    return Ok(py.NotImplemented());
                }
                Ok(pyo3::Py::new(py, $name { inner: acc })?.into_any())
            }

            fn __radd__(
                &self,
                py: pyo3::Python<'_>,
                other: &pyo3::Bound<'_, pyo3::PyAny>,
            ) -> pyo3::PyResult<pyo3::Py<pyo3::PyAny>> {
                self.__add__(py, other)
            }

            /// Pickling: the class and its constructor's arguments (numpy arrays).
            fn __reduce__<'py>(
                slf: &pyo3::Bound<'py, Self>,
            ) -> pyo3::PyResult<pyo3::Bound<'py, pyo3::types::PyTuple>> {
                use pyo3::IntoPyObject;
                let $py = slf.py();
                let $st = &slf.get().inner;
                let args = $args;
                (slf.get_type(), args).into_pyobject($py)
            }

            fn __repr__(&self) -> String {
                format!(
                    "{}(n_components={}, n_features={}, n_rows={}, mean_log_likelihood={})",
                    stringify!($name),
                    self.inner.n_components(),
                    self.inner.dim(),
                    self.inner.n_rows(),
                    self.inner.mean_log_likelihood()
                )
            }
        }
    };
}
pub(crate) use statistics_class;

/// Why an EM fit run by [`crate::interrupt::interruptible`] stopped early:
/// the library's error, or the cancel flag (then Python gets the signal
/// handler's exception, never this value).
#[derive(Debug)]
pub(crate) enum Stop {
    Failed(String),
    Cancelled(crate::interrupt::Cancelled),
}

impl Stop {
    /// The `ValueError` of a library error.
    pub(crate) fn into_py(self) -> pyo3::PyErr {
        match self {
            Stop::Failed(m) => pyo3::exceptions::PyValueError::new_err(m),
            Stop::Cancelled(_) => pyo3::exceptions::PyKeyboardInterrupt::new_err("interrupted"),
        }
    }
}

impl From<crate::interrupt::Cancelled> for Stop {
    fn from(c: crate::interrupt::Cancelled) -> Self {
        Stop::Cancelled(c)
    }
}

impl From<fisherkit::gmm::GmmError> for Stop {
    fn from(e: fisherkit::gmm::GmmError) -> Self {
        Stop::Failed(e.to_string())
    }
}

impl From<fisherkit::mfa::MfaError> for Stop {
    fn from(e: fisherkit::mfa::MfaError) -> Self {
        Stop::Failed(e.to_string())
    }
}

/// The EM tolerance of `tol` and `tol_mode` ("absolute" or "relative",
/// `fisherkit::stream::EmTol`); an unknown mode is a `ValueError` naming it.
pub(crate) fn em_tol(tol: f64, tol_mode: &str) -> pyo3::PyResult<fisherkit::stream::EmTol> {
    fisherkit::stream::EmTol::with_mode(tol_mode, tol)
        .map_err(pyo3::exceptions::PyValueError::new_err)
}

/// The library's one EM stopping rule (`fisherkit::stream::em_stopping_rule`)
/// for `update_from_statistics`: the change of the mean log-likelihood `ll`
/// after the `history` — absolute, |l_t - l_(t-1)|, or with `tol_mode`
/// "relative" divided by max(|l_(t-1)|, 1) — and whether it is below `tol`
/// (never while the M-step re-seeded components: `reseeded` > 0).
#[pyo3::pyfunction]
#[pyo3(signature = (history, ll, tol, tol_mode, reseeded = 0))]
pub(crate) fn em_stopping_rule(
    history: Vec<f64>,
    ll: f64,
    tol: f64,
    tol_mode: &str,
    reseeded: usize,
) -> pyo3::PyResult<(f64, bool)> {
    let rule = em_tol(tol, tol_mode)?;
    Ok(fisherkit::stream::em_stopping_rule(
        &history, ll, rule, reseeded,
    ))
}

/// The error of a fit whose E-step runs in Python (`*_fit_from_statistics`):
/// the callback's exception as it was raised, or the library's error as a
/// `ValueError`.
pub(crate) struct DriveError(pub(crate) pyo3::PyErr);

impl From<pyo3::PyErr> for DriveError {
    fn from(e: pyo3::PyErr) -> Self {
        Self(e)
    }
}

impl From<fisherkit::gmm::GmmError> for DriveError {
    fn from(e: fisherkit::gmm::GmmError) -> Self {
        Self(crate::value_error(e))
    }
}

impl From<fisherkit::mfa::MfaError> for DriveError {
    fn from(e: fisherkit::mfa::MfaError) -> Self {
        Self(crate::value_error(e))
    }
}

/// What `get` takes from the statistics object (of the frozen pyclass `T`,
/// named `class`) a Python E-step callback returned; a `TypeError` naming
/// what it returned otherwise.
pub(crate) fn returned_statistics<T, S>(
    out: &pyo3::Bound<'_, pyo3::PyAny>,
    class: &str,
    get: impl FnOnce(&T) -> S,
) -> Result<S, DriveError>
where
    T: pyo3::PyClass<Frozen = pyo3::pyclass::boolean_struct::True> + Sync,
{
    use pyo3::types::{PyAnyMethods, PyTypeMethods};
    let st = out.cast::<T>().map_err(|_| {
        let got = out
            .get_type()
            .name()
            .map(|n| n.to_string())
            .unwrap_or_else(|_| "?".into());
        DriveError(pyo3::exceptions::PyTypeError::new_err(format!(
            "statistics_of must return {class}, got {got}"
        )))
    })?;
    Ok(get(st.get()))
}

/// The library's default settings, written once in Rust, by name: the Python
/// estimators' keyword defaults are tested against them
/// (`tests/python/test_conventions.py`).
#[pyo3::pyfunction]
pub(crate) fn defaults(
    py: pyo3::Python<'_>,
) -> pyo3::PyResult<pyo3::Bound<'_, pyo3::types::PyDict>> {
    use fisherkit::gmm::VarianceFloor;
    use fisherkit::kmeans::kmeans_defaults as km;
    use fisherkit::stream::em_defaults as em;
    use pyo3::types::PyDictMethods;
    let d = pyo3::types::PyDict::new(py);
    let (floor, mode) = match VarianceFloor::default() {
        VarianceFloor::Relative(v) => (v, "relative"),
        VarianceFloor::Absolute(v) => (v, "absolute"),
    };
    let svm = fisherkit::svm::LinearSvcParams::default();
    let norm = fisherkit::Normalization::default();
    d.set_item("em_max_iter", em::MAX_ITER)?;
    d.set_item("em_tol", em::TOL)?;
    d.set_item("em_tol_mode", fisherkit::stream::EmTol::default().mode())?;
    d.set_item("em_n_init", em::N_INIT)?;
    d.set_item("em_seed", em::SEED)?;
    d.set_item("kmeans_max_iter", km::MAX_ITER)?;
    d.set_item("kmeans_tol", km::TOL)?;
    d.set_item("kmeans_n_init", km::N_INIT)?;
    d.set_item("kmeans_seed", km::SEED)?;
    d.set_item(
        "gmm_init_kmeans_max_iter",
        fisherkit::gmm::INIT_KMEANS_MAX_ITER,
    )?;
    d.set_item(
        "mfa_init_kmeans_max_iter",
        fisherkit::mfa::INIT_KMEANS_MAX_ITER,
    )?;
    d.set_item("variance_floor", floor)?;
    d.set_item("variance_floor_mode", mode)?;
    d.set_item("psi_floor", fisherkit::mfa::PSI_FLOOR)?;
    d.set_item("svm_c", svm.c)?;
    d.set_item("svm_tol", svm.tol)?;
    d.set_item("svm_max_iter", svm.max_iter)?;
    d.set_item("svm_seed", svm.seed)?;
    d.set_item("power", norm.power)?;
    d.set_item("l2", norm.l2)?;
    Ok(d)
}

pub(crate) fn register(m: &pyo3::Bound<'_, pyo3::types::PyModule>) -> pyo3::PyResult<()> {
    use pyo3::types::PyModuleMethods;
    m.add_function(pyo3::wrap_pyfunction!(em_stopping_rule, m)?)?;
    m.add_function(pyo3::wrap_pyfunction!(defaults, m)?)
}
