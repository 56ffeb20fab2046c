//! The hyper-parameters of k-means and their check: [`KMeansParams`] →
//! [`KMeansParams::check`] → [`ValidKMeansParams`].

use super::error::KMeansError;

/// Hyper-parameters of k-means.
#[derive(Debug, Clone, PartialEq)]
pub struct KMeansParams {
    pub(super) n_clusters: usize,
    pub(super) max_iter: usize,
    pub(super) tol: f64,
    pub(super) n_init: usize,
    pub(super) seed: u64,
    pub(super) n_local_trials: Option<usize>,
}

/// The defaults of [`KMeansParams`], written once (the CLI's `kmeans fit`
/// flags use them too).
pub mod kmeans_defaults {
    /// Most Lloyd updates per run.
    pub const MAX_ITER: usize = 100;
    /// Relative decrease of the inertia below which Lloyd stops.
    pub const TOL: f64 = 1e-4;
    /// Runs (the lowest inertia wins).
    pub const N_INIT: usize = 1;
    /// Seed of the k-means++ seeding.
    pub const SEED: u64 = 0;
}

impl KMeansParams {
    /// `n_clusters` clusters with the [`kmeans_defaults`] (`max_iter` 100,
    /// `tol` 1e-4, `n_init` 1, `seed` 0) and `n_local_trials` `None` (greedy
    /// k-means++ with [`default_local_trials`](super::default_local_trials) candidates per centroid).
    pub fn new(n_clusters: usize) -> Self {
        Self {
            n_clusters,
            max_iter: kmeans_defaults::MAX_ITER,
            tol: kmeans_defaults::TOL,
            n_init: kmeans_defaults::N_INIT,
            seed: kmeans_defaults::SEED,
            n_local_trials: None,
        }
    }

    /// Candidates drawn per centroid by the k-means++ seeding (≥ 1); the one
    /// that lowers the potential most is kept. `None`: $2 + \lfloor\ln K\rfloor$
    /// (greedy k-means++, scikit-learn's default); `Some(1)`: plain k-means++.
    pub fn n_local_trials(mut self, n_local_trials: Option<usize>) -> Self {
        self.n_local_trials = n_local_trials;
        self
    }

    /// Maximum number of Lloyd updates per run (≥ 1).
    pub fn max_iter(mut self, max_iter: usize) -> Self {
        self.max_iter = max_iter;
        self
    }

    /// Stop when the relative decrease of the inertia,
    /// $(J_{t-1} - J_t)/J_{t-1}$, is at most `tol` (≥ 0).
    pub fn tol(mut self, tol: f64) -> Self {
        self.tol = tol;
        self
    }

    /// Number of independently seeded runs; the lowest inertia wins (≥ 1).
    pub fn n_init(mut self, n_init: usize) -> Self {
        self.n_init = n_init;
        self
    }

    /// Seed of the k-means++ seeding.
    pub fn seed(mut self, seed: u64) -> Self {
        self.seed = seed;
        self
    }

    /// Number of clusters K.
    pub fn n_clusters(&self) -> usize {
        self.n_clusters
    }

    /// Checks every setting that does not depend on the data — K ≥ 1,
    /// `max_iter` ≥ 1, `tol` finite and ≥ 0, `n_init` ≥ 1, `n_local_trials`
    /// ≥ 1 when given — in that order, and returns the checked parameters,
    /// which every fit runs on. K ≤ N is checked against the data when fitting.
    ///
    /// ```
    /// use fisherkit::kmeans::{KMeansError, KMeansParams};
    /// assert!(KMeansParams::new(8).n_init(3).check().is_ok());
    /// let e = KMeansParams::new(8).tol(f64::NAN).check().unwrap_err();
    /// assert!(matches!(e, KMeansError::InvalidHyperParameter { name: "tol", .. }));
    /// assert!(e.to_string().contains("tol"));
    /// ```
    pub fn check(&self) -> Result<ValidKMeansParams, KMeansError> {
        let bad = |name, reason: &str| {
            Err(KMeansError::InvalidHyperParameter {
                name,
                reason: reason.to_string(),
            })
        };
        if self.n_clusters == 0 {
            return bad("n_clusters", "must be at least 1, got 0");
        }
        if self.max_iter == 0 {
            return bad("max_iter", "must be at least 1, got 0");
        }
        if !(self.tol >= 0.0 && self.tol.is_finite()) {
            return bad("tol", &format!("must be finite and >= 0, got {}", self.tol));
        }
        if self.n_init == 0 {
            return bad("n_init", "must be at least 1, got 0");
        }
        if self.n_local_trials == Some(0) {
            return bad("n_local_trials", "must be at least 1, got 0");
        }
        Ok(ValidKMeansParams(self.clone()))
    }
}

/// [`KMeansParams`] that passed [`KMeansParams::check`]; only `check` makes
/// one, so its fit checks the data but never the settings again (linfa's
/// params → checked params → fit). Reads as the parameters (`Deref`).
#[derive(Debug, Clone, PartialEq)]
pub struct ValidKMeansParams(KMeansParams);

impl std::ops::Deref for ValidKMeansParams {
    type Target = KMeansParams;
    fn deref(&self) -> &KMeansParams {
        &self.0
    }
}

impl ValidKMeansParams {
    /// The check against data of `n_rows` rows: K ≤ N.
    pub(super) fn check_rows(&self, n_rows: usize) -> Result<(), KMeansError> {
        if self.n_clusters > n_rows {
            return Err(KMeansError::TooFewRows {
                n_rows,
                n_clusters: self.n_clusters,
            });
        }
        Ok(())
    }
}
