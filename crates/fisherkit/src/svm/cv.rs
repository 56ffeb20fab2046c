//! Choosing C by stratified cross-validation, the data prepared once and
//! shared by every (C, fold) fit.

use super::error::SvmError;
use super::model::LinearSvc;
use super::ovr::{collect_ovr, fit_ovr, ClassFit};
use super::params::{LinearSvcParams, ValidLinearSvcParams};
use super::solver::{shared, solve_binary_path, Shared};
use crate::float::Float;
use crate::metrics::mean_per_class_accuracy;
use ndarray::ArrayView2;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rayon::prelude::*;

impl LinearSvcParams {
    /// [`LinearSvcParams::check`], then [`ValidLinearSvcParams::select_c`].
    pub fn select_c<F: Float>(
        &self,
        x: ArrayView2<'_, F>,
        y: &[usize],
        grid: &[f64],
        folds: usize,
        seed: u64,
    ) -> Result<(f64, Vec<(f64, f64)>), SvmError> {
        self.check()?.select_c(x, y, grid, folds, seed)
    }

    /// [`LinearSvcParams::check`], then [`ValidLinearSvcParams::fit_with_cv`].
    #[allow(clippy::type_complexity)]
    pub fn fit_with_cv<F: Float>(
        &self,
        x: ArrayView2<'_, F>,
        y: &[usize],
        grid: &[f64],
        folds: usize,
        seed: u64,
    ) -> Result<(LinearSvc<F>, f64, Vec<(f64, f64)>), SvmError> {
        self.check()?.fit_with_cv(x, y, grid, folds, seed)
    }
}

impl ValidLinearSvcParams {
    /// Chooses C by stratified `folds`-fold cross-validation over `grid`,
    /// scoring the mean per-class accuracy on each held-out fold (averaged
    /// over folds). The other hyper-parameters are `self`'s.
    ///
    /// Folds: each class's samples are shuffled (ChaCha8, `seed`) and dealt
    /// round-robin to the folds, the dealing continuing from class to class,
    /// so fold sizes differ by at most one and each class is spread evenly.
    /// Each fold walks the grid in ascending C, every C starting from the
    /// previous one's solution (warm start); the folds and their classes run
    /// in parallel on the one rayon pool (no oversubscription); no fit copies X.
    ///
    /// `x`: (N, D); `y`: (N) in `0..n_classes` as for [`LinearSvcParams::fit`].
    /// Returns the best C (the smallest among equal best scores) and
    /// `(C, score)` for every grid value, in grid order.
    ///
    /// # Errors
    /// As [`LinearSvcParams::fit`]; an empty grid, a C ≤ 0 or non-finite in the
    /// grid, `folds` < 2 or > N.
    pub fn select_c<F: Float>(
        &self,
        x: ArrayView2<'_, F>,
        y: &[usize],
        grid: &[f64],
        folds: usize,
        seed: u64,
    ) -> Result<(f64, Vec<(f64, f64)>), SvmError> {
        let n_classes = self.check_cv(x, y, grid, folds)?;
        let xs = x.as_standard_layout();
        let sh = shared(&xs, self);
        self.cv_table(&sh, y, n_classes, grid, folds, seed, &|| false)
    }

    /// [`LinearSvcParams::select_c`] then a fit on all of `x` with the best
    /// C, sharing the data preparation (in Gram mode the Gram matrix is
    /// computed once). Returns the model, the best C and the CV table.
    ///
    /// # Errors
    /// As [`LinearSvcParams::select_c`].
    #[allow(clippy::type_complexity)]
    pub fn fit_with_cv<F: Float>(
        &self,
        x: ArrayView2<'_, F>,
        y: &[usize],
        grid: &[f64],
        folds: usize,
        seed: u64,
    ) -> Result<(LinearSvc<F>, f64, Vec<(f64, f64)>), SvmError> {
        let n_classes = self.check_cv(x, y, grid, folds)?;
        let xs = x.as_standard_layout();
        let sh = shared(&xs, self);
        let (best, table) = self.cv_table(&sh, y, n_classes, grid, folds, seed, &|| false)?;
        let p = self.with_cost(best);
        let rows: Vec<usize> = (0..x.nrows()).collect();
        let fit = fit_ovr(&sh, &rows, y, n_classes, &p);
        let model = LinearSvc {
            coef: fit.weights(&sh).mapv(F::from_f64_lossy),
            intercept: fit.b.mapv(F::from_f64_lossy),
            n_iter: fit.n_iter,
            converged: fit.converged,
        };
        Ok((model, best, table))
    }

    /// Validates a cross-validation request; returns the number of classes.
    pub(super) fn check_cv<F: Float>(
        &self,
        x: ArrayView2<'_, F>,
        y: &[usize],
        grid: &[f64],
        folds: usize,
    ) -> Result<usize, SvmError> {
        let n_classes = self.check_xy(x, y, None)?;
        if grid.is_empty() {
            return Err(SvmError::InvalidCrossValidation(
                "the C grid is empty".into(),
            ));
        }
        if let Some(c) = grid.iter().find(|c| !(c.is_finite() && **c > 0.0)) {
            return Err(SvmError::InvalidCrossValidation(format!(
                "every C must be a finite number > 0, got {c}"
            )));
        }
        let n = x.nrows();
        if folds < 2 || folds > n {
            return Err(SvmError::InvalidCrossValidation(format!(
                "folds must be between 2 and the number of samples ({n}), got {folds}"
            )));
        }
        Ok(n_classes)
    }

    /// The CV table and the best C (smallest among equal best scores).
    ///
    /// Each fold walks the grid in ascending C, each class starting from its
    /// solution at the previous C (a warm start, as LIBLINEAR's parameter
    /// search does: Chu, Lin et al., *Warm start for parameter selection of
    /// linear classifiers*, KDD 2015); folds one after the other, classes in
    /// parallel. `stop` is asked before each class's path and after each
    /// fold: once it says yes, the table is abandoned with [`SvmError::Stopped`].
    #[allow(clippy::too_many_arguments)]
    pub(super) fn cv_table<F: Float>(
        &self,
        sh: &Shared<'_, F>,
        y: &[usize],
        n_classes: usize,
        grid: &[f64],
        folds: usize,
        seed: u64,
        stop: &Stop<'_>,
    ) -> Result<(f64, Vec<(f64, f64)>), SvmError> {
        let fold_of = stratified_folds(y, n_classes, folds, seed);
        let mut order: Vec<usize> = (0..grid.len()).collect();
        order.sort_by(|&a, &b| grid[a].total_cmp(&grid[b]));
        let costs: Vec<f64> = order.iter().map(|&g| grid[g]).collect();
        // scores[f][i]: fold f at the i-th smallest C. Folds one after the
        // other (in Gram mode each holds its Gram block), classes in parallel.
        let mut scores: Vec<Vec<f64>> = Vec::with_capacity(folds);
        for f in 0..folds {
            scores.push(self.fold_scores(sh, y, n_classes, &costs, &fold_of, f, stop)?);
            if stop() {
                return Err(SvmError::Stopped);
            }
        }
        let mut table = vec![(0.0, 0.0); grid.len()];
        for (i, &g) in order.iter().enumerate() {
            let s: f64 = scores.iter().map(|fold| fold[i]).sum();
            table[g] = (grid[g], s / folds as f64);
        }
        let mut best = table[0];
        for &(c, s) in &table[1..] {
            if s > best.1 || (s == best.1 && c < best.0) {
                best = (c, s);
            }
        }
        Ok((best.0, table))
    }

    /// The held-out scores of fold `f` (the rows with `fold_of[i] == f`) at
    /// each of `costs` (ascending), every class walking the costs from its
    /// previous solution.
    #[allow(clippy::too_many_arguments)]
    fn fold_scores<F: Float>(
        &self,
        sh: &Shared<'_, F>,
        y: &[usize],
        n_classes: usize,
        costs: &[f64],
        fold_of: &[usize],
        f: usize,
        stop: &Stop<'_>,
    ) -> Result<Vec<f64>, SvmError> {
        let n = y.len();
        let train: Vec<usize> = (0..n).filter(|&i| fold_of[i] != f).collect();
        let test: Vec<usize> = (0..n).filter(|&i| fold_of[i] == f).collect();
        let block = sh.gram_block(&train)?;
        let local: Vec<usize> = (0..train.len()).collect();
        let (sub, rows) = match &block {
            Some(b) => (b, &local),
            None => (sh, &train),
        };
        let paths: Option<Vec<Vec<ClassFit>>> = (0..n_classes)
            .into_par_iter()
            .map(|k| {
                if stop() {
                    return None;
                }
                let positive = |r: usize| y[rows_of(&block, &train, r)] == k;
                let (ys, path) = solve_binary_path(sub, rows, positive, self, k as u64, costs);
                Some(
                    path.into_iter()
                        .map(|pt| ClassFit::new(&train, &ys, pt))
                        .collect(),
                )
            })
            .collect();
        let mut paths: Vec<_> = paths
            .ok_or(SvmError::Stopped)?
            .into_iter()
            .map(Vec::into_iter)
            .collect();
        let truth: Vec<usize> = test.iter().map(|&i| y[i]).collect();
        costs
            .iter()
            .map(|&c| {
                let sols = paths
                    .iter_mut()
                    .map(|p| p.next().expect("one point per cost"))
                    .collect();
                let fit = collect_ovr(sh, sols, &self.with_cost(c));
                let pred = fit.predict_rows(sh, &test, &train)?;
                Ok(mean_per_class_accuracy(&truth, &pred, n_classes)
                    .expect("labels validated, test folds non-empty"))
            })
            .collect()
    }
}

/// Asked by a long fit whether to give up ([`SvmError::Stopped`]): Ctrl-C
/// in the pipeline and the Python module. `&|| false` never stops.
pub type Stop<'a> = dyn Fn() -> bool + Sync + 'a;

/// The row of the whole problem that row `r` of a fold's sub-problem
/// stands for: `train[r]` when the fold has its own Gram block, `r` itself otherwise.
fn rows_of<F: Float>(block: &Option<Shared<'_, F>>, train: &[usize], r: usize) -> usize {
    if block.is_some() {
        train[r]
    } else {
        r
    }
}

/// Fold index (N) of every sample: stratified round-robin dealing of each
/// class's seeded shuffle, continuing across classes.
pub(super) fn stratified_folds(
    y: &[usize],
    n_classes: usize,
    folds: usize,
    seed: u64,
) -> Vec<usize> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut fold_of = vec![0usize; y.len()];
    let mut next = 0usize;
    for k in 0..n_classes {
        let mut idx: Vec<usize> = (0..y.len()).filter(|&i| y[i] == k).collect();
        for i in (1..idx.len()).rev() {
            let j = rng.random_range(0..=i);
            idx.swap(i, j);
        }
        for i in idx {
            fold_of[i] = next % folds;
            next += 1;
        }
    }
    fold_of
}
