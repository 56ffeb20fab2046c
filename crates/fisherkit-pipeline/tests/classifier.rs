//! The saved classifier (`save_model`): a run writes it, and applied to the
//! run's own test split it reproduces the predictions and the accuracy the
//! run measured; on both classifier paths, with whitening, with `cnn-global`,
//! from images and from descriptor files.

use fisherkit_pipeline::predict::{evaluate_bags, evaluate_folder, Predictor};
use fisherkit_pipeline::spec::parse_encoders;
use fisherkit_pipeline::{
    run, run_descriptors, Classifier, NoProgress, SceneClassifier, Whitening,
};
use std::path::{Path, PathBuf};

mod common;
use common::{small_config, small_set};

fn net() -> fisherkit_cnn::Backbone {
    fisherkit_cnn::Backbone::from(fisherkit_cnn::SqueezeNet::builtin().unwrap())
}

/// The test images of a `small_set`, in the run's order (classes, then file names).
fn test_images(root: &Path) -> Vec<(PathBuf, usize)> {
    let set = fisherkit_pipeline::dataset::ImageSet::scan(&root.join("test")).unwrap();
    set.items
}

#[test]
fn the_saved_classifier_reproduces_the_runs_test_predictions() {
    let t = small_set(&["bag", "sneaker", "trouser"], 8, 5);
    let net = net();
    let mut rows = Vec::new();
    for classifier in [Classifier::Kernel, Classifier::Primal] {
        let mut cfg = small_config(t.path());
        cfg.descriptors.scales = vec![28, 24];
        cfg.encoders = parse_encoders("gmm-fv:var,mfa-fs:loading&cnn-global").unwrap();
        cfg.whitening = Whitening::Both;
        cfg.classifier = classifier;
        let model = t.path().join(format!("scene-{classifier:?}.safetensors"));
        cfg.save_model = Some(model.clone());
        let r = run(&cfg, &net, &NoProgress).unwrap();
        let m = r.model.as_ref().expect("a model was saved");
        // The default choice: the best cross-validated all-scale row.
        let best = r
            .results
            .iter()
            .filter(|x| x.scale.is_none())
            .map(|x| x.cv.iter().find(|c| c.0 == x.c).unwrap().1)
            .fold(f64::NEG_INFINITY, f64::max);
        assert_eq!(m.cv_accuracy, best, "{classifier:?}");
        let row = r
            .results
            .iter()
            .find(|x| x.scale.is_none() && x.spec == m.encoder && x.whitened == m.whitened)
            .unwrap();
        assert_eq!(m.test_accuracy, row.accuracy, "{classifier:?}: {m:?}");

        // Loaded and applied to the test images one by one.
        let clf = SceneClassifier::load(&model).unwrap();
        assert_eq!(clf.classes(), ["bag", "sneaker", "trouser"]);
        assert_eq!(clf.info().encoder, m.encoder);
        let p = Predictor::new(&clf, Some(&net)).unwrap();
        let images = test_images(t.path());
        let paths: Vec<&Path> = images.iter().map(|(p, _)| p.as_path()).collect();
        let got: Vec<usize> = paths
            .iter()
            .map(|path| {
                p.predict_paths(&[path], false)
                    .unwrap()
                    .remove(0)
                    .unwrap()
                    .0
                    .class
            })
            .collect();
        assert_eq!(got, m.test_predictions, "{classifier:?}");
        // In one batch: the same.
        let batch: Vec<usize> = p
            .predict_paths(&paths, true)
            .unwrap()
            .into_iter()
            .map(|o| {
                let (s, x) = o.unwrap();
                assert_eq!(x.unwrap().len(), clf.dim());
                s.class
            })
            .collect();
        assert_eq!(batch, got);
        let e = evaluate_folder(&clf, &net, &t.path().join("test"), &NoProgress).unwrap();
        assert_eq!(e.accuracy, m.test_accuracy);
        assert_eq!(e.n_test, images.len());
        // Saved again: the same bytes.
        let again = t.path().join("again.safetensors");
        clf.save(&again).unwrap();
        assert_eq!(
            std::fs::read(&again).unwrap(),
            std::fs::read(&model).unwrap()
        );
        rows.push(r.results);
    }
    // Two scales and cnn-global: the kernel path's rows (each row's kernel
    // summed from the part kernels in the run folder) are the primal path's
    // (the features themselves) to solver tolerance, at most one test image apart.
    let n_test = test_images(t.path()).len() as f64;
    assert_eq!(rows[0].len(), rows[1].len());
    for (k, p) in rows[0].iter().zip(&rows[1]) {
        assert_eq!(
            (&k.spec, &k.scale, k.whitened),
            (&p.spec, &p.scale, p.whitened)
        );
        assert!(
            (k.accuracy - p.accuracy).abs() <= 1.5 / n_test,
            "{} at {:?}: kernel {} primal {}",
            k.spec,
            k.scale,
            k.accuracy,
            p.accuracy
        );
    }
}

#[test]
fn the_model_encoder_is_the_one_asked_for_and_bad_choices_are_named() {
    let t = small_set(&["bag", "sneaker"], 6, 3);
    let net = net();
    let mut cfg = small_config(t.path());
    cfg.encoders = parse_encoders("cnn-global,gmm-fv:mean").unwrap();
    cfg.save_model = Some(t.path().join("m.safetensors"));
    cfg.model_encoder = Some(parse_encoders("gmm-fv:mean").unwrap().remove(0));
    let r = run(&cfg, &net, &NoProgress).unwrap();
    assert_eq!(r.model.unwrap().encoder, "gmm-fv:mean");

    cfg.model_encoder = Some(parse_encoders("mfa-fs").unwrap().remove(0));
    let e = run(&cfg, &net, &NoProgress).unwrap_err().to_string();
    assert!(
        e.contains("`mfa-fs:loading` is not among the encoders evaluated"),
        "{e}"
    );
    cfg.save_model = None;
    let e = run(&cfg, &net, &NoProgress).unwrap_err().to_string();
    assert!(e.contains("--save-model"), "{e}");

    // Another CNN is refused by name.
    cfg.model_encoder = None;
    cfg.save_model = Some(t.path().join("m.safetensors"));
    run(&cfg, &net, &NoProgress).unwrap();
    let clf = SceneClassifier::load(&t.path().join("m.safetensors")).unwrap();
    let effnet =
        fisherkit_cnn::Backbone::builtin(fisherkit_cnn::BackboneKind::EfficientNetLite0).unwrap();
    let e = Predictor::new(&clf, Some(&effnet))
        .err()
        .unwrap()
        .to_string();
    assert!(
        e.contains("squeezenet1_1") && e.contains("efficientnet_lite0"),
        "{e}"
    );
}

#[test]
fn a_classifier_of_descriptor_files_labels_bags() {
    use fisherkit_pipeline::descriptor_file::{bag_arrays, write_npz_arrays, NpyRef};
    use ndarray::Array2;
    let t = tempfile::tempdir().unwrap();
    // Three classes of 5-dim bags, each class's cloud along its own axis.
    let bag = |c: usize, i: usize| {
        Array2::from_shape_fn((30, 5), |(r, j)| {
            let t = (((r * 7 + i * 13) % 17) as f32 - 8.0) / 3.0;
            let noise = (((r * 31 + j * 11 + i * 5) % 13) as f32 - 6.0) / 40.0;
            if j == c {
                t + noise
            } else {
                noise
            }
        })
    };
    // more test bags than a predictor's batch: evaluation reads the file in batches
    for (split, n) in [("train", 12), ("test", 21)] {
        let bags: Vec<Array2<f32>> = (0..n).map(|i| bag(i % 3, i + n)).collect();
        let labels: Vec<i64> = (0..n).map(|i| (i % 3) as i64).collect();
        let names: Vec<String> = (0..n).map(|i| format!("img{i}")).collect();
        let views: Vec<_> = bags.iter().map(|b| b.view()).collect();
        let mut arrays = bag_arrays(&names, &views);
        arrays.push(("labels", NpyRef::Int(&labels)));
        write_npz_arrays(&t.path().join(format!("{split}.npz")), &arrays).unwrap();
    }
    let mut cfg =
        fisherkit_pipeline::RunConfig::new(t.path().join("train.npz"), t.path().join("test.npz"));
    cfg.encoders = parse_encoders("gmm-fv:mean+var,mfa-fs:mean+loading").unwrap();
    cfg.pca_dim = 4;
    cfg.gmm_components = 3;
    cfg.mfa_components = 2;
    cfg.mfa_factors = 1;
    cfg.c_grid = vec![0.1, 1.0];
    cfg.save_model = Some(t.path().join("bags.safetensors"));
    let r = run_descriptors(&cfg, &NoProgress).unwrap();
    let m = r.model.unwrap();
    let clf = SceneClassifier::load(&t.path().join("bags.safetensors")).unwrap();
    assert!(clf.info().input.cnn.is_none());
    let e = evaluate_bags(&clf, &t.path().join("test.npz"), &NoProgress).unwrap();
    assert_eq!(e.accuracy, m.test_accuracy);
    let pred: Vec<usize> = e.predictions.iter().map(|p| p.2).collect();
    assert_eq!(pred, m.test_predictions);
    // batch by batch from the file = all bags at once
    let p = Predictor::new(&clf, None).unwrap();
    assert!(p.batch_len() < 21);
    let file =
        fisherkit_pipeline::descriptor_file::DescriptorReader::open(&t.path().join("test.npz"))
            .unwrap();
    let mut streamed = Vec::new();
    p.predict_file(&file, true, |first, outcomes| {
        assert_eq!(first, streamed.len());
        streamed.extend(outcomes.into_iter().map(Result::unwrap));
        Ok::<(), ()>(())
    })
    .unwrap();
    let set = fisherkit_pipeline::descriptor_file::read_descriptor_file(&t.path().join("test.npz"))
        .unwrap();
    let whole: Vec<_> = p
        .predict_bags(&set.bags, true)
        .into_iter()
        .map(Result::unwrap)
        .collect();
    assert_eq!(streamed.len(), 21);
    for ((a, fa), (b, fb)) in streamed.iter().zip(&whole) {
        assert_eq!(a.class, b.class);
        assert_eq!(fa, fb);
    }
    // Images are refused with the reason.
    let e = Predictor::new(&clf, Some(&net()))
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("descriptor files"), "{e}");
}
