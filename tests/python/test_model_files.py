"""Model files of PCA (kind "pca") and LinearSVC (kind "linear-svm"): round
trips through save / load, files written by hand (another tool) and from
scikit-learn's parameters, and the errors for wrong kinds and bad files. The
native module writes and reads them with fisherkit-io, the same Rust code as
the crates (so a file saved here is one `fisherkit_io::PcaModel::read` reads)."""

import json
import struct

import numpy as np
import pytest

import fisherkit
from fisherkit import _fisherkit as native
from conftest import peer


def header(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        return json.loads(f.read(n))


def write_by_hand(path, meta, tensors):
    """A safetensors file from its description alone: 8-byte header length,
    JSON header, raw little-endian data (as another tool would write it)."""
    head, data = {"__metadata__": meta}, b""
    for name, arr in tensors.items():
        arr = np.ascontiguousarray(arr)
        code = {np.dtype("<f4"): "F32", np.dtype("<f8"): "F64"}[arr.dtype]
        head[name] = {"dtype": code, "shape": list(arr.shape), "data_offsets": [len(data), len(data) + arr.nbytes]}
        data += arr.tobytes()
    h = json.dumps(head).encode()
    h += b" " * (-len(h) % 8)
    path.write_bytes(struct.pack("<Q", len(h)) + h + data)


def data(seed=0, n=300, d=12):
    rng = np.random.default_rng(seed)
    return rng.standard_normal((n, d)) @ rng.standard_normal((d, d)) + 5.0


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("whiten", [False, True])
def test_pca_round_trip(tmp_path, dtype, whiten):
    X = data().astype(dtype)
    p = fisherkit.PCA(5, whiten=whiten, clamp_components=True).fit(X)
    path = tmp_path / "pca.safetensors"
    p.save(path)
    h = header(path)
    meta = h["__metadata__"]
    assert meta["kind"] == "pca" and meta["format_version"] == "1"
    assert meta["whiten"] == json.dumps(whiten) and meta["dtype"] == np.dtype(dtype).name
    code = {np.float32: "F32", np.float64: "F64"}[dtype]
    assert h["mean"]["dtype"] == code and h["mean"]["shape"] == [12]
    assert h["components"]["dtype"] == code and h["components"]["shape"] == [5, 12]
    assert h["explained_variance"] == {**h["explained_variance"], "dtype": "F64", "shape": [5]}
    back = fisherkit.PCA.load(path)
    for attr in ("mean_", "components_", "explained_variance_", "explained_variance_ratio_"):
        got, want = getattr(back, attr), getattr(p, attr)
        assert got.dtype == want.dtype, attr
        np.testing.assert_array_equal(got, want, err_msg=attr)
    assert (back.n_components, back.whiten, back.center, back.clamp_components) == (5, whiten, True, True)
    assert (back.n_components_, back.n_features_in_) == (5, 12)
    Y = data(seed=1, n=50).astype(dtype)
    np.testing.assert_array_equal(back.transform(Y), p.transform(Y))
    loaded = fisherkit.load_model(path)
    assert isinstance(loaded, fisherkit.PCA)
    np.testing.assert_array_equal(loaded.transform(Y), p.transform(Y))
    back.fit(X)  # the loaded estimator can be refitted with its hyper-parameters
    np.testing.assert_array_equal(back.components_, p.components_)


def test_pca_file_matches_sklearn(tmp_path):
    """A PCA fitted by scikit-learn, written with the Rust writer and loaded:
    the same transform; and fisherkit's own PCA after a round trip equals
    scikit-learn's up to the sign of each axis."""
    decomposition = peer("sklearn.decomposition")
    X = data(seed=2)
    Y = data(seed=3, n=40)
    total = float(X.var(axis=0, ddof=1).sum())
    for whiten in (False, True):
        ref = decomposition.PCA(4, whiten=whiten, svd_solver="full").fit(X)
        path = tmp_path / f"sk{whiten}.safetensors"
        native.pca_save(
            str(path), ref.mean_, np.ascontiguousarray(ref.components_), ref.explained_variance_, whiten,
            total, {},
        )
        back = fisherkit.PCA.load(path)
        np.testing.assert_allclose(back.transform(Y), ref.transform(Y), atol=1e-9)
        np.testing.assert_allclose(back.explained_variance_ratio_, ref.explained_variance_ratio_, rtol=1e-12)

        ours = fisherkit.PCA(4, whiten=whiten).fit(X)
        ours.save(tmp_path / "ours.safetensors")
        mine = fisherkit.PCA.load(tmp_path / "ours.safetensors")
        signs = np.sign((mine.components_ * ref.components_).sum(1))
        np.testing.assert_allclose(mine.transform(Y) * signs, ref.transform(Y), atol=1e-7)
        np.testing.assert_allclose(mine.explained_variance_ratio_, ref.explained_variance_ratio_, rtol=1e-9)


def test_pca_file_written_by_hand(tmp_path):
    """Another tool's file: no format_version, float32 variances, no
    total_variance (the ratio is then relative to the kept variance)."""
    rng = np.random.default_rng(4)
    q, _ = np.linalg.qr(rng.standard_normal((6, 6)))
    comp = q[:3].astype("<f4")
    mean = rng.standard_normal(6).astype("<f4")
    var = np.array([3.0, 2.0, 1.0], dtype="<f4")
    path = tmp_path / "hand.safetensors"
    write_by_hand(path, {"kind": "pca"}, {"mean": mean, "components": comp, "explained_variance": var})
    p = fisherkit.PCA.load(path)
    assert p.components_.dtype == np.float32 and not p.whiten and p.n_components == 3
    Y = rng.standard_normal((10, 6)).astype(np.float32)
    want = (Y.astype(np.float64) - mean) @ comp.T.astype(np.float64)
    np.testing.assert_allclose(p.transform(Y), want, atol=1e-5)
    np.testing.assert_allclose(p.explained_variance_ratio_, [0.5, 1 / 3, 1 / 6], rtol=1e-12)


@pytest.mark.parametrize(
    "labels",
    [
        np.array(["bedroom", "kitchen", "forest"]),
        np.array([3, -1, 10]),
        np.array([3, -1, 10], dtype=np.int32),
        np.array([7, 8, 9], dtype=np.uint8),
    ],
    ids=["str", "int64", "int32", "uint8"],
)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_linear_svc_round_trip(tmp_path, labels, dtype):
    rng = np.random.default_rng(5)
    centres = 3.0 * rng.standard_normal((3, 8))
    y = rng.integers(0, 3, 300)
    X = (centres[y] + rng.standard_normal((300, 8))).astype(dtype)
    clf = fisherkit.LinearSVC(C=0.25, loss="hinge", tol=1e-3, max_iter=500, random_state=7).fit(X, labels[y])
    path = tmp_path / "svm.safetensors"
    clf.save(path)
    h = header(path)
    meta = h["__metadata__"]
    assert meta["kind"] == "linear-svm" and meta["c"] == "0.25"
    assert json.loads(meta["classes"]) == clf.classes_.tolist()
    assert h["weights"]["shape"] == [3, 8] and h["bias"]["shape"] == [3]
    back = fisherkit.LinearSVC.load(path)
    assert back.classes_.dtype == clf.classes_.dtype
    np.testing.assert_array_equal(back.classes_, clf.classes_)
    assert back.coef_.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(back.coef_, clf.coef_)
    np.testing.assert_array_equal(back.intercept_, clf.intercept_)
    np.testing.assert_array_equal(back.decision_function(X), clf.decision_function(X))
    np.testing.assert_array_equal(back.predict(X), clf.predict(X))
    assert back.get_params() == clf.get_params()
    assert isinstance(fisherkit.load_model(path), fisherkit.LinearSVC)
    assert back.score(X, labels[y]) > 0.9


def test_linear_svc_two_bool_classes_and_file_by_hand(tmp_path):
    X = np.array([[0.0, 1.0], [1.0, 0.0], [0.1, 0.9], [0.9, 0.2]])
    clf = fisherkit.LinearSVC(C=10).fit(X, np.array([True, False, True, False]))
    clf.save(tmp_path / "b.safetensors")
    back = fisherkit.LinearSVC.load(tmp_path / "b.safetensors")
    assert back.classes_.dtype == bool
    np.testing.assert_array_equal(back.predict(X), [True, False, True, False])
    # another tool's file without `classes`: labels 0..C-1
    w = np.array([[1.0, 0.0], [0.0, 1.0]])
    write_by_hand(tmp_path / "h.safetensors", {"kind": "linear-svm"}, {"weights": w, "bias": np.zeros(2)})
    h = fisherkit.LinearSVC.load(tmp_path / "h.safetensors")
    np.testing.assert_array_equal(h.classes_, [0, 1])
    np.testing.assert_array_equal(h.predict(X), [1, 0, 1, 0])


def test_wrong_kind_and_bad_files(tmp_path):
    X = data()
    pca_path, svm_path, gmm_path = (tmp_path / n for n in ("p.safetensors", "s.safetensors", "g.safetensors"))
    fisherkit.PCA(3).fit(X).save(pca_path)
    fisherkit.LinearSVC().fit(X, np.arange(300) % 2).save(svm_path)
    fisherkit.GaussianMixture(2, max_iter=3).fit(X).save(gmm_path)
    with pytest.raises(ValueError, match='is a linear SVM model \\(kind "linear-svm"\\); a PCA'):
        fisherkit.PCA.load(svm_path)
    with pytest.raises(ValueError, match='is a GMM model \\(kind "gmm"\\); a PCA'):
        fisherkit.PCA.load(gmm_path)
    with pytest.raises(ValueError, match='is a PCA model \\(kind "pca"\\); a linear SVM'):
        fisherkit.LinearSVC.load(pca_path)
    with pytest.raises(ValueError, match='kind "pca"'):
        fisherkit.GaussianMixture.load(pca_path)
    with pytest.raises(FileNotFoundError):
        fisherkit.PCA.load(tmp_path / "missing.safetensors")
    # invalid parameters: refused on save (nothing written) and on load
    p = fisherkit.PCA(3).fit(X)
    p.components_ = p.components_ * 2.0
    with pytest.raises(ValueError, match="not orthonormal"):
        p.save(tmp_path / "bad.safetensors")
    assert not (tmp_path / "bad.safetensors").exists()
    comp = np.eye(3, 4)
    comp[1, 0] = 0.5
    write_by_hand(tmp_path / "bad.safetensors", {"kind": "pca"},
                  {"mean": np.zeros(4), "components": comp, "explained_variance": np.ones(3)})
    with pytest.raises(ValueError, match="rows 0 and 1 have dot product 0.5"):
        fisherkit.PCA.load(tmp_path / "bad.safetensors")
    write_by_hand(tmp_path / "nan.safetensors", {"kind": "linear-svm"},
                  {"weights": np.array([[1.0, np.nan], [0.0, 1.0]]), "bias": np.zeros(2)})
    with pytest.raises(ValueError, match=r"tensor `weights` has a non-finite value \(NaN\) at \[0, 1\]"):
        fisherkit.LinearSVC.load(tmp_path / "nan.safetensors")
    with pytest.raises(ValueError, match="float64 cannot be stored"):
        fisherkit.LinearSVC().fit(X, (np.arange(300) % 2) * 1.0).save(tmp_path / "f.safetensors")
    with pytest.raises(ValueError, match="whiten"):
        fisherkit.PCA.load(pca_path, whiten=True)


def test_load_model_reads_the_kind_with_the_rust_reader(tmp_path):
    """`load_model` picks the estimator from the file's `kind`, read by
    fisherkit-io (`native.model_kind`): each kind to its class, and every bad
    file refused with the Python error of its cause and a message naming the
    file."""
    X = data()
    paths = {
        "pca": (tmp_path / "p.safetensors", fisherkit.PCA),
        "linear-svm": (tmp_path / "s.safetensors", fisherkit.LinearSVC),
        "gmm": (tmp_path / "g.safetensors", fisherkit.GaussianMixture),
    }
    fisherkit.PCA(3).fit(X).save(paths["pca"][0])
    fisherkit.LinearSVC().fit(X, np.arange(300) % 2).save(paths["linear-svm"][0])
    fisherkit.GaussianMixture(2, max_iter=3).fit(X).save(paths["gmm"][0])
    for kind, (path, cls) in paths.items():
        assert native.model_kind(str(path)) == kind
        assert isinstance(fisherkit.load_model(path), cls)
    with pytest.raises(FileNotFoundError, match="missing.safetensors"):
        fisherkit.load_model(tmp_path / "missing.safetensors")
    (tmp_path / "notes.safetensors").write_text("not a model at all")
    with pytest.raises(ValueError, match="notes.safetensors: not a safetensors model file"):
        fisherkit.load_model(tmp_path / "notes.safetensors")
    write_by_hand(tmp_path / "hmm.safetensors", {"kind": "hmm"}, {"w": np.ones(2)})
    with pytest.raises(ValueError, match='hmm.safetensors: unknown model kind "hmm"; expected "gmm", "mfa"'):
        fisherkit.load_model(tmp_path / "hmm.safetensors")
    write_by_hand(tmp_path / "nokind.safetensors", {"note": "x"}, {"w": np.ones(2)})
    with pytest.raises(ValueError, match="nokind.safetensors: missing metadata key `kind`"):
        fisherkit.load_model(tmp_path / "nokind.safetensors")
    write_by_hand(tmp_path / "v2.safetensors", {"kind": "gmm", "format_version": "2"}, {"w": np.ones(2)})
    with pytest.raises(ValueError, match='v2.safetensors: unsupported format_version "2"'):
        fisherkit.load_model(tmp_path / "v2.safetensors")
    (tmp_path / "dir.safetensors").mkdir()
    with pytest.raises(ValueError, match="dir.safetensors: is a directory"):
        fisherkit.load_model(tmp_path / "dir.safetensors")
