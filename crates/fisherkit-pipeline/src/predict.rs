//! Applying a saved [`SceneClassifier`]: [`Predictor`] labels images (files
//! or decoded arrays) or bags of descriptors batch by batch, in bounded
//! memory; [`evaluate_folder`] / [`evaluate_bags`] measure it on a labelled
//! test split (the numbers `fisherkit run` reported for that encoder).

use crate::classifier::{SceneClassifier, Scored};
use crate::dataset::ImageSet;
use crate::descriptor_file::DescriptorReader;
use crate::descriptors::{compute_batch, describe_batch, ImageDescriptors};
use crate::{PipelineError, Progress};
use fisherkit::metrics::{confusion_matrix, mean_per_class_accuracy};
use fisherkit_cnn::descriptors::DescriptorParams;
use fisherkit_cnn::Backbone;
use ndarray::{Array1, Array2, Array3};
use rayon::prelude::*;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// What one input gave: its scores and winning class (and its feature when
/// asked for), or why it could not be classified (an unreadable, corrupt or
/// truncated image).
pub type Outcome = Result<(Scored, Option<Array1<f32>>), String>;

/// A classifier ready to label inputs: with the CNN it was trained on for images.
pub struct Predictor<'a> {
    clf: &'a SceneClassifier,
    net: Option<&'a Backbone>,
    params: Option<DescriptorParams>,
}

impl<'a> Predictor<'a> {
    /// A predictor of images through `net` (checked against the classifier's
    /// CNN), or of descriptor bags without one.
    ///
    /// # Errors
    /// `net` is not the classifier's CNN; a classifier of images without a
    /// CNN is accepted (it can label bags of its CNN's descriptors).
    pub fn new(clf: &'a SceneClassifier, net: Option<&'a Backbone>) -> Result<Self, PipelineError> {
        if let Some(net) = net {
            clf.check_cnn(net)?;
        }
        Ok(Self {
            clf,
            net,
            params: clf.descriptor_params(),
        })
    }

    /// Images per batch: enough to keep every thread busy, few enough that
    /// a batch's descriptors stay small.
    pub fn batch_len(&self) -> usize {
        4 * rayon::current_num_threads().max(1)
    }

    fn net(&self) -> Result<(&Backbone, &DescriptorParams), PipelineError> {
        match (self.net, &self.params) {
            (Some(n), Some(p)) => Ok((n, p)),
            (None, Some(_)) => Err(PipelineError::Config(
                "labelling images needs the classifier's CNN".into(),
            )),
            (_, None) => Err(PipelineError::Config(
                "this classifier was trained on descriptor files, not images: give it descriptor files"
                    .into(),
            )),
        }
    }

    /// Labels one batch of image files (one outcome per path, in order).
    ///
    /// # Errors
    /// A failure of the network itself; a bad image is an `Err` outcome.
    pub fn predict_paths(
        &self,
        paths: &[&Path],
        features: bool,
    ) -> Result<Vec<Outcome>, PipelineError> {
        let (net, params) = self.net()?;
        let descs = compute_batch(net, paths, params, self.clf.needs_global())?;
        Ok(self.finish(descs, features))
    }

    /// Labels one batch of decoded images ((H, W, 3) RGB, 0–255, or the
    /// reason an image could not be read), named by `names` in messages.
    ///
    /// # Errors
    /// As [`Self::predict_paths`].
    pub fn predict_arrays(
        &self,
        images: Vec<Result<Array3<f32>, String>>,
        names: &[String],
        features: bool,
    ) -> Result<Vec<Outcome>, PipelineError> {
        let (net, params) = self.net()?;
        let descs = describe_batch(net, images, names, params, self.clf.needs_global())?;
        Ok(self.finish(descs, features))
    }

    /// Labels bags of descriptors (one (n_i, D) array per image, one scale;
    /// a classifier of descriptor files).
    pub fn predict_bags(&self, bags: &[Array2<f32>], features: bool) -> Vec<Outcome> {
        let descs = bags
            .iter()
            .map(|b| {
                Ok(ImageDescriptors {
                    scales: vec![b.clone()],
                    global: None,
                })
            })
            .collect();
        self.finish(descs, features)
    }

    /// Labels every bag of the descriptor file `file` in batches of
    /// [`Self::batch_len`] bags read from it (one batch held: a file of any
    /// size in bounded memory), calling `each(first, outcomes)` with the
    /// index of a batch's first bag and one outcome per bag, in order. A bag
    /// that cannot be read (a corrupt entry, a NaN) is an `Err` outcome
    /// naming the file and the image, as an unreadable image is.
    ///
    /// # Errors
    /// The first error of `each`.
    pub fn predict_file<E>(
        &self,
        file: &DescriptorReader,
        features: bool,
        mut each: impl FnMut(usize, Vec<Outcome>) -> Result<(), E>,
    ) -> Result<(), E> {
        let n = file.len();
        let mut first = 0;
        while first < n {
            let end = (first + self.batch_len()).min(n);
            let descs = (first..end)
                .map(|i| {
                    let bag = file.bag(i).map_err(|e| e.to_string())?;
                    Ok(ImageDescriptors {
                        scales: vec![bag],
                        global: None,
                    })
                })
                .collect();
            each(first, self.finish(descs, features))?;
            first = end;
        }
        Ok(())
    }

    /// The outcomes of a batch: each image's feature (in parallel), then
    /// the scores of the batch's features at once ([`SceneClassifier::score_batch`]:
    /// the SVM's weights read once per batch, each score the bits of the
    /// image alone).
    fn finish(&self, descs: Vec<Result<ImageDescriptors, String>>, features: bool) -> Vec<Outcome> {
        let feats: Vec<Result<Array1<f32>, String>> = descs
            .into_par_iter()
            .map(|d| {
                let raw = self.clf.raw_encodings(&d?).map_err(|e| e.to_string())?;
                self.clf.features(&raw).map_err(|e| e.to_string())
            })
            .collect();
        let ok: Vec<_> = feats.iter().flatten().map(|x| x.view()).collect();
        let mut scored = match self.clf.score_batch(&ok) {
            Ok(s) => s.into_iter(),
            Err(e) => return feats.iter().map(|_| Err(e.to_string())).collect(),
        };
        feats
            .into_iter()
            .map(|x| {
                let x = x?;
                let s = scored.next().expect("one score per feature");
                Ok((s, features.then_some(x)))
            })
            .collect()
    }
}

/// What `fisherkit evaluate` reports: the classifier's accuracy on a
/// labelled split.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Evaluation {
    /// The classifier's encoder.
    pub encoder: String,
    /// The class names, in the order of the confusion matrix.
    pub classes: Vec<String>,
    /// Mean per-class accuracy, as a fraction.
    pub accuracy: f64,
    /// Plain accuracy, as a fraction.
    pub overall_accuracy: f64,
    /// Accuracy of each class (recall).
    pub per_class_accuracy: Vec<f64>,
    /// Rows: true class; columns: predicted class.
    pub confusion: Vec<Vec<usize>>,
    /// Images evaluated.
    pub n_test: usize,
    /// Inputs that could not be classified, with the reason (not counted).
    pub skipped: Vec<(String, String)>,
    /// Every evaluated input: name, true class index, predicted class index.
    pub predictions: Vec<(String, usize, usize)>,
}

/// Mean per-class accuracy, plain accuracy, per-class accuracy, confusion matrix.
pub type Scores = (f64, f64, Vec<f64>, Vec<Vec<usize>>);

/// Mean per-class and plain accuracy, per-class accuracy and the confusion
/// matrix of predictions `pred` against `truth` over `n_classes` classes.
///
/// # Errors
/// Empty or mismatched inputs, a label out of range.
pub fn scores(truth: &[usize], pred: &[usize], n_classes: usize) -> Result<Scores, PipelineError> {
    let err = PipelineError::stage("metrics");
    let conf = confusion_matrix(truth, pred, n_classes).map_err(&err)?;
    let accuracy = mean_per_class_accuracy(truth, pred, n_classes).map_err(&err)?;
    let per_class = conf
        .rows()
        .into_iter()
        .enumerate()
        .map(|(i, r)| {
            let n: usize = r.sum();
            if n == 0 {
                0.0
            } else {
                r[i] as f64 / n as f64
            }
        })
        .collect();
    let overall = (0..n_classes).map(|i| conf[[i, i]]).sum::<usize>() as f64 / truth.len() as f64;
    let conf = conf.rows().into_iter().map(|r| r.to_vec()).collect();
    Ok((accuracy, overall, per_class, conf))
}

fn evaluation(
    clf: &SceneClassifier,
    done: Vec<(String, usize, Outcome)>,
) -> Result<Evaluation, PipelineError> {
    let mut skipped = Vec::new();
    let mut predictions = Vec::new();
    for (name, y, o) in done {
        match o {
            Ok((s, _)) => predictions.push((name, y, s.class)),
            Err(e) => skipped.push((name, e)),
        }
    }
    if predictions.is_empty() {
        return Err(PipelineError::Dataset(
            "no test input could be classified".into(),
        ));
    }
    let truth: Vec<usize> = predictions.iter().map(|p| p.1).collect();
    let pred: Vec<usize> = predictions.iter().map(|p| p.2).collect();
    let (accuracy, overall_accuracy, per_class_accuracy, confusion) =
        scores(&truth, &pred, clf.classes().len())?;
    Ok(Evaluation {
        encoder: clf.spec().name(),
        classes: clf.classes().to_vec(),
        accuracy,
        overall_accuracy,
        per_class_accuracy,
        confusion,
        n_test: predictions.len(),
        skipped,
        predictions,
    })
}

/// The labels of a test folder `DIR/<class>/*` in the classifier's classes.
fn labelled_images(
    clf: &SceneClassifier,
    dir: &Path,
) -> Result<Vec<(PathBuf, usize)>, PipelineError> {
    let set = ImageSet::scan(dir)?;
    let train = ImageSet {
        classes: clf.classes().to_vec(),
        items: vec![],
    };
    Ok(set.align_to(&train)?.items)
}

/// Evaluates the classifier on the labelled image folder `dir`
/// (`DIR/<class>/*.png|jpg`, classes among the classifier's) through `net`.
///
/// # Errors
/// An unreadable folder, a class the classifier does not know, another CNN,
/// no readable image.
pub fn evaluate_folder(
    clf: &SceneClassifier,
    net: &Backbone,
    dir: &Path,
    progress: &dyn Progress,
) -> Result<Evaluation, PipelineError> {
    let p = Predictor::new(clf, Some(net))?;
    let items = labelled_images(clf, dir)?;
    progress.start("evaluate", items.len() as u64);
    let mut done = Vec::with_capacity(items.len());
    for batch in items.chunks(p.batch_len()) {
        let paths: Vec<&Path> = batch.iter().map(|(p, _)| p.as_path()).collect();
        for ((path, y), o) in batch.iter().zip(p.predict_paths(&paths, false)?) {
            done.push((path.display().to_string(), *y, o));
        }
        progress.inc(batch.len() as u64);
    }
    let e = evaluation(clf, done)?;
    progress.finish(&format!("{:.2} %", 100.0 * e.accuracy));
    Ok(e)
}

/// Evaluates a classifier of descriptor files on the labelled descriptor
/// file `path` (see [`crate::descriptor_file`]), read batch by batch (a bag
/// that cannot be read is skipped, as an unreadable image is).
///
/// # Errors
/// An unreadable or malformed file, a class the classifier does not know,
/// no bag that could be classified.
pub fn evaluate_bags(
    clf: &SceneClassifier,
    path: &Path,
    progress: &dyn Progress,
) -> Result<Evaluation, PipelineError> {
    let p = Predictor::new(clf, None)?;
    let file = DescriptorReader::open(path)?;
    let labels = file
        .labels()
        .iter()
        .map(|l| crate::dataset::train_label(l, clf.classes()))
        .collect::<Result<Vec<_>, _>>()?;
    progress.start("evaluate", file.len() as u64);
    let mut done = Vec::with_capacity(file.len());
    p.predict_file(&file, false, |first, outcomes| {
        progress.inc(outcomes.len() as u64);
        for (i, o) in (first..).zip(outcomes) {
            done.push((file.names()[i].clone(), labels[i], o));
        }
        Ok::<(), PipelineError>(())
    })?;
    let e = evaluation(clf, done)?;
    progress.finish(&format!("{:.2} %", 100.0 * e.accuracy));
    Ok(e)
}
