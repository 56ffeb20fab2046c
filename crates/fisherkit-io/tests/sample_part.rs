//! The sample-pass checkpoint file: written and read back bit for bit, and
//! every malformed file refused with a message naming the file and the problem.

use fisherkit::pca::PcaMoments;
use fisherkit_io::{read_sample_part, write_sample_part, ModelFile, SamplePartFile, SampleScale};
use ndarray::{array, Array2};

fn part() -> SamplePartFile {
    let x = Array2::from_shape_fn((5, 3), |(i, j)| {
        ((i * 3 + j) as f64 * 0.71).sin() * 1e3 + 0.1
    });
    let mut m = PcaMoments::new(array![0.5, -1.0, 2.0]);
    m.add(x.view()).unwrap();
    SamplePartFile {
        images: vec![64, 65, 70],
        dim: 3,
        scales: vec![
            SampleScale {
                moments: Some(m),
                rows: vec![1.0, f32::MIN_POSITIVE, -3.5, 1e-30, 2.0, 7.25],
            },
            // A scale no image of the chunk could give.
            SampleScale {
                moments: None,
                rows: vec![],
            },
        ],
    }
}

#[test]
fn round_trip_is_bit_exact() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("part-00002.safetensors");
    let want = part();
    write_sample_part(&p, &want).unwrap();
    let got = read_sample_part(&p).unwrap();
    assert_eq!(got.images, want.images);
    assert_eq!(got.dim, 3);
    assert_eq!(got.scales.len(), 2);
    let (a, b) = (
        got.scales[0].moments.as_ref().unwrap().parts(),
        want.scales[0].moments.as_ref().unwrap().parts(),
    );
    assert_eq!(a.1, 5);
    assert_eq!(a.0, b.0);
    assert_eq!(a.2, b.2);
    assert_eq!(a.3, b.3);
    let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
    assert_eq!(bits(&got.scales[0].rows), bits(&want.scales[0].rows));
    assert!(got.scales[1].moments.is_none() && got.scales[1].rows.is_empty());
}

#[test]
fn rows_that_are_not_whole_rows_are_refused_and_nothing_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("part.safetensors");
    let mut bad = part();
    bad.scales[0].rows.pop();
    let e = write_sample_part(&p, &bad).unwrap_err().to_string();
    assert!(e.contains("5 row values") && e.contains("width 3"), "{e}");
    assert!(!p.exists());
    assert_eq!(
        std::fs::read_dir(dir.path()).unwrap().count(),
        0,
        "no temporary file left"
    );
}

#[test]
fn malformed_files_are_named_errors() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("part.safetensors");
    write_sample_part(&p, &part()).unwrap();
    let good = std::fs::read(&p).unwrap();

    // Truncated.
    std::fs::write(&p, &good[..good.len() - 10]).unwrap();
    let e = read_sample_part(&p).unwrap_err().to_string();
    assert!(
        e.contains("part.safetensors") && e.contains("safetensors"),
        "{e}"
    );

    // Missing.
    let e = read_sample_part(dir.path().join("nope.safetensors"))
        .unwrap_err()
        .to_string();
    assert!(e.contains("nope.safetensors"), "{e}");

    // Another fisherkit file.
    let g =
        fisherkit::gmm::DiagGmm::new(array![1.0], array![[0.0, 1.0]], array![[1.0, 2.0]]).unwrap();
    g.write(&p, &Default::default()).unwrap();
    let e = read_sample_part(&p).unwrap_err().to_string();
    assert!(
        e.contains("kind \"gmm\"") && e.contains("sample-part"),
        "{e}"
    );

    // A tensor of the wrong shape: dim says 3, the header is edited to say 4.
    let key = b"\"dim\":\"3\"";
    let at = good
        .windows(key.len())
        .position(|w| w == key)
        .expect("the metadata holds dim");
    let mut edited = good.clone();
    edited[at + key.len() - 2] = b'4';
    std::fs::write(&p, &edited).unwrap();
    let e = read_sample_part(&p).unwrap_err().to_string();
    assert!(e.contains("tensor `scale0.") && e.contains("shape"), "{e}");
}
