//! The whole pipeline on a small real image set (three Fashion-MNIST classes
//! from the bundled demo data), with the descriptor cache, a corrupt image,
//! every encoder family, whitening and the Figure-1 sweep.

use fisherkit_pipeline::spec::parse_encoders;
use fisherkit_pipeline::{run, NoProgress, Whitening};

mod common;
use common::{demo, small_config, small_set, Log};

#[test]
fn small_real_set_end_to_end() {
    let t = small_set(&["bag", "sneaker", "trouser"], 8, 4);
    std::fs::write(t.path().join("train/bag/broken.png"), b"not a png").unwrap();
    let mut cfg = small_config(t.path());
    cfg.whitening = Whitening::Both;
    cfg.sweep_gmm_components = vec![2, 4];
    cfg.sweep_mfa_factors = vec![1, 2];
    let net = fisherkit_cnn::Backbone::from(fisherkit_cnn::SqueezeNet::builtin().unwrap());
    let log = Log::default();
    let r = run(&cfg, &net, &log).unwrap();

    assert_eq!(r.dataset.classes, vec!["bag", "sneaker", "trouser"]);
    assert_eq!((r.dataset.n_train, r.dataset.n_test), (24, 12));
    assert_eq!(r.dataset.skipped.len(), 1);
    assert!(
        r.dataset.skipped[0].0.ends_with("broken.png"),
        "{:?}",
        r.dataset.skipped
    );
    assert!(log
        .0
        .lock()
        .unwrap()
        .iter()
        .any(|l| l.contains("broken.png")));
    assert_eq!(r.dataset.pca_dims, vec![16]);
    assert_eq!(r.dataset.descriptors_per_image, vec![169.0]);

    // 7 specs, the 3 with an MFA term twice (whitened and not).
    assert_eq!(r.results.len(), 10);
    let dim = |spec: &str, w: bool| {
        r.results
            .iter()
            .find(|x| x.spec == spec && x.whitened == w)
            .unwrap()
            .dim
    };
    assert_eq!(dim("cnn-global", false), 1000);
    assert_eq!(dim("gmm-fv:mean", false), 4 * 16);
    assert_eq!(dim("gmm-fv:prior+mean+var", false), 4 + 2 * 4 * 16);
    assert_eq!(dim("mfa-fs:mean", true), 3 * 16);
    assert_eq!(dim("mfa-fs:loading", false), 3 * 16 * 2);
    assert_eq!(dim("mfa-fs:loading&cnn-global", false), 3 * 16 * 2 + 1000);
    for row in &r.results {
        // Three very different classes: every encoder is far above chance (1/3).
        assert!(row.accuracy > 0.6, "{} {}", row.spec, row.accuracy);
        assert!(row.accuracy <= 1.0 && row.c > 0.0);
        let n: usize = row.confusion.iter().flatten().sum();
        assert_eq!(n, 12);
    }
    assert_eq!(r.sweep.len(), 4);
    assert_eq!(r.sweep[0].dim, 2 * 16);
    assert_eq!(r.sweep[3].dim, 3 * 16 * 2);
    let json = serde_json::to_string(&r).unwrap();
    assert!(json.contains("\"encoder\":\"mfa-fs\"") && json.contains("\"parts\":[\"loading\"]"));

    // Second run: every encoding comes from the run folder (no CNN), same accuracies.
    let log2 = Log::default();
    let r2 = run(&cfg, &net, &log2).unwrap();
    assert!(
        log2.0
            .lock()
            .unwrap()
            .iter()
            .any(|l| l.contains("0 images through the CNN, 37 reused")),
        "{:?}",
        log2.0.lock().unwrap()
    );
    for (a, b) in r.results.iter().zip(&r2.results) {
        assert_eq!(a.accuracy, b.accuracy, "{}", a.spec);
    }
}

#[test]
fn dataset_and_option_errors_are_clear() {
    let t = small_set(&["bag", "sneaker"], 2, 1);
    let net = fisherkit_cnn::Backbone::from(fisherkit_cnn::SqueezeNet::builtin().unwrap());
    // A test class absent from training.
    std::fs::create_dir_all(t.path().join("test/coat")).unwrap();
    std::fs::copy(
        demo()
            .join("test/coat")
            .read_dir()
            .unwrap()
            .next()
            .unwrap()
            .unwrap()
            .path(),
        t.path().join("test/coat/a.png"),
    )
    .unwrap();
    let e = run(&small_config(t.path()), &net, &NoProgress)
        .unwrap_err()
        .to_string();
    assert!(e.contains("`coat`"), "{e}");
    std::fs::remove_dir_all(t.path().join("test/coat")).unwrap();
    // R not below the PCA dimension.
    let mut cfg = small_config(t.path());
    cfg.encoders = parse_encoders("mfa-fs:loading").unwrap();
    cfg.pca_dim = 2;
    cfg.mfa_factors = 2;
    let e = run(&cfg, &net, &NoProgress).unwrap_err().to_string();
    assert!(e.contains("factors R = 2"), "{e}");
    // Bad options.
    let mut cfg = small_config(t.path());
    cfg.c_grid = vec![0.0];
    assert!(run(&cfg, &net, &NoProgress)
        .unwrap_err()
        .to_string()
        .contains("SVM cost 0"));
    let mut cfg = small_config(t.path());
    cfg.cv_folds = 1;
    assert!(run(&cfg, &net, &NoProgress)
        .unwrap_err()
        .to_string()
        .contains("2 folds"));
}

/// Grey, RGBA, 16-bit and JPEG images of any size go through the whole run:
/// none is skipped, and images smaller than the patch (here 28 px) are
/// upscaled to it, so each gives the 13×13 dense descriptors of a 28-px image.
#[test]
fn grey_rgba_16_bit_and_tiny_images_are_used() {
    use image::{ImageBuffer, Luma, Rgb, Rgba};
    let t = tempfile::tempdir().unwrap();
    // Class `h`: horizontal stripes; class `v`: vertical ones.
    let stripe = |class: usize, x: u32, y: u32| {
        if (if class == 0 { y } else { x }) % 4 < 2 {
            230u8
        } else {
            20
        }
    };
    for split in ["train", "test"] {
        for (class, name) in ["h", "v"].iter().enumerate() {
            let d = t.path().join(split).join(name);
            std::fs::create_dir_all(&d).unwrap();
            let s = move |x, y| stripe(class, x, y);
            ImageBuffer::from_fn(20, 20, |x, y| Luma([s(x, y)]))
                .save(d.join("grey8.png"))
                .unwrap();
            ImageBuffer::from_fn(9, 7, |x, y| Rgba([s(x, y), s(x, y), 0, 128]))
                .save(d.join("rgba.png"))
                .unwrap();
            ImageBuffer::from_fn(30, 16, |x, y| Luma([s(x, y) as u16 * 257]))
                .save(d.join("grey16.png"))
                .unwrap();
            ImageBuffer::from_fn(12, 40, |x, y| Rgb([s(x, y) as u16 * 257, 0, 1000]))
                .save(d.join("rgb16.png"))
                .unwrap();
            ImageBuffer::from_fn(3, 3, |x, y| Rgb([s(x, y); 3]))
                .save(d.join("tiny.jpg"))
                .unwrap();
        }
    }
    let mut cfg = small_config(t.path());
    cfg.encoders = parse_encoders("cnn-global,gmm-fv:mean").unwrap();
    cfg.cache_dir = None;
    cfg.cv_folds = 2;
    let net = fisherkit_cnn::Backbone::from(fisherkit_cnn::SqueezeNet::builtin().unwrap());
    let r = run(&cfg, &net, &NoProgress).unwrap();
    assert!(r.dataset.skipped.is_empty(), "{:?}", r.dataset.skipped);
    assert_eq!((r.dataset.n_train, r.dataset.n_test), (10, 10));
    // Each image's dense pass: its smaller side enlarged to the patch, then
    // scaled by 227/28; one descriptor per cell of the score map.
    let sizes = [(20, 20), (7, 9), (16, 30), (40, 12), (3, 3)]; // (h, w) as written
    let cells: usize = sizes
        .iter()
        .map(|&(h, w)| {
            let (ih, iw) = fisherkit_cnn::descriptors::dense_input_size(h, w, 28);
            let (mh, mw) = fisherkit_cnn::SqueezeNet::score_map_size(ih, iw).unwrap();
            mh * mw
        })
        .sum();
    assert!(cells > 5 * 169, "non-square images give more cells");
    assert_eq!(r.dataset.descriptors_per_image, vec![cells as f64 / 5.0]);
    assert_eq!(r.results.len(), 2);
}

#[test]
fn efficientnet_backbone_end_to_end_with_its_own_cache_key() {
    let t = small_set(&["bag", "sneaker", "trouser"], 6, 3);
    let mut cfg = small_config(t.path());
    cfg.encoders = parse_encoders("cnn-global,gmm-fv:mean").unwrap();
    cfg.cv_folds = 2;
    let kinds = [
        fisherkit_cnn::BackboneKind::EfficientNetLite0,
        fisherkit_cnn::BackboneKind::SqueezeNet,
    ];
    for (i, kind) in kinds.into_iter().enumerate() {
        let net = fisherkit_cnn::Backbone::builtin(kind).unwrap();
        let r = run(&cfg, &net, &NoProgress).unwrap();
        assert_eq!(r.cnn.as_deref(), Some(kind.name()));
        // 28-px images at patch 28: one 224 (227) px pass, 7×7 (13×13) cells.
        let cells = if i == 0 { 49.0 } else { 169.0 };
        assert_eq!(r.dataset.descriptors_per_image, vec![cells]);
        assert_eq!(r.results.len(), 2);
        // Each network has its own run folder in the shared cache.
        let runs = std::fs::read_dir(t.path().join("cache/runs"))
            .unwrap()
            .count();
        assert_eq!(runs, i + 1, "{kind}: run folders");
    }
}

/// The control for the threshold above: the same images and settings with the
/// training labels dealt round-robin over the class folders (each folder gets
/// a third of every true class, so the labels carry no information). If the
/// pipeline leaked test labels or the 0.6 bar were easy, this would reach it;
/// it must stay near chance (1/3) while the real labels clear it.
#[test]
fn shuffled_training_labels_stay_near_chance() {
    let classes = ["bag", "sneaker", "trouser"];
    let t = small_set(&classes, 8, 4);
    let shuffled = tempfile::tempdir().unwrap();
    let mut i = 0;
    for c in classes {
        for f in common::first_files(&t.path().join("train").join(c), 8) {
            let dst = shuffled.path().join("train").join(classes[i % 3]);
            std::fs::create_dir_all(&dst).unwrap();
            std::fs::copy(
                &f,
                dst.join(format!("{c}-{}", f.file_name().unwrap().to_string_lossy())),
            )
            .unwrap();
            i += 1;
        }
    }
    let mut cfg = small_config(t.path());
    cfg.train = shuffled.path().join("train");
    cfg.cache_dir = Some(shuffled.path().join("cache"));
    let net = fisherkit_cnn::Backbone::from(fisherkit_cnn::SqueezeNet::builtin().unwrap());
    let r = run(&cfg, &net, &NoProgress).unwrap();
    assert_eq!(r.dataset.n_train, 24);
    let mean: f64 = r.results.iter().map(|x| x.accuracy).sum::<f64>() / r.results.len() as f64;
    assert!(mean < 0.5, "mean accuracy {mean} with uninformative labels");
    for row in &r.results {
        assert!(row.accuracy <= 0.6, "{} {}", row.spec, row.accuracy);
    }
}
