"""fisherkit.ray: distributed EM and encoding on a local Ray cluster give the
same results as one process (the cluster: conftest.py's `ray_local`)."""

import os
import pickle
import tempfile

import numpy as np
import pytest

import fisherkit
from conftest import peer, planted


@pytest.fixture(scope="module")
def data():
    X, *_ = planted(n=6000, k=4, d=6, seed=11)
    return X


def test_distributed_em_equals_single_process(ray_local, data):
    import fisherkit.ray as fkray

    X = data
    shards = [X[:1000], ray_local.put(X[1000:3500]), X[3500:3501], X[3501:]]
    gmm = fkray.fit_gmm_distributed(shards, 4, max_iter=15, tol=0, random_state=3, init_sample_size=800)
    # the same computation in one process: the documented initial sample, the
    # initial fit on it, then the library's own EM loop on the whole data
    sizes = [len(s) if isinstance(s, np.ndarray) else 2500 for s in shards]
    shares = fkray._shares(sizes, 800)
    sample = np.concatenate([fkray.sample_rows(x, m, 3, i) for i, (x, m) in enumerate(zip(np.split(X, [1000, 3500, 3501]), shares))])
    start = fisherkit.GaussianMixture(4, max_iter=10, tol=0, random_state=3).fit(sample)
    ref = fisherkit.GaussianMixture(4, tol=0)._fit(X, 15, given=(start.weights_, start.means_, start.covariances_))
    assert gmm.n_iter_ == ref.n_iter_ == 15
    for attr in ("weights_", "means_", "covariances_"):
        np.testing.assert_allclose(getattr(gmm, attr), getattr(ref, attr), rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(gmm.log_likelihood_history_, ref.log_likelihood_history_, rtol=1e-11)
    # deterministic
    again = fkray.fit_gmm_distributed(shards, 4, max_iter=15, tol=0, random_state=3, init_sample_size=800)
    np.testing.assert_array_equal(again.means_, gmm.means_)


def test_distributed_em_converges_like_fit_with_given_start(ray_local, data):
    import fisherkit.ray as fkray

    X = data
    start = fisherkit.GaussianMixture(4, max_iter=2, random_state=0).fit(X[::7])
    shards = np.array_split(X, 5)  # more shards than CPUs
    gmm = fkray.fit_gmm_distributed(shards, 4, max_iter=200, tol=1e-8, init=start)
    ref = fisherkit.GaussianMixture(4, tol=1e-8)._fit(X, 200, given=(start.weights_, start.means_, start.covariances_))
    assert gmm.converged_ and ref.converged_ and gmm.n_iter_ == ref.n_iter_
    np.testing.assert_allclose(gmm.means_, ref.means_, rtol=1e-9, atol=1e-12)
    with pytest.raises(ValueError, match="different numbers of columns"):
        fkray.fit_gmm_distributed([X[:100], X[100:200, :3]], 2)


def test_encode_distributed_equals_transform(ray_local, data):
    import fisherkit.ray as fkray

    X = data
    gmm = fisherkit.GaussianMixture(4, max_iter=10).fit(X)
    rng = np.random.default_rng(0)
    bags = [X[rng.choice(len(X), size=int(rng.integers(1, 80)))].astype(np.float32) for _ in range(23)]
    bags[5] = ray_local.put(bags[5])
    local = [ray_local.get(b) if isinstance(b, ray_local.ObjectRef) else b for b in bags]
    mfa = fisherkit.MixtureOfFactorAnalyzers(3, 2, max_iter=5).fit(X)
    encoders = (
        fisherkit.FisherVector(gmm, parts=("prior", "mean", "var")),
        fisherkit.VLAD(gmm),
        fisherkit.MFAFisherScore(mfa, parts=("mean", "loading")),
    )
    for enc in encoders:
        out = fkray.encode_distributed(enc, bags, batch_size=4)
        np.testing.assert_array_equal(out, enc.transform(local))
    assert fkray.encode_distributed(fisherkit.FisherVector(gmm), [], batch_size=4).shape == (0, 48)


@pytest.fixture(scope="module")
def mfa_data():
    from test_mfa import planted_mfa

    return planted_mfa(n=3000, k=3, d=8, r=2, seed=4)


@pytest.mark.parametrize("psi_mode", ["shared", "per_component"])
def test_distributed_mfa_equals_single_process(ray_local, mfa_data, psi_mode):
    import fisherkit.ray as fkray

    X = mfa_data
    cuts = [700, 1900, 1901]
    pieces = np.split(X, cuts)
    shards = [pieces[0], ray_local.put(pieces[1]), pieces[2], pieces[3]]
    kw = dict(max_iter=12, tol=0, random_state=5, psi_mode=psi_mode)
    mfa = fkray.fit_mfa_distributed(shards, 3, 2, init_sample_size=600, init_max_iter=3, **kw)
    # the same computation in one process: the documented sample, the in-process
    # fit on it (k-means + PPCA + 3 EM steps), then EM steps on the whole data
    shares = fkray._shares([len(p) for p in pieces], 600)
    sample = np.concatenate([fkray.sample_rows(x, m, 5, i) for i, (x, m) in enumerate(zip(pieces, shares))])
    assert len(sample) >= 600
    ref = fisherkit.MixtureOfFactorAnalyzers(3, 2, psi_mode=psi_mode, max_iter=3, tol=0, random_state=5).fit(sample)
    lls = []
    for _ in range(12):
        st = ref.sufficient_statistics(X)
        lls.append(st.mean_log_likelihood)
        ref.update_from_statistics(st)
    assert mfa.n_iter_ == 12 and not mfa.converged_
    assert mfa.psi_.shape == ((8,) if psi_mode == "shared" else (3, 8))
    for attr in ("weights_", "means_", "loadings_", "psi_"):
        np.testing.assert_allclose(getattr(mfa, attr), getattr(ref, attr), rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(mfa.log_likelihood_history_, lls, rtol=1e-11)
    assert np.all(np.diff(lls) >= -1e-9 * np.abs(lls[1:]))  # EM never decreases the likelihood
    # with the whole data as the sample: exactly the in-process fit, max_iter = 3 + 12
    whole = fkray.fit_mfa_distributed(shards, 3, 2, init_sample_size=len(X), init_max_iter=3, **kw)
    one = fisherkit.MixtureOfFactorAnalyzers(3, 2, psi_mode=psi_mode, max_iter=15, tol=0, random_state=5).fit(X)
    for attr in ("weights_", "means_", "loadings_", "psi_"):
        np.testing.assert_allclose(getattr(whole, attr), getattr(one, attr), rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(whole.log_likelihood_history_, one.log_likelihood_history_[3:], rtol=1e-11)
    # a distributed model pickles (and is a plain estimator)
    back = pickle.loads(pickle.dumps(whole))
    np.testing.assert_array_equal(back.score_samples(X[:20]), whole.score_samples(X[:20]))
    assert back.get_params() == whole.get_params()


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_sharded_mfa_statistics_equal_batch_step(ray_local, mfa_data, dtype):
    import fisherkit.ray as fkray

    X = mfa_data.astype(dtype)
    m = fisherkit.MixtureOfFactorAnalyzers(3, 2, max_iter=4, random_state=1).fit(X)
    shards = np.array_split(X, 5)
    shards[2] = ray_local.put(shards[2])
    dist = fkray.sufficient_statistics_distributed(m, shards)
    whole = m.sufficient_statistics(X)
    assert isinstance(dist, fisherkit.MfaStatistics) and dist.n_rows == whole.n_rows == len(X)
    # The sums are float64 whatever the data's dtype; shards only regroup them, so they
    # agree to float64 rounding (1e-12, as the other statistics tests). float32 data
    # leave more: each row's float32 E-step (GEMM) may round differently when the row
    # sits elsewhere in a block, ~1e-7 of a term.
    rtol = 1e-12 if dtype == np.float64 else 1e-6
    for name in ("resp_sums", "sum_e", "sum_ee", "sum_y", "sum_ye", "sum_yy"):
        ref = getattr(whole, name)
        # Σ h e is ~0 after an M-step (cancellation): its scale is √(N Σ h e²)
        scale = np.sqrt(len(X) * np.abs(whole.sum_ee).max()) if name == "sum_e" else np.abs(ref).max()
        np.testing.assert_allclose(getattr(dist, name), ref, rtol=rtol, atol=rtol * scale, err_msg=name)
    assert dist.log_likelihood == pytest.approx(whole.log_likelihood, rel=rtol)
    a = pickle.loads(pickle.dumps(m)).update_from_statistics(dist)
    b = pickle.loads(pickle.dumps(m)).update_from_statistics(whole)
    for attr in ("weights_", "means_", "loadings_", "psi_"):
        ref = getattr(b, attr)
        # the M-step solves small (R+1)² systems: a few digits of conditioning
        tol = 1e-9 if dtype == np.float64 else 1e-4
        np.testing.assert_allclose(getattr(a, attr), ref, rtol=tol, atol=tol * np.abs(ref).max(), err_msg=attr)
    # the GMM's statistics through the same map-reduce
    g = fisherkit.GaussianMixture(3, max_iter=5).fit(X)
    gd = fkray.sufficient_statistics_distributed(g, shards)
    gw = g.sufficient_statistics(X)
    np.testing.assert_allclose(gd.sum_y, gw.sum_y, rtol=rtol, atol=rtol * np.abs(gw.sum_y).max())


def test_distributed_mfa_errors(ray_local, mfa_data):
    import fisherkit.ray as fkray

    X = mfa_data
    with pytest.raises(ValueError, match="different numbers of columns"):
        fkray.fit_mfa_distributed([X[:100], X[100:200, :5]], 2, 2)
    with pytest.raises(ValueError, match="no shards"):
        fkray.fit_mfa_distributed([], 2, 2)
    with pytest.raises(ValueError, match="psi_mode"):
        fkray.fit_mfa_distributed([X], 2, 2, psi_mode="diag")
    start = fisherkit.MixtureOfFactorAnalyzers(3, 1, max_iter=2).fit(X)
    with pytest.raises(ValueError, match="n_factors=2"):
        fkray.fit_mfa_distributed([X], 3, 2, init=start)
    # a given start: distributed EM == the in-process steps from it
    start = fisherkit.MixtureOfFactorAnalyzers(3, 2, max_iter=2).fit(X[::5])
    mfa = fkray.fit_mfa_distributed(np.array_split(X, 3), 3, 2, max_iter=300, tol=1e-7, init=start)
    ref = pickle.loads(pickle.dumps(start))
    for attr in ("log_likelihood_history_", "n_iter_", "converged_", "lower_bound_"):
        delattr(ref, attr)
    ref.set_params(tol=1e-7)
    while not getattr(ref, "converged_", False):
        ref.partial_fit(X)
    assert mfa.converged_ and mfa.n_iter_ == ref.n_iter_ < 300
    np.testing.assert_allclose(mfa.loadings_, ref.loadings_, rtol=1e-8, atol=1e-10)


@pytest.fixture(scope="module")
def scene_run(tmp_path_factory):
    """A tiny image set and the fisherkit run report on it."""
    import json
    import subprocess

    from pipeline_data import OPTIONS, cli_args, cli_binary, make_set

    root = tmp_path_factory.mktemp("rayscenes")
    train, test = make_set(root / "data")
    subprocess.run(
        [cli_binary(), "--quiet", "run", "--train", str(train), "--test", str(test),
         "--cache", str(root / "cli-cache"), "--report", str(root / "cli.json"), *cli_args(OPTIONS)],
        check=True, capture_output=True,
    )
    return train, test, json.loads((root / "cli.json").read_text())


def test_ray_pipeline_gives_the_cli_report(ray_local, scene_run, tmp_path):
    """run_pipeline on a local 2-CPU cluster = fisherkit run, same options and seed."""
    import fisherkit.ray as fkray
    from pipeline_data import OPTIONS, comparable

    train, test, cli = scene_run
    report = fkray.run_pipeline(train, test, cache=tmp_path / "ray-cache", images_per_task=5, **OPTIONS)
    assert comparable(report) == comparable(cli)
    assert any(name.startswith("cnn + encoding (ray") for name, _ in report["timings"])
    assert any(name.startswith("sample pass (ray") for name, _ in report["timings"])
    # the default path's classifier stage in Ray tasks, none of it on the driver: the term kernels
    # (cnn-global, gmm-fv:var and mfa-fs:loading at two scales: 5), then the report rows (10)
    timings = [name for name, _ in report["timings"]]
    assert "classifier (ray, 15 tasks)" in timings, timings
    assert not any(name.startswith("kernel ") for name in timings), timings


def test_ray_classifier_tasks_equal_the_single_process_primal_path(ray_local, tmp_path):
    """The primal path's report rows (CV over the C grid, final SVM) in Ray
    tasks: accuracies, confusions, chosen C and CV scores equal
    fisherkit.pipeline.run's; a second call finds every task done."""
    import fisherkit.pipeline
    import fisherkit.ray as fkray
    from pipeline_data import OPTIONS, comparable, make_set

    train, test = make_set(tmp_path / "data")
    opts = dict(OPTIONS, classifier="primal")
    single = fisherkit.pipeline.run(train, test, cache=tmp_path / "one", **opts)
    report = fkray.run_pipeline(train, test, cache=tmp_path / "ray", images_per_task=6, **opts)
    assert report["config"]["svm"]["classifier"] == "primal"
    assert comparable(report) == comparable(single)
    timings = [name for name, _ in report["timings"]]
    # two scales: per scale and all scales for each of the four encoders (cnn-global: one row)
    assert "classifier (ray, 10 tasks)" in timings, timings
    assert not any(name.startswith("primal SVM ") for name in timings), timings
    again = fkray.run_pipeline(train, test, cache=tmp_path / "ray", images_per_task=6, **opts)
    assert not any(name.startswith("classifier (ray") for name, _ in again["timings"])
    assert comparable(again) == comparable(single)
    # the whole stage on the driver
    driver = fkray.run_pipeline(
        train, test, cache=tmp_path / "drv", images_per_task=6, classifier_tasks=False, **opts
    )
    assert comparable(driver) == comparable(single)
    assert any(name.startswith("primal SVM ") for name, _ in driver["timings"])


def test_ray_pipeline_survives_a_dying_worker(ray_local, scene_run, tmp_path):
    """A task whose worker process dies is retried by Ray: the report is unchanged."""
    import fisherkit.ray as fkray
    from pipeline_data import OPTIONS, comparable

    train, test, cli = scene_run
    marker = tmp_path / "killed-once"
    os.environ["FISHERKIT_RAY_FAULT_MARKER"] = str(marker)
    try:
        got = fkray.run_pipeline(train, test, cache=tmp_path / "c2", images_per_task=6, **OPTIONS)
    finally:
        del os.environ["FISHERKIT_RAY_FAULT_MARKER"]
    assert marker.exists(), "no worker was killed"
    assert comparable(got) == comparable(cli)


def test_ray_pipeline_refuses_what_it_cannot_do(ray_local, tmp_path):
    import fisherkit.ray as fkray

    with pytest.raises(ValueError, match="no_cache"):
        fkray.run_pipeline(tmp_path, tmp_path, no_cache=True)
    with pytest.raises(ValueError, match="unknown option `sample_image`"):
        fkray.run_pipeline(tmp_path, tmp_path, sample_image=3)


# ---- em_on_statistics: the library's EM loop with the E-step in Python (no Ray needed)


def test_em_on_statistics_runs_the_librarys_loop(data):
    import fisherkit.ray as fkray

    X = data
    start = fisherkit.GaussianMixture(4, max_iter=2, random_state=1).fit(X[::5])
    given = (start.weights_, start.means_, start.covariances_)
    ref = fisherkit.GaussianMixture(4, tol=1e-7)._fit(X, 100, given=given)
    # the whole data as one shard: the in-process fit, bit for bit
    model = pickle.loads(pickle.dumps(start)).set_params(tol=1e-7)
    asked = []

    def whole(m):
        asked.append(m.means_.copy())
        return m.sufficient_statistics(X)

    out = fkray.em_on_statistics(model, whole, 100)
    assert out is model and out.converged_ and out.n_iter_ == ref.n_iter_ == len(asked)
    np.testing.assert_array_equal(out.means_, ref.means_)
    np.testing.assert_array_equal(out.log_likelihood_history_, ref.log_likelihood_history_)
    np.testing.assert_array_equal(asked[0], start.means_)  # the E-step sees the model of its iteration
    # shards merged: the same sums grouped differently
    sharded = fkray.em_on_statistics(
        pickle.loads(pickle.dumps(start)).set_params(tol=1e-7),
        lambda m: sum(m.sufficient_statistics(s) for s in np.array_split(X, 3)),
        100,
    )
    assert sharded.n_iter_ == ref.n_iter_
    np.testing.assert_allclose(sharded.means_, ref.means_, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("psi_mode", ["shared", "per_component"])
def test_em_on_statistics_mfa_equals_update_from_statistics_steps(mfa_data, psi_mode):
    import fisherkit.ray as fkray

    X = mfa_data
    start = fisherkit.MixtureOfFactorAnalyzers(3, 2, psi_mode=psi_mode, max_iter=2, tol=0, random_state=5).fit(X)
    ref = pickle.loads(pickle.dumps(start))
    for _ in range(6):
        ref.update_from_statistics(ref.sufficient_statistics(X))
    out = fkray.em_on_statistics(pickle.loads(pickle.dumps(start)), lambda m: m.sufficient_statistics(X), 6)
    assert out.n_iter_ == 6 and not out.converged_
    for attr in ("weights_", "means_", "loadings_", "psi_"):
        np.testing.assert_array_equal(getattr(out, attr), getattr(ref, attr))
    np.testing.assert_array_equal(out.log_likelihood_history_, ref.log_likelihood_history_[-6:])


def test_em_on_statistics_errors(data, mfa_data):
    import fisherkit.ray as fkray

    X = data
    g = fisherkit.GaussianMixture(4, max_iter=3, random_state=0).fit(X)
    other = fisherkit.GaussianMixture(3, max_iter=3, random_state=0).fit(X)
    with pytest.raises(ValueError, match="statistics of 3 components in dimension 6 do not fit a model of 4 components"):
        fkray.em_on_statistics(pickle.loads(pickle.dumps(g)), lambda m: other.sufficient_statistics(X), 5)
    calls = []

    def failing(m):
        calls.append(1)
        if len(calls) == 3:
            raise RuntimeError("shard 2 lost")
        return m.sufficient_statistics(X)

    with pytest.raises(RuntimeError, match="shard 2 lost"):
        fkray.em_on_statistics(pickle.loads(pickle.dumps(g)).set_params(tol=0), failing, 10)
    assert len(calls) == 3
    with pytest.raises(TypeError, match="statistics_of must return GmmStatistics, got dict"):
        fkray.em_on_statistics(pickle.loads(pickle.dumps(g)), lambda m: {}, 5)
    with pytest.raises(fisherkit.NotFittedError):
        fkray.em_on_statistics(fisherkit.GaussianMixture(4), lambda m: m.sufficient_statistics(X), 5)
    with pytest.raises(ValueError, match="max_iter"):
        fkray.em_on_statistics(pickle.loads(pickle.dumps(g)), lambda m: m.sufficient_statistics(X), 0)
    mfa = fisherkit.MixtureOfFactorAnalyzers(2, 1, max_iter=2).fit(mfa_data)
    mfb = fisherkit.MixtureOfFactorAnalyzers(2, 1, max_iter=2, random_state=9).fit(mfa_data)
    with pytest.raises(ValueError, match="different model"):
        fkray.em_on_statistics(mfa, lambda m: mfb.sufficient_statistics(mfa_data), 3)
