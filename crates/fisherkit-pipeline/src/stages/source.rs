//! Where the descriptors of a run come from: image files through the CNN,
//! or bags of descriptor files ([`Source`]).

use crate::descriptors::{compute_batch, ImageDescriptors};
use crate::PipelineError;
use fisherkit_cnn::descriptors::DescriptorParams;
use fisherkit_cnn::{Backbone, Cnn};
use fisherkit_io::descriptor_file::DescriptorReader;
use ndarray::Array2;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

/// Where the descriptors come from.
pub(crate) enum Source<'a> {
    /// Image files through the CNN.
    Images {
        net: &'a Backbone,
        paths: Vec<PathBuf>,
        params: DescriptorParams,
        with_global: bool,
        /// Images handed to the CNN so far (the sample pass's kept output
        /// is read instead for the encode pass: [`crate::kept`]).
        cnn_images: AtomicUsize,
    },
    /// Bags of descriptor files (one scale), read batch by batch.
    Bags(Box<BagFiles>),
}

/// The descriptor files of a run, opened and validated: image `i` is the
/// training file's `i`-th below `train.len()`, the test file's after. Bags
/// are read from the files when a pass asks for them, so a run holds the
/// bags of one batch, not of the files.
pub(crate) struct BagFiles {
    pub train: DescriptorReader,
    pub test: DescriptorReader,
}

impl BagFiles {
    /// The bag of image `i` (train then test).
    fn bag(&self, i: usize) -> Result<Array2<f32>, PipelineError> {
        let n = self.train.len();
        Ok(if i < n {
            self.train.bag(i)?
        } else {
            self.test.bag(i - n)?
        })
    }
}

impl Source<'_> {
    /// The CNN's name (`squeezenet1_1`, `efficientnet_lite0`, `onnx:<file>#<hash>`), `None`
    /// for descriptor files.
    pub(crate) fn cnn_name(&self) -> Option<&str> {
        match self {
            Source::Images { net, .. } => Some(net.name()),
            Source::Bags(_) => None,
        }
    }

    /// Number of classes of the CNN (the descriptors' dimension); 1000 for descriptor files
    /// (whose runs have no image-level descriptor).
    pub(crate) fn num_classes(&self) -> usize {
        match self {
            Source::Images { net, .. } => net.num_classes(),
            Source::Bags(_) => fisherkit_cnn::net::NUM_CLASSES,
        }
    }

    /// Width of a descriptor (before the PCA): the CNN's classes, or the
    /// descriptor files' width.
    pub(crate) fn descriptor_dim(&self) -> usize {
        match self {
            Source::Images { net, .. } => net.num_classes(),
            Source::Bags(files) => files.train.dim(),
        }
    }

    /// Descriptors of the images `idx`, in order (`Err`: the image is skipped, with the reason).
    pub(crate) fn compute(
        &self,
        idx: &[usize],
    ) -> Result<Vec<Result<ImageDescriptors, String>>, PipelineError> {
        match self {
            Source::Images {
                net,
                paths,
                params,
                with_global,
                cnn_images,
            } => {
                cnn_images.fetch_add(idx.len(), Ordering::Relaxed);
                let p: Vec<&Path> = idx.iter().map(|&i| paths[i].as_path()).collect();
                compute_batch(net, &p, params, *with_global)
            }
            Source::Bags(files) => idx
                .iter()
                .map(|&i| {
                    Ok(Ok(ImageDescriptors {
                        scales: vec![files.bag(i)?],
                        global: None,
                    }))
                })
                .collect(),
        }
    }

    /// Images handed to the CNN so far by this process (0 for descriptor files).
    pub(crate) fn cnn_images(&self) -> usize {
        match self {
            Source::Images { cnn_images, .. } => cnn_images.load(Ordering::Relaxed),
            Source::Bags(_) => 0,
        }
    }

    /// Images per parallel batch: enough to keep every thread busy, few
    /// enough that a batch's descriptors stay small (≈ 12 MB per photo).
    pub(crate) fn batch_len(&self) -> usize {
        4 * rayon::current_num_threads().max(1)
    }
}
