"""MixtureOfFactorAnalyzers and MFAFisherScore: dense-covariance numpy
formulas, scikit-learn's FactorAnalysis (K = 1), sharded statistics."""

import json
import pickle
import struct

import numpy as np
import pytest

import fisherkit
from conftest import peer


def planted_mfa(n=3000, k=3, d=8, r=2, seed=0):
    rng = np.random.default_rng(seed)
    means = 6.0 * rng.standard_normal((k, d))
    lam = rng.standard_normal((k, d, r))
    psi = rng.uniform(0.2, 0.6, d)
    labels = rng.integers(0, k, n)
    z = rng.standard_normal((n, r))
    X = means[labels] + np.einsum("ndr,nr->nd", lam[labels], z) + np.sqrt(psi) * rng.standard_normal((n, d))
    return X


@pytest.fixture(scope="module")
def data():
    return planted_mfa()


def dense(m):
    """Component covariances S_k = Λ_k Λ_kᵀ + Ψ_k (K, D, D) and the posteriors / log-likelihoods of X."""
    w, mu, lam, psi = m.weights_, m.means_, m.loadings_, np.atleast_2d(m.psi_)
    k, d, _ = lam.shape
    S = np.einsum("kdr,ker->kde", lam, lam) + np.stack([np.diag(psi[min(i, len(psi) - 1)]) for i in range(k)])
    return w, mu, lam, S


def dense_estep(m, X):
    w, mu, lam, S = dense(m)
    k, d = mu.shape
    lp = np.empty((len(X), k))
    for j in range(k):
        sign, logdet = np.linalg.slogdet(S[j])
        diff = X - mu[j]
        maha = np.einsum("nd,nd->n", diff, np.linalg.solve(S[j], diff.T).T)
        lp[:, j] = np.log(w[j]) - 0.5 * (d * np.log(2 * np.pi) + logdet + maha)
    mx = lp.max(1, keepdims=True)
    ll = mx[:, 0] + np.log(np.exp(lp - mx).sum(1))
    return np.exp(lp - ll[:, None]), ll


# K = 1 first: see test_per_component_fit_leaves_later_single_component_fits_intact
def test_single_component_matches_sklearn_factor_analysis():
    decomposition = peer("sklearn.decomposition")
    X = planted_mfa(n=1000, k=1, seed=3)
    m = fisherkit.MixtureOfFactorAnalyzers(1, 2, max_iter=2000, tol=1e-12, psi_floor=1e-6).fit(X)
    fa = decomposition.FactorAnalysis(n_components=2, tol=1e-12, max_iter=5000, svd_method="lapack").fit(X)
    assert m.converged_
    assert m.score(X) == pytest.approx(fa.score(X), abs=1e-8)
    np.testing.assert_allclose(m.means_[0], fa.mean_, rtol=1e-9)
    _, _, _, S = dense(m)
    np.testing.assert_allclose(S[0], fa.get_covariance(), rtol=1e-3, atol=1e-3)


@pytest.mark.parametrize("psi_mode", ["shared", "per_component"])
def test_fit_and_inference_match_dense_formulas(data, psi_mode):
    m = fisherkit.MixtureOfFactorAnalyzers(3, 2, psi_mode=psi_mode, max_iter=60, random_state=1).fit(data)
    assert m.loadings_.shape == (3, 8, 2)
    assert m.psi_.shape == ((8,) if psi_mode == "shared" else (3, 8))
    h = m.log_likelihood_history_
    assert len(h) == m.n_iter_ and np.all(np.diff(h) >= -1e-9 * np.abs(h[1:]))
    q, ll = dense_estep(m, data)
    np.testing.assert_allclose(m.score_samples(data), ll, rtol=1e-10)
    np.testing.assert_allclose(m.predict_proba(data), q, rtol=1e-8, atol=1e-12)
    np.testing.assert_array_equal(m.predict(data), q.argmax(1))


def test_sharded_statistics_equal_batch_step_and_partial_fit(data):
    m = fisherkit.MixtureOfFactorAnalyzers(3, 2, max_iter=5, random_state=0).fit(data)
    whole = m.sufficient_statistics(data)
    merged = sum(m.sufficient_statistics(s) for s in np.array_split(data, [100, 1700, 1701]))
    assert merged.n_rows == whole.n_rows == len(data)
    np.testing.assert_allclose(merged.resp_sums, whole.resp_sums, rtol=1e-12)
    assert merged.log_likelihood == pytest.approx(whole.log_likelihood, rel=1e-12)
    a = fisherkit.clone(m)
    a._set_model(*m._params())
    a.update_from_statistics(merged)
    b = fisherkit.clone(m)
    b._set_model(*m._params())
    b.update_from_statistics(whole)
    for attr in ("weights_", "means_", "loadings_", "psi_"):
        np.testing.assert_allclose(getattr(a, attr), getattr(b, attr), rtol=1e-9, atol=1e-12)
    # partial_fit on the whole data, step by step == fit with tol=0
    full = fisherkit.MixtureOfFactorAnalyzers(3, 2, max_iter=4, tol=0, random_state=2).fit(data)
    inc = fisherkit.MixtureOfFactorAnalyzers(3, 2, tol=0, random_state=2)
    for _ in range(4):
        inc.partial_fit(data)
    np.testing.assert_allclose(inc.loadings_, full.loadings_, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(inc.log_likelihood_history_, full.log_likelihood_history_, rtol=1e-12)
    with pytest.raises(TypeError, match="cannot be pickled"):
        pickle.dumps(whole)


def test_fisher_score_equals_exact_gradients(data):
    m = fisherkit.MixtureOfFactorAnalyzers(3, 2, max_iter=30, random_state=0).fit(data)
    rng = np.random.default_rng(5)
    bags = [data[rng.choice(len(data), n)] + 0.2 * rng.standard_normal((n, 8)) for n in (1, 30, 200)]
    enc = fisherkit.MFAFisherScore(m, parts=("loading", "mean"), power=1.0, l2=False)
    out = enc.transform(bags)
    assert out.shape == (3, enc.output_dim()) == (3, 3 * 8 + 3 * 8 * 2)
    _, mu, lam, S = dense(m)
    for i, bag in enumerate(bags):
        q, _ = dense_estep(m, bag)
        gm, gl = [], []
        for k in range(3):
            Si = np.linalg.inv(S[k])
            r = (bag - mu[k]) @ Si  # (N, D): S^-1 d
            gm.append((q[:, k, None] * r).sum(0) / len(bag))
            # d/dΛ log N = (S^-1 d dᵀ S^-1 - S^-1) Λ
            g = np.einsum("n,nd,ne->de", q[:, k], r, r) @ lam[k] - q[:, k].sum() * Si @ lam[k]
            gl.append(g / len(bag))
        ref = np.concatenate([np.concatenate(gm), np.concatenate([g.ravel() for g in gl])])
        np.testing.assert_allclose(out[i], ref, rtol=1e-7, atol=1e-10)
    # normalised default: signed sqrt + L2 of the loading block; float32 bags
    imp = fisherkit.MFAFisherScore(m).transform([b.astype(np.float32) for b in bags])
    assert imp.dtype == np.float32
    raw = out[:, 24:]
    ref = np.sign(raw) * np.sqrt(np.abs(raw))
    np.testing.assert_allclose(imp, ref / np.linalg.norm(ref, axis=1, keepdims=True), rtol=2e-3, atol=1e-4)
    # whitening: divides by the square root of the raw scores' variance over the fit bags
    wenc = fisherkit.MFAFisherScore(m, parts=("mean",), power=1.0, l2=False, whiten=True).fit(bags)
    fim = out[:, :24].var(axis=0)
    np.testing.assert_allclose(wenc.whitening_, fim, rtol=1e-7, atol=1e-14)
    np.testing.assert_allclose(wenc.transform(bags[:1])[0], out[0, :24] / np.sqrt(np.maximum(fim, 1e-12 * fim.mean())), rtol=1e-6)
    with pytest.raises(ValueError, match="unknown MFA Fisher score part"):
        fisherkit.MFAFisherScore(m, parts=("sigma",)).transform(bags)


@pytest.mark.parametrize("psi_mode", ["shared", "per_component"])
def test_save_load_pickle_clone(tmp_path, data, psi_mode):
    m = fisherkit.MixtureOfFactorAnalyzers(3, 2, psi_mode=psi_mode, max_iter=5).fit(data.astype(np.float32))
    path = tmp_path / "mfa.safetensors"
    m.save(path)
    with open(path, "rb") as f:
        header = json.loads(f.read(struct.unpack("<Q", f.read(8))[0]))
    assert header["__metadata__"] == {"kind": "mfa", "format_version": "1"}
    assert header["loadings"]["shape"] == [3, 8, 2] and header["loadings"]["dtype"] == "F32"
    assert header["psi"]["shape"] == ([8] if psi_mode == "shared" else [3, 8])
    back = fisherkit.load_model(path)
    assert isinstance(back, fisherkit.MixtureOfFactorAnalyzers) and back.psi_mode == psi_mode
    for attr in ("weights_", "means_", "loadings_", "psi_"):
        np.testing.assert_array_equal(getattr(back, attr), getattr(m, attr))
    p = pickle.loads(pickle.dumps(m))
    np.testing.assert_array_equal(p.score_samples(data[:10]), m.score_samples(data[:10]))
    c = fisherkit.clone(m)
    assert c.get_params() == m.get_params() and not hasattr(c, "means_")
    with pytest.raises(ValueError, match="kind 'mfa', expected 'gmm'"):
        fisherkit.GaussianMixture.load(path)


def test_errors(data):
    with pytest.raises(ValueError, match="n_factors"):
        fisherkit.MixtureOfFactorAnalyzers(2, 8).fit(data)
    with pytest.raises(ValueError, match="psi_mode"):
        fisherkit.MixtureOfFactorAnalyzers(2, 2, psi_mode="bogus").fit(data)
    with pytest.raises(ValueError, match="non-finite"):
        bad = data[:100].copy()
        bad[3, 3] = np.nan
        fisherkit.MixtureOfFactorAnalyzers(2, 2).fit(bad)
    with pytest.raises(fisherkit.NotFittedError):
        fisherkit.MFAFisherScore(fisherkit.MixtureOfFactorAnalyzers(2, 2)).transform([data[:5]])


def test_per_component_fit_leaves_later_single_component_fits_intact(data):
    X = planted_mfa(n=1000, k=1, seed=3)
    before = fisherkit.MixtureOfFactorAnalyzers(1, 2, max_iter=300, random_state=0).fit(X)
    fisherkit.MixtureOfFactorAnalyzers(3, 2, psi_mode="per_component", max_iter=3).fit(data)
    after = fisherkit.MixtureOfFactorAnalyzers(1, 2, max_iter=300, random_state=0).fit(X)
    np.testing.assert_array_equal(after.psi_, before.psi_)
