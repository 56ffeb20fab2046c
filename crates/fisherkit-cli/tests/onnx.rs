//! `fisherkit run --cnn FILE.onnx`: with the `onnx` feature, an ONNX export of SqueezeNet
//! (written by `scripts/export_onnx.py`; skipped with a message when python3 or onnx is
//! missing, unless `FISHERKIT_REQUIRE_PEERS=1`) gives the built-in network's results; the
//! ONNX options' usage errors; without the feature, the one error line asking for a rebuild.

use std::path::Path;

#[path = "../../fisherkit-pipeline/tests/common/mod.rs"]
mod images;
use images::small_set;
mod common;
use common::fk;

fn run_images(t: &Path, extra: &[&str]) -> assert_cmd::assert::Assert {
    fk().arg("run")
        .arg("--train")
        .arg(t.join("train"))
        .arg("--test")
        .arg(t.join("test"))
        .args([
            "--scales",
            "28",
            "--no-cache",
            "--encoders",
            "cnn-global,gmm-fv:mean",
        ])
        .args([
            "--pca-dim",
            "4",
            "--gmm-components",
            "2",
            "--c-grid",
            "1",
            "--cv-folds",
            "2",
        ])
        .args(extra)
        .assert()
}

/// [`common::assert_error`] (exit code, `error: `, no panic, empty stdout), and one line
/// even for the usage errors (code 2) these options give.
fn one_error_line(a: assert_cmd::assert::Assert, code: i32) -> String {
    let err = common::assert_error(a.get_output(), code, &[], &[]);
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    err
}

#[cfg(not(feature = "onnx"))]
#[test]
fn without_the_feature_an_onnx_model_asks_for_a_rebuild() {
    let t = small_set(&["bag", "trouser"], 2, 2);
    let err = one_error_line(run_images(t.path(), &["--cnn", "model.onnx"]), 2);
    assert!(
        err.contains("built without ONNX support") && err.contains("--features onnx"),
        "{err}"
    );
}

#[test]
fn onnx_options_need_an_onnx_model_and_three_numbers() {
    let t = small_set(&["bag", "trouser"], 2, 2);
    let err = one_error_line(run_images(t.path(), &["--onnx-bgr"]), 2);
    assert!(err.contains("need an ONNX model"), "{err}");
    let err = one_error_line(run_images(t.path(), &["--cnn", "resnet"]), 2);
    assert!(err.contains("unknown CNN `resnet`"), "{err}");
    #[cfg(feature = "onnx")]
    {
        let err = one_error_line(
            run_images(t.path(), &["--cnn", "m.onnx", "--onnx-mean", "0.5,0.5"]),
            2,
        );
        assert!(
            err.contains("--onnx-mean") && err.contains("three"),
            "{err}"
        );
        let err = one_error_line(run_images(t.path(), &["--cnn", "/nonexistent/m.onnx"]), 1);
        assert!(err.contains("/nonexistent/m.onnx"), "{err}");
    }
}

#[cfg(feature = "onnx")]
#[test]
fn an_onnx_export_of_squeezenet_gives_the_builtin_results() {
    use std::process::Command;
    let require = std::env::var("FISHERKIT_REQUIRE_PEERS").is_ok_and(|v| v == "1");
    let models = tempfile::tempdir().unwrap();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/export_onnx.py");
    let out = Command::new("python3")
        .arg(&script)
        .arg(models.path())
        .args(["--only", "squeezenet"])
        .output();
    match out {
        Ok(o) if o.status.success() => {}
        Ok(o) if o.status.code() == Some(3) && !require => {
            eprintln!("SKIP: {}", String::from_utf8_lossy(&o.stdout));
            return;
        }
        other => panic!("scripts/export_onnx.py failed: {other:?}"),
    }
    let t = small_set(&["bag", "trouser"], 4, 3);
    let report = |name: &str, extra: &[&str]| -> serde_json::Value {
        let r = t.path().join(name);
        run_images(
            t.path(),
            &[&["--report", r.to_str().unwrap()], extra].concat(),
        )
        .success();
        serde_json::from_str(&std::fs::read_to_string(r).unwrap()).unwrap()
    };
    let model = models.path().join("squeezenet.onnx");
    let onnx = report(
        "onnx.json",
        &[
            "--cnn",
            model.to_str().unwrap(),
            "--onnx-input-side",
            "227",
            "--onnx-bgr",
            "--onnx-mean",
            "0.407867,0.457525,0.481094",
            "--onnx-std",
            "0.00392157,0.00392157,0.00392157",
        ],
    );
    let builtin = report("builtin.json", &["--cnn", "squeezenet"]);
    let cnn = onnx["cnn"].as_str().unwrap();
    assert!(cnn.starts_with("onnx:squeezenet.onnx#"), "{cnn}");
    assert_eq!(builtin["cnn"], "squeezenet1_1");
    let accuracies = |r: &serde_json::Value| -> Vec<(String, serde_json::Value)> {
        r["results"]
            .as_array()
            .unwrap()
            .iter()
            .map(|row| (row["spec"].to_string(), row["confusion"].clone()))
            .collect()
    };
    assert_eq!(accuracies(&onnx), accuracies(&builtin), "same predictions");
}
