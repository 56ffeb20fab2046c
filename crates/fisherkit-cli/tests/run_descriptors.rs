//! `fisherkit run` on descriptor files (`--train-descriptors`/`--test-descriptors`),
//! `--save-descriptors`, and the bad inputs of image runs: each error path exits
//! with one `error:` line naming the file, array, row or class, and no panic.

use fisherkit_pipeline::descriptor_file::{
    bag_arrays, read_descriptor_file, write_npz_arrays, NpyRef,
};
use ndarray::Array2;
use std::path::{Path, PathBuf};

#[path = "../../fisherkit-pipeline/tests/common/mod.rs"]
mod images;
use images::{first_files, small_set};
mod common;
use common::fk;

/// Bag `i` of a set: (n, d) values that depend on the image and its class
/// `i % 2`, so two classes are easy to tell apart.
fn bag(i: usize, n: usize, d: usize) -> Array2<f32> {
    let class = (i % 2) as f32;
    Array2::from_shape_fn((n, d), |(r, c)| {
        let wiggle = ((i * 31 + r * 7 + c * 3) % 11) as f32 / 11.0;
        if c == r % d {
            4.0 * class + wiggle
        } else {
            wiggle - 2.0 * class * (c % 2) as f32
        }
    })
}

/// Writes a one-array-per-image descriptor file with `n` images of 8 rows and
/// `d` columns and string labels `a`/`b`; `edit` may change the arrays first.
fn write_set(
    path: &Path,
    n: usize,
    d: usize,
    edit: impl FnOnce(&mut Vec<Array2<f32>>, &mut Vec<String>),
) {
    let mut bags: Vec<Array2<f32>> = (0..n).map(|i| bag(i, 8, d)).collect();
    let mut labels: Vec<String> = (0..n).map(|i| ["a", "b"][i % 2].to_string()).collect();
    edit(&mut bags, &mut labels);
    let names: Vec<String> = (0..bags.len()).map(|i| format!("img{i}")).collect();
    let views: Vec<_> = bags.iter().map(|b| b.view()).collect();
    let mut arrays = bag_arrays(&names, &views);
    arrays.push(("labels", NpyRef::Str(&labels)));
    write_npz_arrays(path, &arrays).unwrap();
}

/// Small models, so a run takes a fraction of a second after the descriptors.
const SMALL: [&str; 12] = [
    "--pca-dim",
    "4",
    "--gmm-components",
    "2",
    "--mfa-components",
    "2",
    "--mfa-factors",
    "1",
    "--c-grid",
    "0.1,1",
    "--cv-folds",
    "2",
];

/// The test encoders, unless `extra` names its own.
fn encoders(extra: &[&str]) -> Vec<&'static str> {
    if extra.contains(&"--encoders") {
        vec![]
    } else {
        vec!["--encoders", "gmm-fv:mean+var,mfa-fs:loading"]
    }
}

fn run_files(train: &Path, test: &Path, extra: &[&str]) -> assert_cmd::assert::Assert {
    fk().arg("--quiet")
        .arg("run")
        .arg("--train-descriptors")
        .arg(train)
        .arg("--test-descriptors")
        .arg(test)
        .args(SMALL)
        .args(encoders(extra))
        .args(extra)
        .assert()
}

/// The stderr of a failed run: exactly one `error:` line, no panic.
fn one_error_line(a: assert_cmd::assert::Assert, code: i32) -> String {
    common::assert_error(a.get_output(), code, &[], &[])
}

fn pair(t: &Path) -> (PathBuf, PathBuf) {
    let (tr, te) = (t.join("train.npz"), t.join("test.npz"));
    write_set(&tr, 12, 5, |_, _| {});
    write_set(&te, 6, 5, |_, _| {});
    (tr, te)
}

#[test]
fn descriptor_files_run_and_report() {
    let t = tempfile::tempdir().unwrap();
    let (tr, te) = pair(t.path());
    let report = t.path().join("r.json");
    let out = run_files(&tr, &te, &["--report", report.to_str().unwrap()])
        .success()
        .get_output()
        .stdout
        .clone();
    let out = String::from_utf8(out).unwrap();
    assert!(
        out.contains("2 classes, 12 training and 6 test images"),
        "{out}"
    );
    assert!(
        out.contains("gmm-fv:mean+var") && out.contains("mfa-fs:loading"),
        "{out}"
    );
    let json: serde_json::Value = serde_json::from_slice(&std::fs::read(&report).unwrap()).unwrap();
    assert_eq!(json["dataset"]["classes"], serde_json::json!(["a", "b"]));
    assert_eq!(json["dataset"]["train"], tr.display().to_string());
    for row in json["results"].as_array().unwrap() {
        assert_eq!(row["accuracy"], 1.0, "{row}");
    }
}

#[test]
fn bad_descriptor_files_name_the_problem() {
    let t = tempfile::tempdir().unwrap();
    let (tr, te) = pair(t.path());
    let bad = t.path().join("bad.npz");
    edited_sets_name_the_problem(&bad, &te);
    bad_label_arrays_name_the_problem(&bad, &te);
    bad_stacked_layouts_name_the_problem(&bad, &te);
    unreadable_files_are_named(t.path(), &bad, &te);
    train_and_test_that_disagree_are_named(t.path(), &tr, &te);
}

/// Runs on `bad` (with the test file `te`) fail with one error line naming
/// `bad` and holding each of `want`.
fn bad_file_fails(bad: &Path, te: &Path, want: &[&str]) {
    let err = one_error_line(run_files(bad, te, &[]), 1);
    assert!(err.contains("bad.npz"), "{err}");
    for w in want {
        assert!(err.contains(w), "want `{w}` in: {err}");
    }
}

/// A training set of 12 images with one thing wrong: a label missing, an
/// image without descriptors, one of another width, a NaN, an empty label.
fn edited_sets_name_the_problem(bad: &Path, te: &Path) {
    type Edit = Box<dyn Fn(&mut Vec<Array2<f32>>, &mut Vec<String>)>;
    let cases: Vec<(Edit, &[&str])> = vec![
        (
            Box::new(|_, l| {
                l.pop();
            }),
            &["`labels` has 11 entries", "12 images"],
        ),
        (
            Box::new(|b, _| b[3] = Array2::zeros((0, 5))),
            &["image `img3`", "no descriptor"],
        ),
        (
            Box::new(|b, _| b[2] = Array2::zeros((4, 6))),
            &["image `img2`", "dimension 6", "`img0` has 5"],
        ),
        (
            Box::new(|b, _| b[5][[3, 1]] = f32::NAN),
            &["image `img5`", "row 3, column 1", "NaN"],
        ),
        (
            Box::new(|_, l| l[4] = String::new()),
            &["`labels`[4] is an empty class name"],
        ),
    ];
    for (edit, want) in cases {
        write_set(bad, 12, 5, edit);
        bad_file_fails(bad, te, want);
    }
}

/// No labels at all; labels of the wrong type; a label array where a bag
/// should be.
fn bad_label_arrays_name_the_problem(bad: &Path, te: &Path) {
    let x = bag(0, 3, 5);
    write_npz_arrays(bad, &[("arr_0", NpyRef::Float(x.view()))]).unwrap();
    let err = one_error_line(run_files(bad, te, &[]), 1);
    assert!(err.contains("no `labels` array"), "{err}");
    let labels_f = Array2::<f32>::zeros((1, 1));
    write_npz_arrays(
        bad,
        &[
            ("arr_0", NpyRef::Float(x.view())),
            ("labels", NpyRef::Float(labels_f.view())),
        ],
    )
    .unwrap();
    let err = one_error_line(run_files(bad, te, &[]), 1);
    assert!(err.contains("integers or strings"), "{err}");
    let ints = [0i64, 1];
    let strs = vec!["a".to_string()];
    write_npz_arrays(
        bad,
        &[
            ("arr_0", NpyRef::Int(&ints)),
            ("labels", NpyRef::Str(&strs)),
        ],
    )
    .unwrap();
    let err = one_error_line(run_files(bad, te, &[]), 1);
    assert!(
        err.contains("array `arr_0` is not float32/float64"),
        "{err}"
    );
}

/// Stacked layout: an image number out of range, an image without rows.
fn bad_stacked_layouts_name_the_problem(bad: &Path, te: &Path) {
    let xs = bag(0, 4, 5);
    let two = vec!["a".to_string(), "b".to_string()];
    for (index, want) in [
        (
            [0i64, 1, 2, 0],
            "`image_index`[2] = 2 is not an image number in 0..2",
        ),
        ([0i64, 0, 0, 0], "image `image 1` has no descriptor"),
    ] {
        write_npz_arrays(
            bad,
            &[
                ("descriptors", NpyRef::Float(xs.view())),
                ("image_index", NpyRef::Int(&index)),
                ("labels", NpyRef::Str(&two)),
            ],
        )
        .unwrap();
        let err = one_error_line(run_files(bad, te, &[]), 1);
        assert!(err.contains(want), "want `{want}` in: {err}");
    }
}

/// Not an archive; a missing file (in the folder `dir`).
fn unreadable_files_are_named(dir: &Path, bad: &Path, te: &Path) {
    std::fs::write(bad, b"hello").unwrap();
    let err = one_error_line(run_files(bad, te, &[]), 1);
    assert!(err.contains("not a valid .npz"), "{err}");
    let err = one_error_line(run_files(&dir.join("nope.npz"), te, &[]), 1);
    assert!(err.contains("nope.npz"), "{err}");
}

/// Train and test disagree: dimension, classes; a training set of one class.
fn train_and_test_that_disagree_are_named(dir: &Path, tr: &Path, te: &Path) {
    let te6 = dir.join("te6.npz");
    write_set(&te6, 4, 6, |_, _| {});
    let err = one_error_line(run_files(tr, &te6, &[]), 1);
    assert!(
        err.contains("te6.npz has descriptors of dimension 6"),
        "{err}"
    );
    let tez = dir.join("tez.npz");
    write_set(&tez, 4, 5, |_, l| l[1] = "zebra".into());
    let err = one_error_line(run_files(tr, &tez, &[]), 1);
    assert!(err.contains("test class `zebra` does not exist"), "{err}");
    let one = dir.join("one.npz");
    write_set(&one, 4, 5, |_, l| {
        l.iter_mut().for_each(|s| *s = "a".into())
    });
    let err = one_error_line(run_files(&one, te, &[]), 1);
    assert!(
        err.contains("1 class; classification needs at least 2"),
        "{err}"
    );
}

#[test]
fn descriptor_runs_reject_image_options_and_cnn_global() {
    let t = tempfile::tempdir().unwrap();
    let (tr, te) = pair(t.path());
    let err = one_error_line(
        run_files(
            &tr,
            &te,
            &["--encoders", "gmm-fv:mean,mfa-fs:loading&cnn-global"],
        ),
        1,
    );
    assert!(
        err.contains("cnn-global needs the CNN's image-level scores"),
        "{err}"
    );
    for extra in [
        &["--scales", "28"][..],
        &["--patch-mode", "exact"],
        &["--save-descriptors", "x"],
        &["--train", "dir"],
    ] {
        let err = one_error_line(run_files(&tr, &te, extra), 2);
        assert!(
            err.contains("cannot be used with") || err.contains("not to descriptor files"),
            "{extra:?}: {err}"
        );
    }
    let a = fk().args(["run", "--train-descriptors"]).arg(&tr).assert();
    let err = one_error_line(a, 2);
    assert!(err.contains("--test-descriptors"), "{err}");
    let err = one_error_line(fk().args(["run", "--encoders", "gmm-fv"]).assert(), 2);
    assert!(err.contains("--train"), "{err}");
}

fn run_images(t: &Path, extra: &[&str]) -> assert_cmd::assert::Assert {
    fk().arg("run")
        .arg("--train")
        .arg(t.join("train"))
        .arg("--test")
        .arg(t.join("test"))
        .args(["--scales", "28", "--no-cache"])
        .args(SMALL)
        .args(encoders(extra))
        .args(extra)
        .assert()
}

#[test]
fn image_runs_skip_corrupt_images_and_save_descriptors() {
    let t = small_set(&["bag", "trouser"], 4, 4);
    std::fs::write(
        t.path().join("train/bag/zz-corrupt.png"),
        b"\x89PNG\r\n\x1a\n truncated",
    )
    .unwrap();
    let feats = t.path().join("feats");
    let a = run_images(t.path(), &["--save-descriptors", feats.to_str().unwrap()]).success();
    let out = a.get_output();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("zz-corrupt.png"),
        "the warning names the file: {stderr}"
    );
    assert!(stdout.contains("(1 unreadable skipped)"), "{stdout}");
    let saved = read_descriptor_file(&feats.join("train.npz")).unwrap();
    assert_eq!(saved.bags.len(), 8);
    assert_eq!(saved.classes(), vec!["bag", "trouser"]);
    let test = read_descriptor_file(&feats.join("test.npz")).unwrap();
    assert_eq!(test.bags.len(), 8);
    // The default CNN, EfficientNet-Lite0: a 28-px image at scale 28 is one
    // 224-px input, 7×7 cells.
    assert_eq!(test.bags[0].dim(), (49, 1000));
}

/// Overwrites every image of the class folders `dirs` (under `root`) with `bytes`.
fn spoil(root: &Path, dirs: &[&str], bytes: &[u8]) {
    for d in dirs {
        for f in first_files(&root.join(d), usize::MAX) {
            std::fs::write(f, bytes).unwrap();
        }
    }
}

#[test]
fn image_runs_with_a_class_left_without_readable_images_fail() {
    // Every training image of `trouser` is unreadable: the class is left empty.
    let t = small_set(&["bag", "trouser"], 2, 2);
    spoil(t.path(), &["train/trouser"], b"not an image");
    let err = one_error_line(run_images(t.path(), &["--quiet"]), 1);
    assert!(
        err.contains("training class `trouser` has no readable image"),
        "{err}"
    );
    // Every test image unreadable.
    let t = small_set(&["bag", "trouser"], 2, 2);
    spoil(t.path(), &["test/bag", "test/trouser"], b"");
    let err = one_error_line(run_images(t.path(), &["--quiet"]), 1);
    assert!(err.contains("test has no readable image"), "{err}");
    // An empty folder.
    let empty = tempfile::tempdir().unwrap();
    let err = one_error_line(
        fk().args(["--quiet", "run", "--train"])
            .arg(empty.path())
            .arg("--test")
            .arg(t.path().join("test"))
            .assert(),
        1,
    );
    assert!(err.contains("no class sub-folders"), "{err}");
    // A test class absent from training.
    let t = small_set(&["bag", "trouser"], 2, 2);
    let coat = t.path().join("test/coat");
    std::fs::create_dir_all(&coat).unwrap();
    let one = &first_files(&t.path().join("test/bag"), 1)[0];
    std::fs::copy(one, coat.join("x.png")).unwrap();
    let err = one_error_line(run_images(t.path(), &["--quiet"]), 1);
    assert!(err.contains("test class `coat` does not exist"), "{err}");
}

/// An exact-mode image run with `--scales 14` and `extra`, saving descriptors to `feats`.
fn run_exact(t: &Path, feats: &Path, extra: &[&str]) -> assert_cmd::assert::Assert {
    fk().args(["--quiet", "run", "--train"])
        .arg(t.join("train"))
        .arg("--test")
        .arg(t.join("test"))
        .args(["--scales", "14", "--patch-mode", "exact", "--no-cache"])
        .arg("--save-descriptors")
        .arg(feats)
        .args(SMALL)
        .args(encoders(extra))
        .args(extra)
        .assert()
}

#[test]
fn exact_mode_stride_sets_the_patch_grid() {
    let t = small_set(&["bag", "trouser"], 2, 2);
    // 14-px patches on 28-px images: stride ½ → a 7-px step, 3×3 patches;
    // stride ¼ → round(3.5) = 4 px, 4×4 patches (centred, equal margins).
    for (stride, n) in [(None, 9), (Some("0.25"), 16), (Some("1"), 4)] {
        let feats = t.path().join(format!("feats-{stride:?}"));
        let extra: Vec<&str> = stride.map(|s| vec!["--stride", s]).unwrap_or_default();
        run_exact(t.path(), &feats, &extra).success();
        let saved = read_descriptor_file(&feats.join("train.npz")).unwrap();
        assert_eq!(saved.bags[0].dim(), (n, 1000), "stride {stride:?}");
    }
    let feats = t.path().join("bad");
    for bad in ["0", "1.5", "nan"] {
        let err = one_error_line(run_exact(t.path(), &feats, &["--stride", bad]), 2);
        assert!(
            err.contains("stride")
                && (err.contains("(0, 1]") || err.contains("not a finite number")),
            "{bad}: {err}"
        );
    }
    assert!(!feats.exists(), "a refused run writes nothing");
    // Dense mode has no stride of its own.
    let err = one_error_line(run_images(t.path(), &["--quiet", "--stride", "0.25"]), 2);
    assert!(
        err.contains("--stride) applies to --patch-mode exact only"),
        "{err}"
    );
}

#[test]
fn output_dir_holds_models_that_reproduce_the_run() {
    let t = tempfile::tempdir().unwrap();
    let (tr, te) = pair(t.path());
    let out = t.path().join("out");
    run_files(
        &tr,
        &te,
        &[
            "--output-dir",
            out.to_str().unwrap(),
            "--save-encodings",
            "--whitening",
            "both",
            // exact encodings, compared to 1e-6 below (q8, the default, rounds them)
            "--store",
            "f32",
        ],
    )
    .success();
    assert_output_dir_files(&out);
    let test = read_descriptor_file(&te).unwrap();
    let pca = saved_pca(&out);
    let saved = saved_gmm_reencodes_the_test_bags(&out, &pca, &test.bags);
    saved_whitened_mfa_reencodes_the_test_bags(&out, &pca, &test.bags);
    saved_svm_gives_the_listed_labels(&out, &saved);

    // --save-encodings needs --output-dir.
    let err = one_error_line(run_files(&tr, &te, &["--save-encodings"]), 2);
    assert!(err.contains("--output-dir"), "{err}");
}

/// The output folder of a run with `--save-encodings --whitening both`
/// holds the models, the image lists, and per encoder an SVM and the
/// train and test encodings.
fn assert_output_dir_files(out: &Path) {
    let mut files: Vec<String> = std::fs::read_dir(out)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    files.sort();
    let mut want: Vec<String> = [
        "gmm-K2-file.safetensors",
        "images.test.txt",
        "images.train.txt",
        "mfa-K2-R1-file.safetensors",
        "mfa-K2-R1-file-whitened-loading.safetensors",
        "pca-file.safetensors",
    ]
    .map(String::from)
    .to_vec();
    for enc in [
        "gmm-fv_mean_var",
        "mfa-fs_loading",
        "mfa-fs_loading-whitened",
    ] {
        for f in ["svm-{}.safetensors", "{}.train.npy", "{}.test.npy"] {
            want.push(f.replace("{}", enc));
        }
    }
    want.sort();
    assert_eq!(files, want);
}

/// The PCA saved in `out`.
fn saved_pca(out: &Path) -> fisherkit::pca::Pca<f32> {
    use fisherkit_io::{ModelFile, PcaModel};
    let Ok(PcaModel::F32(pca)) = fisherkit_io::PcaModel::read(out.join("pca-file.safetensors"))
    else {
        panic!("an f32 PCA")
    };
    pca
}

/// The encoding `v` of image `i` equals its saved row `saved`, to 1e-6.
fn assert_rows_match(v: &ndarray::Array1<f32>, saved: ndarray::ArrayView1<'_, f32>, i: usize) {
    for (a, b) in v.iter().zip(saved) {
        assert!((a - b).abs() <= 1e-6, "image {i}: {a} vs {b}");
    }
}

/// The saved PCA and GMM re-encode the test bags into the saved encodings,
/// which are returned.
fn saved_gmm_reencodes_the_test_bags(
    out: &Path,
    pca: &fisherkit::pca::Pca<f32>,
    bags: &[Array2<f32>],
) -> Array2<f32> {
    use fisherkit::encode::{FisherVector, FisherVectorParams, FvPart};
    use fisherkit::Encoder;
    use fisherkit_io::{GmmModel, ModelFile};
    let Ok(GmmModel::F32(gmm)) = fisherkit_io::GmmModel::read(out.join("gmm-K2-file.safetensors"))
    else {
        panic!("an f32 GMM")
    };
    let fv = FisherVector::new(
        &gmm,
        FisherVectorParams {
            parts: vec![FvPart::Mean, FvPart::Var],
            ..Default::default()
        },
    )
    .unwrap();
    let saved = fisherkit_io::read_npy_as::<f32>(out.join("gmm-fv_mean_var.test.npy")).unwrap();
    assert_eq!(saved.nrows(), bags.len());
    for (i, bag) in bags.iter().enumerate() {
        let v = fv
            .encode(pca.transform(bag.view()).unwrap().view())
            .unwrap();
        assert_rows_match(&v, saved.row(i), i);
    }
    saved
}

/// The whitened MFA file carries the whitening its encodings were made with.
fn saved_whitened_mfa_reencodes_the_test_bags(
    out: &Path,
    pca: &fisherkit::pca::Pca<f32>,
    bags: &[Array2<f32>],
) {
    use fisherkit::encode::{MfaFisherScore, MfaFisherScoreParams};
    use fisherkit::Encoder;
    use fisherkit_io::ModelFile;
    let fisherkit_io::Whitened {
        model: fisherkit_io::MfaModel::F32(arrays),
        whitening: Some(w),
    } = fisherkit_io::Whitened::<fisherkit_io::MfaModel>::read(
        out.join("mfa-K2-R1-file-whitened-loading.safetensors"),
    )
    .unwrap()
    else {
        panic!("an f32 MFA with its whitening")
    };
    let fs = MfaFisherScore::new(
        arrays.to_mfa::<f32>().unwrap(),
        MfaFisherScoreParams {
            parts: w.parts.clone(),
            normalization: Default::default(),
            whitening: Some(w.fisher_information_as::<f32>()),
        },
    )
    .unwrap();
    let saved_w =
        fisherkit_io::read_npy_as::<f32>(out.join("mfa-fs_loading-whitened.test.npy")).unwrap();
    for (i, bag) in bags.iter().enumerate() {
        let v = fs
            .encode(pca.transform(bag.view()).unwrap().view())
            .unwrap();
        assert_rows_match(&v, saved_w.row(i), i);
    }
}

/// The saved SVM, applied to the saved encodings `saved`, gives the test
/// labels listed in images.test.txt (this run classifies every test image
/// right).
fn saved_svm_gives_the_listed_labels(out: &Path, saved: &Array2<f32>) {
    use fisherkit_io::{ClassLabels, LinearSvmModel, ModelFile};
    let Ok(LinearSvmModel::F32(svm)) =
        fisherkit_io::LinearSvmModel::read(out.join("svm-gmm-fv_mean_var.safetensors"))
    else {
        panic!("an f32 SVM")
    };
    let Ok(ClassLabels::Str(pred)) = svm.predict_labels(saved.view()) else {
        panic!("string labels")
    };
    let listed = std::fs::read_to_string(out.join("images.test.txt")).unwrap();
    let truth: Vec<&str> = listed
        .lines()
        .map(|l| l.split('\t').nth(1).unwrap())
        .collect();
    assert_eq!(pred, truth);
    assert_eq!(listed.lines().next().unwrap(), "img0\ta");
    assert!(
        matches!(svm.c, Some(c) if c == 0.1 || c == 1.0),
        "{:?}",
        svm.c
    );
}
