//! The out-of-core fits: [`ValidOutOfCoreSvmParams::fit`] and
//! [`ValidOutOfCoreSvmParams::fit_with_cv`] (C by cross-validation with
//! warm starts along the grid).

use super::blocks::State;
use super::predict::predict_rows;
use super::source::RowSource;
use super::ValidOutOfCoreSvmParams;
use crate::metrics::mean_per_class_accuracy;
use crate::svm::cv::stratified_folds;
use crate::svm::error::SvmError;
use crate::svm::model::LinearSvc;
use ndarray::Array1;

impl ValidOutOfCoreSvmParams {
    /// Checks `rows` and `y` against the source; returns nothing or the error.
    fn check_rows<S: RowSource>(
        &self,
        src: &S,
        rows: &[usize],
        y: &[usize],
        n_classes: usize,
    ) -> Result<(), SvmError> {
        if rows.len() != y.len() {
            return Err(SvmError::LabelLengthMismatch {
                n_rows: rows.len(),
                n_labels: y.len(),
            });
        }
        if let Some(&r) = rows.iter().find(|&&r| r >= src.n_rows()) {
            return Err(SvmError::Source(format!(
                "row {r} out of range: the source has {} rows",
                src.n_rows()
            )));
        }
        if src.dim() == 0 {
            return Err(SvmError::Source("the rows have width 0".into()));
        }
        if n_classes < 2 {
            return Err(SvmError::TooFewClasses(n_classes));
        }
        if let Some((index, &label)) = y.iter().enumerate().find(|(_, &l)| l >= n_classes) {
            return Err(SvmError::LabelOutOfRange {
                index,
                label,
                n_classes,
            });
        }
        let mut count = vec![0usize; n_classes];
        for &l in y {
            count[l] += 1;
        }
        if let Some(class) = count.iter().position(|&c| c == 0) {
            return Err(SvmError::MissingClass { class, n_classes });
        }
        Ok(())
    }

    /// Trains the one-vs-rest SVM on the rows `rows` of `src` with labels
    /// `y` (one per entry of `rows`, in `0..n_classes`, every class present).
    ///
    /// ```
    /// use fisherkit::svm::{OutOfCoreSvmParams, RowSource};
    /// use ndarray::array;
    /// let x = array![[0.0f32, 0.1], [0.2, 0.0], [3.0, 3.1], [3.2, 2.9]];
    /// let p = OutOfCoreSvmParams::with_c(10.0).check().unwrap();
    /// let svm = p.fit(&x.view(), &[0, 1, 2, 3], &[0, 0, 1, 1], 2).unwrap();
    /// assert_eq!(svm.predict(x.view()).unwrap(), vec![0, 0, 1, 1]);
    /// ```
    ///
    /// # Errors
    /// Rows out of range, label problems, a failing source.
    pub fn fit<S: RowSource>(
        &self,
        src: &S,
        rows: &[usize],
        y: &[usize],
        n_classes: usize,
    ) -> Result<LinearSvc<f32>, SvmError> {
        self.check_rows(src, rows, y, n_classes)?;
        let mut pb = self.problem(src, rows.to_vec(), y.to_vec(), n_classes);
        let mut st = State::new(n_classes, rows.len(), src.dim(), self.svm.seed)?;
        let (n_iter, converged) = self.solve(&mut pb, &mut st, self.svm.c)?;
        Ok(model(st, n_iter, converged))
    }

    /// Chooses C by stratified `folds`-fold cross-validation over `grid`
    /// (mean per-class accuracy on the held-out rows, averaged over folds;
    /// the folds are those of [`crate::svm::LinearSvcParams::select_c`] for the
    /// same `y` and `seed`), then trains on all `rows` with the best C (the
    /// smallest of equal best scores), walking the grid up to it with warm
    /// starts. Returns the model, the best C and `(C, score)` in grid order.
    ///
    /// # Errors
    /// As [`ValidOutOfCoreSvmParams::fit`]; an empty grid, a C ≤ 0 or
    /// non-finite, `folds` < 2 or > the number of rows.
    #[allow(clippy::too_many_arguments, clippy::type_complexity)]
    pub fn fit_with_cv<S: RowSource>(
        &self,
        src: &S,
        rows: &[usize],
        y: &[usize],
        n_classes: usize,
        grid: &[f64],
        folds: usize,
        seed: u64,
    ) -> Result<(LinearSvc<f32>, f64, Vec<(f64, f64)>), SvmError> {
        self.check_rows(src, rows, y, n_classes)?;
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
        if folds < 2 || folds > rows.len() {
            return Err(SvmError::InvalidCrossValidation(format!(
                "folds must be between 2 and the number of samples ({}), got {folds}",
                rows.len()
            )));
        }
        let mut order: Vec<usize> = (0..grid.len()).collect();
        order.sort_by(|&a, &b| grid[a].total_cmp(&grid[b]));
        let fold_of = stratified_folds(y, n_classes, folds, seed);
        let mut scores = vec![0.0f64; grid.len()];
        for f in 0..folds {
            let (tr, te): (Vec<usize>, Vec<usize>) =
                (0..rows.len()).partition(|&i| fold_of[i] != f);
            let tr_rows: Vec<usize> = tr.iter().map(|&i| rows[i]).collect();
            let tr_y: Vec<usize> = tr.iter().map(|&i| y[i]).collect();
            let te_rows: Vec<usize> = te.iter().map(|&i| rows[i]).collect();
            let te_y: Vec<usize> = te.iter().map(|&i| y[i]).collect();
            let mut pb = self.problem(src, tr_rows, tr_y, n_classes);
            let mut st = State::new(n_classes, pb.rows.len(), src.dim(), self.svm.seed)?;
            for &g in &order {
                let (it, conv) = self.solve(&mut pb, &mut st, grid[g])?;
                let m = LinearSvc {
                    coef: st.w.clone(),
                    intercept: st.b.iter().map(|&v| v as f32).collect(),
                    n_iter: it,
                    converged: conv,
                };
                let pred = predict_rows(&m, src, &te_rows, self.block_bytes)?;
                scores[g] += mean_per_class_accuracy(&te_y, &pred, n_classes)
                    .map_err(|e| SvmError::Source(e.to_string()))?
                    / folds as f64;
            }
        }
        let table: Vec<(f64, f64)> = grid.iter().copied().zip(scores).collect();
        let mut best = table[0];
        for &(c, s) in &table[1..] {
            if s > best.1 || (s == best.1 && c < best.0) {
                best = (c, s);
            }
        }
        let mut pb = self.problem(src, rows.to_vec(), y.to_vec(), n_classes);
        let mut st = State::new(n_classes, rows.len(), src.dim(), self.svm.seed)?;
        let mut last = (vec![], vec![]);
        for &g in order.iter().filter(|&&g| grid[g] <= best.0) {
            last = self.solve(&mut pb, &mut st, grid[g])?;
        }
        Ok((model(st, last.0, last.1), best.0, table))
    }
}

fn model(st: State, n_iter: Vec<usize>, converged: Vec<bool>) -> LinearSvc<f32> {
    LinearSvc {
        coef: st.w,
        intercept: Array1::from_iter(st.b.iter().map(|&v| v as f32)),
        n_iter,
        converged,
    }
}
