//! `fisherkit run --save-model`, `fisherkit predict` and `fisherkit evaluate`:
//! the saved classifier labels the run's test images as the run did, in CSV
//! and JSON lines, with bad images as rows with an error, and bad classifier
//! files as one error line.

use fisherkit_io::ModelFile;
use std::path::Path;

#[path = "../../fisherkit-pipeline/tests/common/mod.rs"]
mod images;
use images::small_set;
mod common;
use common::fk;

const SMALL: [&str; 16] = [
    "--scales",
    "28",
    "--pca-dim",
    "16",
    "--gmm-components",
    "4",
    "--mfa-components",
    "3",
    "--mfa-factors",
    "2",
    "--encoders",
    "gmm-fv:var,mfa-fs:loading",
    "--c-grid",
    "0.1,1",
    "--whitening",
    "both",
];

fn train(t: &Path) -> serde_json::Value {
    fk().arg("run")
        .arg("--train")
        .arg(t.join("train"))
        .arg("--test")
        .arg(t.join("test"))
        .args(SMALL)
        .args(["--no-cache", "-q", "--save-model"])
        .arg(t.join("scene.safetensors"))
        .arg("--report")
        .arg(t.join("report.json"))
        .assert()
        .success();
    serde_json::from_slice(&std::fs::read(t.join("report.json")).unwrap()).unwrap()
}

fn stderr_line(c: &mut assert_cmd::Command, code: i32) -> String {
    let out = c.assert().code(code).get_output().clone();
    let err = String::from_utf8(out.stderr).unwrap();
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(!err.contains("panicked"), "{err}");
    err
}

#[test]
fn predict_and_evaluate_reproduce_the_run() {
    let t = small_set(&["bag", "sneaker", "trouser"], 8, 4);
    let r = train(t.path());
    let model = &r["model"];
    let classes: Vec<String> = serde_json::from_value(r["dataset"]["classes"].clone()).unwrap();
    let want: Vec<String> = model["test_predictions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| classes[k.as_u64().unwrap() as usize].clone())
        .collect();
    let m = t.path().join("scene.safetensors");

    // CSV on stdout, folders walked in sorted order (= the run's test order).
    let out = fk()
        .args(["predict", "--model"])
        .arg(&m)
        .arg(t.path().join("test"))
        .args(["--top-k", "2"])
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let text = String::from_utf8(out).unwrap();
    let mut lines = text.lines();
    assert_eq!(lines.next(), Some("path,label,score,label_2,score_2,error"));
    let got: Vec<String> = lines
        .map(|l| l.split(',').nth(1).unwrap().to_string())
        .collect();
    assert_eq!(got, want);

    // JSON lines to a file, with a corrupt and a truncated image among them.
    let bad = t.path().join("bad");
    std::fs::create_dir_all(&bad).unwrap();
    std::fs::write(bad.join("a_corrupt.png"), b"not an image").unwrap();
    let photo = image::RgbImage::from_fn(40, 30, |x, y| {
        image::Rgb([(x * 6) as u8, (y * 8) as u8, 90])
    });
    let jpg = bad.join("b_whole.jpg");
    photo.save(&jpg).unwrap();
    let bytes = std::fs::read(&jpg).unwrap();
    std::fs::write(bad.join("c_truncated.jpg"), &bytes[..bytes.len() / 2]).unwrap();
    let out_file = t.path().join("labels.jsonl");
    fk().args(["predict", "-q", "--format", "jsonl", "--model"])
        .arg(&m)
        .arg(&bad)
        .arg("--output")
        .arg(&out_file)
        .arg("--save-encodings")
        .arg(t.path().join("enc.npy"))
        .assert()
        .success();
    let rows: Vec<serde_json::Value> = std::fs::read_to_string(&out_file)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(rows.len(), 3);
    assert!(
        rows[0]["error"].as_str().unwrap().contains("a_corrupt.png"),
        "{:?}",
        rows[0]
    );
    assert!(rows[0]["label"].is_null());
    assert!(classes.contains(&rows[1]["label"].as_str().unwrap().to_string()));
    assert!(rows[1].get("error").is_none());
    assert!(
        rows[2]["error"]
            .as_str()
            .unwrap()
            .contains("truncated JPEG"),
        "{:?}",
        rows[2]
    );
    let enc = fisherkit_io::read_npy(t.path().join("enc.npy")).unwrap();
    let fisherkit_io::Matrix::F32(enc) = enc else {
        panic!("f32")
    };
    assert_eq!(enc.nrows(), 3);
    assert!(enc.row(0).iter().all(|&v| v == 0.0));
    let norm: f32 = enc.row(1).iter().map(|v| v * v).sum();
    assert!(norm > 0.5, "{norm}");
    // --strict turns the bad rows into a failure.
    let err = stderr_line(
        fk().args(["predict", "-q", "--strict", "--model"])
            .arg(&m)
            .arg(&bad),
        1,
    );
    assert!(err.contains("2 input(s) could not be labelled"), "{err}");

    // evaluate: the run's number, a JSON report and the confusion SVG.
    fk().args(["evaluate", "-q", "--model"])
        .arg(&m)
        .arg("--test")
        .arg(t.path().join("test"))
        .arg("--report")
        .arg(t.path().join("eval.json"))
        .arg("--plot")
        .arg(t.path().join("confusion.svg"))
        .assert()
        .success();
    let e: serde_json::Value =
        serde_json::from_slice(&std::fs::read(t.path().join("eval.json")).unwrap()).unwrap();
    assert_eq!(e["accuracy"], model["test_accuracy"]);
    assert!(std::fs::read_to_string(t.path().join("confusion.svg"))
        .unwrap()
        .starts_with("<svg"));
}

#[test]
fn bad_classifier_files_and_options_are_one_error_line() {
    let t = small_set(&["bag", "trouser"], 5, 2);
    train(t.path());
    let m = t.path().join("scene.safetensors");
    let bytes = std::fs::read(&m).unwrap();
    let cut = t.path().join("cut.safetensors");
    std::fs::write(&cut, &bytes[..bytes.len() / 2]).unwrap();
    let err = stderr_line(
        fk().args(["predict", "--model"])
            .arg(&cut)
            .arg(t.path().join("test")),
        1,
    );
    assert!(
        err.contains("cut.safetensors") && err.contains("safetensors"),
        "{err}"
    );
    let err = stderr_line(
        fk().args(["predict", "--model"])
            .arg(t.path().join("nope.safetensors"))
            .arg(t.path().join("test")),
        1,
    );
    assert!(err.contains("nope.safetensors"), "{err}");
    // A model file of another kind.
    let gmm = t.path().join("gmm.safetensors");
    let g = fisherkit::gmm::DiagGmm::new(
        ndarray::array![1.0f32],
        ndarray::array![[0.0f32, 0.0]],
        ndarray::array![[1.0f32, 1.0]],
    )
    .unwrap();
    g.write(&gmm, &Default::default()).unwrap();
    let err = stderr_line(
        fk().args(["predict", "--model"])
            .arg(&gmm)
            .arg(t.path().join("test")),
        1,
    );
    assert!(
        err.contains("is a GMM model") && err.contains("scene classifier"),
        "{err}"
    );
    // An ONNX model for a classifier of a built-in network.
    let err = stderr_line(
        fk().args(["predict", "--model"])
            .arg(&m)
            .args(["--cnn", "x.onnx"])
            .arg(t.path().join("test")),
        2,
    );
    assert!(err.contains("trained with the built-in"), "{err}");
    let err = stderr_line(
        fk().args(["predict", "--model"])
            .arg(&m)
            .arg(t.path().join("missing")),
        1,
    );
    assert!(
        err.contains("missing") && err.contains("no such file"),
        "{err}"
    );
    let err = stderr_line(
        fk().arg("run")
            .arg("--train")
            .arg(t.path().join("train"))
            .arg("--test")
            .arg(t.path().join("test"))
            .args(SMALL)
            .args(["--no-cache", "--save-model"])
            .arg(t.path().join("x.safetensors"))
            .args(["--model-encoder", "gmm-fv:mean"]),
        2, // bad usage, found when the configuration is checked
    );
    assert!(
        err.contains("`gmm-fv:mean` is not among the encoders"),
        "{err}"
    );
}
