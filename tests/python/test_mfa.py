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


def test_update_from_statistics_is_not_converged_while_it_reseeds(data):
    # As for the GMM: a starved component is re-seeded, and that step is not
    # converged whatever the tolerance; the next ordinary step is.
    m = fisherkit.MixtureOfFactorAnalyzers(3, 2, max_iter=10, random_state=0).fit(data)
    m.tol = 1e9
    w, means, lam, psi = m._params()
    means = means.copy()
    means[2] += 1e4
    m._set_model(w, means, lam, psi)
    st = m.sufficient_statistics(data)
    assert st.resp_sums[2] == 0.0
    m.update_from_statistics(st)
    assert not m.converged_
    assert np.all(np.abs(m.means_) < 1e3)
    m.update_from_statistics(m.sufficient_statistics(data))
    assert m.converged_


@pytest.mark.parametrize("psi_mode", ["shared", "per_component"])
def test_statistics_parts_pickle_and_validation(data, psi_mode):
    m = fisherkit.MixtureOfFactorAnalyzers(3, 2, psi_mode=psi_mode, max_iter=5, random_state=0).fit(data)
    st = m.sufficient_statistics(data)
    k, d, r = 3, 8, 2
    assert (st.n_components, st.n_features, st.n_factors, st.psi_mode) == (k, d, r, psi_mode)
    shapes = {"center": (d,), "resp_sums": (k,), "sum_e": (k, r), "sum_ee": (k, r, r), "sum_y": (k, d),
              "sum_ye": (k, d, r), "sum_yy": ((1 if psi_mode == "shared" else k), d)}
    for name, shape in shapes.items():
        assert getattr(st, name).shape == shape and getattr(st, name).dtype == np.float64, name
    # independent truth for the parts that need no factor posteriors: Σ_k n_k = N,
    # Σ_k Σ_i h_ik y_i = Σ_i y_i, Σ_k Σ_i h_ik y_i² = Σ_i y_i² (per component: summed over k)
    y = data - st.center
    assert st.resp_sums.sum() == pytest.approx(len(data), rel=1e-12)
    np.testing.assert_allclose(st.sum_y.sum(0), y.sum(0), rtol=1e-10, atol=1e-9)
    np.testing.assert_allclose(st.sum_yy.sum(0), (y**2).sum(0), rtol=1e-10)
    q, _ = dense_estep(m, data)
    np.testing.assert_allclose(st.resp_sums, q.sum(0), rtol=1e-9)
    np.testing.assert_allclose(st.sum_y, q.T @ y, rtol=1e-9, atol=1e-8)
    # e_ik = E[z | x_i, k] = M_k^-1 Λ_kᵀ Ψ^-1 (x_i - μ_k), M_k = I + Λ_kᵀ Ψ^-1 Λ_k: the factor sums
    # (sum_ee is Σ h e eᵀ; the M-step adds n_k M_k^-1 itself)
    psi = np.atleast_2d(m.psi_)
    for j in range(k):
        pj = psi[min(j, len(psi) - 1)]
        lam = m.loadings_[j]
        M = np.eye(r) + lam.T @ (lam / pj[:, None])
        e = np.linalg.solve(M, (lam / pj[:, None]).T @ (data - m.means_[j]).T).T  # (N, R)
        np.testing.assert_allclose(st.sum_e[j], q[:, j] @ e, rtol=1e-8, atol=1e-8)
        np.testing.assert_allclose(st.sum_ee[j], (q[:, j, None] * e).T @ e, rtol=1e-8, atol=1e-8)
        np.testing.assert_allclose(st.sum_ye[j], (q[:, j, None] * y).T @ e, rtol=1e-8, atol=1e-8)
    # pickle round trip: the same statistics, the same M-step
    back = pickle.loads(pickle.dumps(st))
    assert type(back) is fisherkit.MfaStatistics and back.n_rows == st.n_rows
    assert back.log_likelihood == st.log_likelihood
    for name in shapes:
        np.testing.assert_array_equal(getattr(back, name), getattr(st, name))
    a = fisherkit.clone(m)
    a._set_model(*m._params())
    b = pickle.loads(pickle.dumps(a))
    a.update_from_statistics(st)
    b.update_from_statistics(back)
    for attr in ("weights_", "means_", "loadings_", "psi_"):
        np.testing.assert_array_equal(getattr(a, attr), getattr(b, attr))
    assert "MfaStatistics(n_components=3, n_features=8" in repr(st)
    # the constructor validates its parts
    args = [psi_mode, st.n_rows, st.log_likelihood] + [getattr(st, n) for n in shapes]
    bad_shape = list(args)
    bad_shape[6] = np.zeros((k, r + 1, r))
    with pytest.raises(ValueError, match=r"sum_ee has shape \[3, 3, 2\]"):
        fisherkit.MfaStatistics(*bad_shape)
    bad_value = list(args)
    bad_value[8] = st.sum_ye.copy()
    bad_value[8][0, 0, 0] = np.inf
    with pytest.raises(ValueError, match="sum_ye has a non-finite value"):
        fisherkit.MfaStatistics(*bad_value)
    with pytest.raises(ValueError, match="n_rows must be >= 0"):
        fisherkit.MfaStatistics(*([psi_mode, -1] + args[2:]))
    with pytest.raises(ValueError, match="psi_mode"):
        fisherkit.MfaStatistics(*(["both"] + args[1:]))
    # statistics of another model shape do not merge, nor update this model
    other = fisherkit.MixtureOfFactorAnalyzers(2, 2, psi_mode=psi_mode, max_iter=2).fit(data)
    with pytest.raises(ValueError, match="mismatch"):
        st + other.sufficient_statistics(data)
    with pytest.raises(ValueError, match="statistics of 2 components in dimension 8 do not fit a model of 3"):
        m.update_from_statistics(other.sufficient_statistics(data))


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
    meta = header["__metadata__"]
    assert {k: meta[k] for k in ("kind", "format_version", "dtype", "max_iter", "n_iter")} == {
        "kind": "mfa", "format_version": "1", "dtype": "float32", "max_iter": "5", "n_iter": str(m.n_iter_)}
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
    with pytest.raises(ValueError, match='is an MFA model \\(kind "mfa"\\); a GMM'):
        fisherkit.GaussianMixture.load(path)


def test_default_tolerance_is_absolute_and_round_trips(tmp_path):
    # The data for the GMM (1 000 x 5 standard normal): the default
    # rule (absolute change 1e-3) stops well before the cap, without a
    # warning; the strict relative rule runs on; the file keeps the rule.
    import warnings

    X = np.random.default_rng(0).standard_normal((1000, 5))
    with warnings.catch_warnings():
        warnings.simplefilter("error", fisherkit.ConvergenceWarning)
        m = fisherkit.MixtureOfFactorAnalyzers(3, 2, random_state=0).fit(X)
    assert m.converged_ and m.n_iter_ < 50, m.n_iter_
    h = m.log_likelihood_history_
    assert abs(h[-1] - h[-2]) < 1e-3
    strict = fisherkit.MixtureOfFactorAnalyzers(3, 2, tol=1e-6, tol_mode="relative", random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", fisherkit.ConvergenceWarning)
        strict.fit(X)
    assert strict.n_iter_ > m.n_iter_
    strict.save(tmp_path / "m.safetensors")
    back = fisherkit.MixtureOfFactorAnalyzers.load(tmp_path / "m.safetensors")
    assert (back.tol, back.tol_mode) == (1e-6, "relative")


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
