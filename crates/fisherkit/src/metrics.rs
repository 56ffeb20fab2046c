//! Classification metrics: confusion matrix, accuracy, mean per-class accuracy.
//!
//! Labels are class indices `0..n_classes`. The scene pipeline reports the
//! mean per-class accuracy (the mean over classes of the per-class recall),
//! which, unlike the plain accuracy, does not favour large classes.

use ndarray::Array2;

/// Errors of the [`crate::metrics`] module.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MetricsError {
    /// `y_true` and `y_pred` differ in length.
    #[error("y_true has {y_true} labels but y_pred has {y_pred}")]
    LengthMismatch { y_true: usize, y_pred: usize },
    /// No labels at all.
    #[error("no labels: y_true and y_pred are empty")]
    Empty,
    /// `n_classes` is 0.
    #[error("n_classes must be at least 1")]
    NoClasses,
    /// A label ≥ `n_classes`.
    #[error(
        "{which}[{index}] = {label} is out of range: labels must be < n_classes = {n_classes}"
    )]
    LabelOutOfRange {
        which: &'static str,
        index: usize,
        label: usize,
        n_classes: usize,
    },
}

fn check(y_true: &[usize], y_pred: &[usize], n_classes: usize) -> Result<(), MetricsError> {
    if y_true.len() != y_pred.len() {
        return Err(MetricsError::LengthMismatch {
            y_true: y_true.len(),
            y_pred: y_pred.len(),
        });
    }
    if y_true.is_empty() {
        return Err(MetricsError::Empty);
    }
    if n_classes == 0 {
        return Err(MetricsError::NoClasses);
    }
    for (which, y) in [("y_true", y_true), ("y_pred", y_pred)] {
        if let Some((index, &label)) = y.iter().enumerate().find(|(_, &l)| l >= n_classes) {
            return Err(MetricsError::LabelOutOfRange {
                which,
                index,
                label,
                n_classes,
            });
        }
    }
    Ok(())
}

/// Confusion matrix $M$ of shape (n_classes, n_classes): $M_{ij}$ is the number
/// of samples of true class $i$ predicted as class $j$ (rows: truth, columns:
/// prediction, as scikit-learn's `confusion_matrix`).
///
/// `y_true`, `y_pred`: (N) labels in `0..n_classes`.
pub fn confusion_matrix(
    y_true: &[usize],
    y_pred: &[usize],
    n_classes: usize,
) -> Result<Array2<usize>, MetricsError> {
    check(y_true, y_pred, n_classes)?;
    let mut m = Array2::<usize>::zeros((n_classes, n_classes));
    for (&t, &p) in y_true.iter().zip(y_pred) {
        m[[t, p]] += 1;
    }
    Ok(m)
}

/// Accuracy $\frac1N \sum_i [\hat y_i = y_i]$. `y_true`, `y_pred`: (N) labels in `0..n_classes`.
pub fn accuracy(y_true: &[usize], y_pred: &[usize], n_classes: usize) -> Result<f64, MetricsError> {
    check(y_true, y_pred, n_classes)?;
    let hits = y_true.iter().zip(y_pred).filter(|(t, p)| t == p).count();
    Ok(hits as f64 / y_true.len() as f64)
}

/// Mean per-class accuracy $\frac{1}{|P|}\sum_{c \in P} M_{cc} / \sum_j M_{cj}$,
/// the mean of the per-class recalls over the set $P$ of classes present in
/// `y_true` (absent classes are skipped, not counted as 0 — scikit-learn's
/// `balanced_accuracy_score`).
///
/// `y_true`, `y_pred`: (N) labels in `0..n_classes`.
pub fn mean_per_class_accuracy(
    y_true: &[usize],
    y_pred: &[usize],
    n_classes: usize,
) -> Result<f64, MetricsError> {
    let m = confusion_matrix(y_true, y_pred, n_classes)?;
    let mut sum = 0.0;
    let mut present = 0usize;
    for (c, row) in m.outer_iter().enumerate() {
        let total: usize = row.sum();
        if total > 0 {
            sum += row[c] as f64 / total as f64;
            present += 1;
        }
    }
    // y_true is non-empty, so at least one class is present.
    Ok(sum / present as f64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use ndarray::array;

    #[test]
    fn metrics_by_hand() {
        let t = [0, 0, 0, 0, 1, 1, 2];
        let p = [0, 0, 0, 1, 1, 0, 2];
        assert_eq!(
            confusion_matrix(&t, &p, 4).unwrap(),
            array![[3, 1, 0, 0], [1, 1, 0, 0], [0, 0, 1, 0], [0, 0, 0, 0]]
        );
        assert!((accuracy(&t, &p, 4).unwrap() - 5.0 / 7.0).abs() < 1e-15);
        // class 3 absent: mean of 3/4, 1/2, 1.
        let want = (0.75 + 0.5 + 1.0) / 3.0;
        assert!((mean_per_class_accuracy(&t, &p, 4).unwrap() - want).abs() < 1e-15);
    }

    #[test]
    fn metrics_errors() {
        assert_eq!(
            accuracy(&[0, 1], &[0], 2),
            Err(MetricsError::LengthMismatch {
                y_true: 2,
                y_pred: 1
            })
        );
        assert_eq!(accuracy(&[], &[], 2), Err(MetricsError::Empty));
        assert_eq!(accuracy(&[0], &[0], 0), Err(MetricsError::NoClasses));
        let e = mean_per_class_accuracy(&[0, 1], &[0, 5], 2).unwrap_err();
        assert_eq!(
            e,
            MetricsError::LabelOutOfRange {
                which: "y_pred",
                index: 1,
                label: 5,
                n_classes: 2
            }
        );
        assert!(e.to_string().contains("y_pred[1] = 5"));
    }
}
