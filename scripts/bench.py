#!/usr/bin/env python3
"""Times fisherkit against its peers, in one run and on the same data.

    python3 scripts/bench.py [--quick] [--threads 1,2] [--sizes 128x256,500x50,500x256]
                             [--data synthetic|real|both] [--out bench-out/] [--no-mfa] [--reps R]

The GMM work runs in two regimes (`--data`, default both):

* synthetic: seeded descriptors drawn from a random model whose components all
  stay alive (a handful of non-negligible posteriors per row), where every
  implementation is bound by the E-step's GEMMs;
* real: the bundled demo images' EfficientNet-Lite0 descriptors (natural parameters,
  `fisherkit run --save-descriptors`), PCA to D = 500 learned on the training
  descriptors, a GMM of K = 50 and 256 fitted by `fisherkit gmm fit`, and
  1 000-descriptor bags of test descriptors. Here 1.5-2 components per row
  carry a posterior above 1e-6, which fisherkit's sparse accumulation exploits.

Work timed (float32 data):

* one GMM EM iteration (E-step + M-step) on N = 100 000 descriptors, from the
  same initial model, for fisherkit (`DiagGmm::sufficient_statistics` then
  `update_from_statistics`), VLFeat (`vl_gmm_cluster`, custom
  initialisation; see bench/vlfeat_bench.c for how one iteration is isolated)
  and scikit-learn (`GaussianMixture` diag: its fit-loop body `_e_step` +
  `_m_step`, i.e. without fit's initialisation and final extra E-step);
* improved Fisher vectors (mean + variance blocks, signed sqrt, L2) of
  1 000-descriptor bags: fisherkit (`FisherVector::encode_batch`), VLFeat
  (`vl_fisher_encode`, VL_FISHER_FLAG_IMPROVED), scikit-image
  (`skimage.feature.fisher_vector`, improved=True);
* one MFA EM iteration (N = 100 000, D = 500, K = 50, R = 10) and MFA Fisher
  scores (mean + loading blocks) of 1 000-descriptor bags: fisherkit against a
  plain numpy float64 implementation of docs/math.md §4–5 written below;
* the machine's f32 GEMM rate through `fisherkit::linalg::gemm`, to put the
  E-step's effective GFLOP/s in perspective.

Each measurement runs in its own subprocess with OMP_NUM_THREADS,
OPENBLAS_NUM_THREADS, MKL_NUM_THREADS and RAYON_NUM_THREADS set to the thread
count (the Python peers also call threadpoolctl); OPENBLAS_CORETYPE and
OPENBLAS_L2_SIZE are removed from the peers' environment so that numpy's
OpenBLAS picks its best kernel (reported). Times are medians of repetitions
after a warm-up. Results: a table on stdout, `results.json` and `results.md`
in --out. Correctness is checked on the way: FV of bag 0 (fisherkit vs
VLFeat and vs scikit-image), means after the EM iteration (fisherkit vs
scikit-learn and VLFeat), MFA means and scores vs the numpy reference.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
THREAD_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "RAYON_NUM_THREADS")
PEER_UNSET = ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")
DATA_VERSION = 1  # bump when the generator changes (the data cache is keyed on it)
REAL_VERSION = 2  # the same for the real-descriptor data sets

# ----------------------------------------------------------------------------
# Synthetic data (seeded)
# ----------------------------------------------------------------------------


def _sample_gmm(rng, w, mu, var, n, chunk=10000):
    """n rows drawn from the diagonal GMM (w, mu, var), float32."""
    k, d = mu.shape
    out = np.empty((n, d), np.float32)
    z = rng.choice(k, size=n, p=w)
    for a in range(0, n, chunk):
        zz = z[a : a + chunk]
        eps = rng.standard_normal((len(zz), d), dtype=np.float32)
        out[a : a + chunk] = mu[zz] + np.sqrt(var[zz]) * eps
    return out


def make_gmm_data(path: Path, d, k, n, n_bags, bag_size, seed, gap):
    """A random diagonal GMM and descriptors drawn from it.

    Per-dimension variance profile s_d ~ U(0.5, 2) shared by all components
    (times exp(U(-0.1, 0.1))), means centre + tau sqrt(s) g with
    tau^2 = gap / D: two components are then about `gap` nats apart, so a
    descriptor has a handful of non-negligible posteriors, as real ones do.
    EM starts from a perturbed model (means moved by tau/2, variances x1.3,
    uniform weights); bags are encoded with the true model.
    """
    rng = np.random.default_rng([seed, d, k, 1])
    s = rng.uniform(0.5, 2.0, d)
    centre = rng.uniform(-3.0, 3.0, d)
    tau = np.sqrt(gap / d)
    w = rng.dirichlet(np.full(k, 5.0))
    mu = centre + tau * np.sqrt(s) * rng.standard_normal((k, d))
    var = s * np.exp(rng.uniform(-0.1, 0.1, (k, d)))
    w0 = np.full(k, 1.0 / k)
    mu0 = mu + 0.5 * tau * np.sqrt(s) * rng.standard_normal((k, d))
    var0 = 1.3 * var
    x = _sample_gmm(rng, w, mu, var, n)
    bags = _sample_gmm(rng, w, mu, var, n_bags * bag_size).reshape(n_bags, bag_size, d)
    path.mkdir(parents=True, exist_ok=True)
    f32 = lambda a: np.ascontiguousarray(a, dtype=np.float32)  # noqa: E731
    for name, a in dict(x=x, bags=bags, w=w, mu=mu, var=var, w0=w0, mu0=mu0, var0=var0).items():
        np.save(path / f"{name}.npy", f32(a))


def make_mfa_data(path: Path, d, k, r, n, n_bags, bag_size, seed, gap):
    """A random MFA (shared diagonal noise) and descriptors drawn from it.

    psi = s (per-dimension profile), loadings sqrt(s_d) g sqrt(3/D) (each
    factor adds about 3x the noise variance along its direction), means as in
    make_gmm_data. EM starts from means moved by tau/2, loadings plus 30 %
    noise, psi x1.2, uniform weights.
    """
    rng = np.random.default_rng([seed, d, k, r, 2])
    s = rng.uniform(0.5, 2.0, d)
    centre = rng.uniform(-3.0, 3.0, d)
    tau = np.sqrt(gap / d)
    w = rng.dirichlet(np.full(k, 5.0))
    mu = centre + tau * np.sqrt(s) * rng.standard_normal((k, d))
    lam_scale = np.sqrt(s)[None, :, None] * np.sqrt(3.0 / d)
    lam = lam_scale * rng.standard_normal((k, d, r))
    psi = s.copy()
    w0 = np.full(k, 1.0 / k)
    mu0 = mu + 0.5 * tau * np.sqrt(s) * rng.standard_normal((k, d))
    lam0 = lam + 0.3 * lam_scale * rng.standard_normal((k, d, r))
    psi0 = 1.2 * psi

    def sample(m):
        z = rng.choice(k, size=m, p=w)
        out = np.empty((m, d), np.float32)
        for c in range(k):
            idx = np.flatnonzero(z == c)
            lat = rng.standard_normal((len(idx), r))
            eps = rng.standard_normal((len(idx), d), dtype=np.float32)
            out[idx] = mu[c] + lat @ lam[c].T + np.sqrt(psi) * eps
        return out

    x = sample(n)
    bags = sample(n_bags * bag_size).reshape(n_bags, bag_size, d)
    path.mkdir(parents=True, exist_ok=True)
    f32 = lambda a: np.ascontiguousarray(a, dtype=np.float32)  # noqa: E731
    arrays = dict(x=x, bags=bags, w=w, mu=mu, lam=lam, psi=psi[None, :], w0=w0, mu0=mu0, lam0=lam0,
                  psi0=psi0[None, :])
    for name, a in arrays.items():
        np.save(path / f"{name}.npy", f32(a))


def _read_safetensors(path: Path):
    """The tensors of a safetensors file as float arrays (F32/F64 only)."""
    buf = path.read_bytes()
    n = int.from_bytes(buf[:8], "little")
    header = json.loads(buf[8:8 + n])
    out = {}
    for name, t in header.items():
        if name == "__metadata__":
            continue
        a, b = t["data_offsets"]
        dt = {"F32": np.float32, "F64": np.float64}[t["dtype"]]
        out[name] = np.frombuffer(buf[8 + n + a:8 + n + b], dt).reshape(t["shape"])
    return out


REAL_CNN = "efficientnet-lite0"


def real_descriptors(cache: Path, fk_cli: Path):
    """EfficientNet-Lite0 descriptors (natural parameters, 1 000 dims) of the bundled demo
    images (data/fashion-mnist-demo, one 28-px scale: 7x7 = 49 cells per image), computed once
    with `fisherkit run --cnn efficientnet-lite0 --save-descriptors`. (Until REAL_VERSION 2 the
    CNN was not named and followed `fisherkit run`'s default, SqueezeNet until 2026-12-03.)
    Returns (train, test) lists of (n_i, 1000) arrays."""
    d = cache / f"demo-descriptors-{REAL_CNN}"
    if not (d / "DONE").exists():
        demo = ROOT / "data" / "fashion-mnist-demo"
        subprocess.run([str(fk_cli), "--quiet", "run", "--train", str(demo / "train"), "--test", str(demo / "test"),
                        "--scales", "28", "--cnn", REAL_CNN, "--encoders", "cnn-global", "--no-cache", "--save-descriptors", str(d),
                        "--report", str(cache / "demo-descriptors-report.json")], check=True,
                       stdout=subprocess.DEVNULL)
        (d / "DONE").write_text("ok\n")

    def bags(f):
        z = np.load(f)
        return [z[k] for k in z.files if k != "labels"]

    return bags(d / "train.npz"), bags(d / "test.npz")


def _real_pca500(cache: Path, fk_cli: Path, n, seed):
    """The demo images' EfficientNet-Lite0 descriptors, PCA to D = 500 learned on the training
    descriptors (as the pipeline does): (x = n seeded training rows, all test rows), f32."""
    train, test = real_descriptors(cache, fk_cli)
    xtr = np.concatenate(train).astype(np.float64)
    mean = xtr.mean(0)
    cov = np.cov(xtr - mean, rowvar=False)
    evals, evecs = np.linalg.eigh(cov)
    comp = evecs[:, ::-1][:, :500]
    proj = lambda a: ((a.astype(np.float64) - mean) @ comp).astype(np.float32)  # noqa: E731
    rng = np.random.default_rng(seed)
    x = proj(xtr[np.sort(rng.choice(len(xtr), size=min(n, len(xtr)), replace=False))])
    return x, proj(np.concatenate(test))


def _save_real_bags(path: Path, xte, n_bags, bag_size):
    need = n_bags * bag_size
    if len(xte) < need:
        raise SystemExit(f"the demo's test images give {len(xte)} descriptors; {n_bags} bags of {bag_size} need {need}")
    np.save(path / "bags.npy", xte[:need].reshape(n_bags, bag_size, 500))


def make_real_data(path: Path, k, n, n_bags, bag_size, seed, fk_cli, cache):
    """The same files as make_gmm_data, from real descriptors: the demo images' EfficientNet-Lite0
    descriptors, PCA to D = 500 (learned on the training descriptors, as the pipeline
    does), x = n seeded training rows, the model = a K-component GMM fitted to x by
    `fisherkit gmm fit` (seeded; EM is then timed from that model, i.e. with converged
    posteriors), bags = consecutive test descriptors cut into n_bags bags of bag_size."""
    path.mkdir(parents=True)
    x, xte = _real_pca500(cache, fk_cli, n, seed)
    np.save(path / "x.npy", x)
    _save_real_bags(path, xte, n_bags, bag_size)
    subprocess.run([str(fk_cli), "--quiet", "gmm", "fit", "--input", str(path / "x.npy"), "--components", str(k),
                    "--seed", str(seed), "--output", str(path / "gmm.safetensors")], check=True)
    t = _read_safetensors(path / "gmm.safetensors")
    for mine, theirs in (("w", "weights"), ("mu", "means"), ("var", "variances")):
        a = np.asarray(t[theirs], np.float32)
        np.save(path / f"{mine}.npy", a)
        np.save(path / f"{mine}0.npy", a)


def make_real_mfa_data(path: Path, d, k, r, n, n_bags, bag_size, seed, fk_cli, cache):
    """The same files as make_mfa_data, from real descriptors (as make_real_data): the
    model = an MFA of K components and R factors (shared psi) fitted to x by `fisherkit mfa
    fit` (seeded, at most 30 iterations); EM is timed from that model."""
    assert d == 500, "the real descriptors are PCA'd to D = 500"
    path.mkdir(parents=True)
    x, xte = _real_pca500(cache, fk_cli, n, seed)
    np.save(path / "x.npy", x)
    _save_real_bags(path, xte, n_bags, bag_size)
    subprocess.run([str(fk_cli), "--quiet", "mfa", "fit", "--input", str(path / "x.npy"), "--components", str(k),
                    "--factors", str(r), "--max-iter", "30", "--seed", str(seed),
                    "--output", str(path / "mfa.safetensors")], check=True)
    t = _read_safetensors(path / "mfa.safetensors")
    psi = np.asarray(t["psi"], np.float32).reshape(-1, 500)
    for mine, a in (("w", t["weights"]), ("mu", t["means"]), ("lam", t["loadings"]), ("psi", psi)):
        a = np.asarray(a, np.float32)
        np.save(path / f"{mine}.npy", a)
        np.save(path / f"{mine}0.npy", a)


def ensure(path: Path, maker, *args):
    """Generates the data set in `path` unless a complete one is there."""
    done = path / "DONE"
    if done.exists():
        return False
    if path.exists():
        shutil.rmtree(path)
    maker(path, *args)
    done.write_text("ok\n")
    return True


def gmm_posterior_stats(path: Path):
    """How peaked the posteriors of bag 0 are under the true model (float64)."""
    b = np.load(path / "bags.npy", mmap_mode="r")[0].astype(np.float64)
    w, mu, var = (np.load(path / f"{n}.npy").astype(np.float64) for n in ("w", "mu", "var"))
    lp = (np.log(w) - 0.5 * np.log(2 * np.pi * var).sum(1)
          - 0.5 * ((b * b) @ (1 / var).T - 2 * b @ (mu / var).T + (mu * mu / var).sum(1)))
    q = np.exp(lp - lp.max(1, keepdims=True))
    q /= q.sum(1, keepdims=True)
    return {"mean_max_posterior": float(q.max(1).mean()),
            "mean_components_above_1e-6": float((q > 1e-6).sum(1).mean())}


# ----------------------------------------------------------------------------
# numpy float64 MFA reference (docs/math.md §4–5), used as the MFA peer
# ----------------------------------------------------------------------------


class MfaRef:
    """An MFA with shared diagonal noise: weights (K), means (K, D),
    loadings (K, D, R), psi (D). Precomputes docs/math.md §4.2's small matrices:
    M_k = I + Λ_kᵀΨ⁻¹Λ_k, M_k⁻¹, β_k = M_k⁻¹Λ_kᵀΨ⁻¹, log det S_k, and the
    stacked (D, K·R) matrix [Ψ⁻¹Λ_1 … Ψ⁻¹Λ_K] the E-step multiplies by."""

    def __init__(self, w, mu, lam, psi):
        self.w, self.mu, self.lam, self.psi = w, mu, lam, psi
        k, d, r = lam.shape
        self.k, self.d, self.r = k, d, r
        self.ipsi = 1.0 / psi
        pl = lam * self.ipsi[None, :, None]  # Ψ⁻¹Λ_k (K, D, R)
        m = np.eye(r)[None] + np.einsum("kdr,kds->krs", lam, pl)
        self.minv = np.linalg.inv(m)
        self.beta = self.minv @ pl.transpose(0, 2, 1)  # (K, R, D)
        logdet_s = np.log(psi).sum() + np.linalg.slogdet(m)[1]
        self.const = np.log(w) - 0.5 * (d * np.log(2 * np.pi) + logdet_s)
        self.stack = np.ascontiguousarray(pl.transpose(1, 0, 2).reshape(d, k * r))
        self.mu_pl = np.einsum("kd,kdr->kr", mu, pl)  # μ_kᵀΨ⁻¹Λ_k
        self.mu_ipsi = mu * self.ipsi
        self.mu_q = (mu * self.mu_ipsi).sum(1)

    def posteriors(self, x):
        """h (n, K), e = E[z | x, k] (n, K, R), log p(x) (n), for x (n, D)."""
        n = x.shape[0]
        t = (x @ self.stack).reshape(n, self.k, self.r) - self.mu_pl[None]  # Λ_kᵀΨ⁻¹(x-μ_k)
        e = np.einsum("nkr,krs->nks", t, self.minv)  # M_k⁻¹ t (M_k symmetric)
        # (x-μ_k)ᵀ S_k⁻¹ (x-μ_k) by Woodbury: dᵀΨ⁻¹d − tᵀ M_k⁻¹ t
        quad = ((x * x) @ self.ipsi)[:, None] - 2 * x @ self.mu_ipsi.T + self.mu_q[None] \
            - np.einsum("nkr,nkr->nk", t, e)
        lp = self.const[None] - 0.5 * quad
        mx = lp.max(1, keepdims=True)
        ll = mx[:, 0] + np.log(np.exp(lp - mx).sum(1))
        return np.exp(lp - ll[:, None]), e, ll

    def statistics(self, x, chunk=8192, need_sxx=True):
        """EM sums n_k, s_k = Σ h e, Σ h e eᵀ, Σ h x, Σ h x eᵀ, Σ_i x_i², log-likelihood."""
        k, d, r = self.k, self.d, self.r
        st = dict(n=np.zeros(k), s=np.zeros((k, r)), see=np.zeros((k, r, r)), sx=np.zeros((k, d)),
                  sxe=np.zeros((k, d, r)), sxx=np.zeros(d), ll=0.0, count=0)
        for a in range(0, x.shape[0], chunk):
            xc = x[a : a + chunk]
            h, e, ll = self.posteriors(xc)
            he = h[:, :, None] * e
            st["n"] += h.sum(0)
            st["s"] += he.sum(0)
            for c in range(k):
                st["see"][c] += he[:, c].T @ e[:, c]
            st["sx"] += h.T @ xc
            st["sxe"] += (xc.T @ he.reshape(len(xc), k * r)).reshape(d, k, r).transpose(1, 0, 2)
            if need_sxx:
                st["sxx"] += (xc * xc).sum(0)
            st["ll"] += ll.sum()
            st["count"] += len(xc)
        return st

    def m_step(self, st, psi_floor=1e-6):
        """Ghahramani & Hinton's M-step: [Λ_k μ_k] = B_k A_k⁻¹, shared Ψ."""
        k, d, r = self.k, self.d, self.r
        lam = np.empty((k, d, r))
        mu = np.empty((k, d))
        diag = np.zeros(d)
        for c in range(k):
            a = np.empty((r + 1, r + 1))
            a[:r, :r] = st["n"][c] * self.minv[c] + st["see"][c]
            a[:r, r] = a[r, :r] = st["s"][c]
            a[r, r] = st["n"][c]
            b = np.concatenate([st["sxe"][c], st["sx"][c][:, None]], axis=1)  # (D, R+1)
            lm = np.linalg.solve(a, b.T).T  # A symmetric
            lam[c], mu[c] = lm[:, :r], lm[:, r]
            diag += (lm * b).sum(1)
        psi = np.maximum((st["sxx"] - diag) / st["count"], psi_floor)
        return MfaRef(st["n"] / st["count"], mu, lam, psi)

    def fisher_score(self, bag):
        """docs/math.md §5.2, sufficient-statistic form, divided by the bag size:
        [G_μ (K·D), G_Λ (K·D·R)] (component-major, then dimension, then factor)."""
        st = self.statistics(bag, need_sxx=False)
        n = st["n"]
        g_mu = self.ipsi * (st["sx"] - n[:, None] * self.mu - np.einsum("kdr,kr->kd", self.lam, st["s"]))
        g_lam = self.ipsi[None, :, None] * (st["sxe"] - self.mu[:, :, None] * st["s"][:, None, :]
                                            - self.lam @ st["see"]) \
            - n[:, None, None] * self.beta.transpose(0, 2, 1)
        return np.concatenate([g_mu.ravel(), g_lam.ravel()]) / bag.shape[0]


def selftest_mfa_ref(seed=0):
    """Checks MfaRef on a tiny model against dense formulas: log-densities with
    the full S_k = Λ_kΛ_kᵀ + Ψ, the Fisher score against central finite
    differences of the bag's log-likelihood, and EM not decreasing it."""
    rng = np.random.default_rng(seed)
    k, d, r, n = 3, 6, 2, 40
    w = rng.dirichlet(np.ones(k))
    mu = rng.normal(size=(k, d))
    lam = 0.7 * rng.normal(size=(k, d, r))
    psi = rng.uniform(0.5, 1.5, d)
    x = mu[rng.integers(0, k, n)] + rng.normal(size=(n, d))
    m = MfaRef(w, mu, lam, psi)

    def loglik(w, mu, lam, psi):
        tot = np.zeros((n, k))
        for c in range(k):
            s = lam[c] @ lam[c].T + np.diag(psi)
            dd = x - mu[c]
            tot[:, c] = np.log(w[c]) - 0.5 * (d * np.log(2 * np.pi) + np.linalg.slogdet(s)[1]
                                               + np.einsum("nd,nd->n", dd, np.linalg.solve(s, dd.T).T))
        mx = tot.max(1, keepdims=True)
        return (mx[:, 0] + np.log(np.exp(tot - mx).sum(1))).sum()

    _, _, ll = m.posteriors(x)
    assert abs(ll.sum() - loglik(w, mu, lam, psi)) < 1e-8 * abs(ll.sum()), "MfaRef log-density"
    g = m.fisher_score(x) * n
    num = []
    eps = 1e-6
    for which, arr in (("mu", mu), ("lam", lam)):
        for idx in np.ndindex(arr.shape):
            p_, m_ = arr.copy(), arr.copy()
            p_[idx] += eps
            m_[idx] -= eps
            args_p = (w, p_, lam, psi) if which == "mu" else (w, mu, p_, psi)
            args_m = (w, m_, lam, psi) if which == "mu" else (w, mu, m_, psi)
            num.append((loglik(*args_p) - loglik(*args_m)) / (2 * eps))
    num = np.array(num)
    err = np.linalg.norm(g - num) / np.linalg.norm(num)
    assert err < 1e-6, f"MfaRef Fisher score vs finite differences: {err:.2e}"
    m1 = m.m_step(m.statistics(x))
    assert loglik(m1.w, m1.mu, m1.lam, m1.psi) >= loglik(w, mu, lam, psi) - 1e-9, "EM decreased the likelihood"
    print(f"MfaRef self-test passed (Fisher score vs finite differences: {err:.1e})")


def improved(v):
    """Signed square root then L2 normalisation (norm floored at 1e-12)."""
    v = np.sign(v) * np.sqrt(np.abs(v))
    return v / max(np.linalg.norm(v), 1e-12)


# ----------------------------------------------------------------------------
# Workers: each peer measurement runs in its own process (`bench.py _worker …`)
# ----------------------------------------------------------------------------


def _median_times(reps, fn):
    fn()  # warm-up
    ts = []
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t)
    return ts, float(np.median(ts))


def _sk_gmm(w, mu, var):
    """A GaussianMixture (diag) holding exactly these float32 parameters, as
    fit would leave it on float32 data."""
    from sklearn.mixture import GaussianMixture

    k, d = mu.shape
    gm = GaussianMixture(n_components=k, covariance_type="diag", max_iter=1, tol=0.0,
                         weights_init=w, means_init=mu, precisions_init=1.0 / var,
                         warm_start=False)
    gm.weights_, gm.means_, gm.covariances_ = w.copy(), mu.copy(), var.copy()
    gm.precisions_cholesky_ = (1.0 / np.sqrt(var)).astype(var.dtype)
    gm.n_features_in_ = d
    gm.converged_, gm.n_iter_, gm.lower_bound_ = True, 0, -np.inf
    return gm


def worker(name, threads, args):
    from threadpoolctl import threadpool_info, threadpool_limits

    threadpool_limits(limits=threads)
    reps = int(args["reps"])
    blas = [{k: i.get(k) for k in ("internal_api", "version", "architecture", "num_threads")}
            for i in threadpool_info() if i.get("user_api") == "blas"]
    rec = {"threads": threads, "reps": reps, "blas": blas}
    p = Path(args["data"])
    if name == "blas-info":
        import sklearn
        import skimage
        rec.update(numpy=np.__version__, sklearn=sklearn.__version__, skimage=skimage.__version__)
    elif name == "sklearn-em":
        x = np.load(p / "x.npy")
        w0, mu0, var0 = (np.load(p / f"{n}.npy") for n in ("w0", "mu0", "var0"))
        e_ts, m_ts = [], []

        def once():
            gm = _sk_gmm(w0, mu0, var0)
            t = time.perf_counter()
            _, log_resp = gm._e_step(x)
            t1 = time.perf_counter()
            gm._m_step(x, log_resp)
            e_ts.append(t1 - t)
            m_ts.append(time.perf_counter() - t1)
            once.gm = gm

        ts, med = _median_times(reps, once)
        np.save(args["out_means"], np.asarray(once.gm.means_, np.float32))
        rec.update(work="gmm-em", iteration_s=med, iteration_s_all=ts,
                   e_step_s=float(np.median(e_ts[1:])), m_step_s=float(np.median(m_ts[1:])),
                   dtype=str(once.gm.means_.dtype))
    elif name == "skimage-fv":
        from skimage.feature import fisher_vector

        bags = np.load(p / "bags.npy")
        gm = _sk_gmm(*(np.load(p / f"{n}.npy") for n in ("w", "mu", "var")))
        fv0 = fisher_vector(bags[0], gm, improved=True, alpha=0.5)

        def once():
            for b in bags:
                fisher_vector(b, gm, improved=True, alpha=0.5)

        ts, med = _median_times(reps, once)
        np.save(args["out_fv0"], np.asarray(fv0, np.float32)[None])
        rec.update(work="fv", per_bag_s=med / len(bags), per_bag_s_all=[t / len(bags) for t in ts],
                   bags=len(bags), dtype=str(fv0.dtype))
    elif name == "numpy-mfa-em":
        x = np.load(p / "x.npy").astype(np.float64)
        w0, mu0, lam0, psi0 = (np.load(p / f"{n}.npy").astype(np.float64)
                               for n in ("w0", "mu0", "lam0", "psi0"))

        def once():
            m = MfaRef(w0, mu0, lam0, psi0[0])
            once.new = m.m_step(m.statistics(x))

        ts, med = _median_times(reps, once)
        np.save(args["out_means"], once.new.mu.astype(np.float32))
        np.save(args["out_psi"], once.new.psi.astype(np.float32)[None])
        rec.update(work="mfa-em", iteration_s=med, iteration_s_all=ts)
    elif name == "numpy-mfa-fs":
        bags = np.load(p / "bags.npy").astype(np.float64)
        m = MfaRef(*(np.load(p / f"{n}.npy").astype(np.float64) for n in ("w", "mu", "lam")),
                   np.load(p / "psi.npy").astype(np.float64)[0])
        fs0 = improved(m.fisher_score(bags[0]))

        def once():
            for b in bags:
                improved(m.fisher_score(b))

        ts, med = _median_times(reps, once)
        np.save(args["out_fs0"], fs0.astype(np.float32)[None])
        rec.update(work="mfa-fs", per_bag_s=med / len(bags), per_bag_s_all=[t / len(bags) for t in ts],
                   bags=len(bags))
    else:
        raise SystemExit(f"unknown worker {name}")
    print(json.dumps(rec))


# ----------------------------------------------------------------------------
# Driver
# ----------------------------------------------------------------------------


class Runner:
    def __init__(self, out: Path, verbose=True):
        self.out = out
        self.verbose = verbose
        self.errors = []

    def run(self, label, cmd, threads, peer):
        env = os.environ.copy()
        for v in THREAD_VARS:
            env[v] = str(threads)
        if peer:
            for v in PEER_UNSET:
                env.pop(v, None)
        t = time.perf_counter()
        try:
            p = subprocess.run([str(c) for c in cmd], env=env, capture_output=True, text=True)
        except OSError as e:
            self.errors.append(f"{label} ({threads} thr): {e}")
            print(f"  {label:<28} {threads} thr  FAILED: {e}", flush=True)
            return None
        wall = time.perf_counter() - t
        if p.returncode != 0:
            msg = (p.stderr.strip().splitlines() or ["(no stderr)"])[-1]
            self.errors.append(f"{label} ({threads} thr): {msg}")
            print(f"  {label:<28} {threads} thr  FAILED: {msg}", flush=True)
            return None
        rec = json.loads(p.stdout.strip().splitlines()[-1])
        if self.verbose:
            print(f"  {label:<28} {threads} thr  {fmt_val(rec)}   [{wall:.1f} s wall]", flush=True)
        return rec


def fmt_val(rec):
    if rec is None:
        return "-"
    if rec.get("work") == "gemm":
        return f"{rec['gflops']:.0f} GFLOP/s (tall {rec['tall_gflops']:.0f})"
    if rec.get("iteration_s") is not None:
        return fmt_time(rec["iteration_s"])
    if rec.get("per_bag_s") is not None:
        return fmt_time(rec["per_bag_s"]) + "/bag"
    return "-"


def fmt_time(s):
    if s is None:
        return "-"
    if s >= 1:
        return f"{s:.2f} s"
    if s >= 1e-3:
        return f"{s * 1e3:.1f} ms"
    return f"{s * 1e6:.0f} µs"


def rel_diff(a, b):
    a, b = np.asarray(a, np.float64).ravel(), np.asarray(b, np.float64).ravel()
    if a.shape != b.shape:
        return None
    return float(np.linalg.norm(a - b) / max(np.linalg.norm(b), 1e-300))


def load_opt(path):
    return np.load(path) if Path(path).exists() else None


def build(out: Path, skip_build: bool):
    target = Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target"))
    fk = target / "release" / "fisherkit-bench"
    if not skip_build:
        print("building fisherkit-bench (cargo build --release) …", flush=True)
        subprocess.run(["cargo", "build", "--release", "-q", "-p", "fisherkit-bench"], cwd=ROOT, check=True)
    vl = out / "vlfeat_bench"
    cc = ["gcc", "-O2", "-o", str(vl), str(ROOT / "bench" / "vlfeat_bench.c"), "-lvl"]
    p = subprocess.run(cc, capture_output=True, text=True)
    if p.returncode != 0:
        print("VLFeat harness did not compile (is libvlfeat-dev installed?):\n" + p.stderr, flush=True)
        vl = None
    return fk, vl


def ratio(peer, ours):
    if peer is None or ours is None or ours <= 0:
        return None
    return peer / ours


class Bench(SimpleNamespace):
    """What main's steps share: the options (a), the sizes, the folders, the start time and load (from plan),
    then the binaries (fk, vl, fk_cli), the Runner (r), the worker command (me) and the results (from prepare)."""

    def py(self, name, thr, **kw):
        """Runs the Python peer worker `name` at thr threads, in the peers' environment."""
        kw.setdefault("reps", self.reps)
        return self.r.run(name, self.me + [name, thr, json.dumps({k: str(v) for k, v in kw.items()})], thr,
                          peer=True)


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "_worker":
        return worker(sys.argv[2], int(sys.argv[3]), json.loads(sys.argv[4]))
    a = parse_args()
    if a.selftest:
        return selftest_mfa_ref()

    bench = plan(a)
    prepare(bench)
    measure_gemm(bench)
    data_sets = gmm_data_sets(bench)
    if data_sets:
        measure_gmm(bench, data_sets)
    if not a.no_mfa:
        print()
        selftest_mfa_ref()
        measure_mfa(bench, mfa_data_sets(bench))
    write_results(bench)


def parse_args():
    """The command line."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true",
                    help="N = 20 000, sizes 500x50,500x256, fewer bags (about 2 minutes)")
    ap.add_argument("--threads", default="1,2", help="comma list of thread counts (default 1,2)")
    ap.add_argument("--sizes", default=None, help="comma list of DxK (default 128x256,500x50,500x256)")
    ap.add_argument("--out", default="bench-out", help="output folder (data cache, results)")
    ap.add_argument("--n", type=int, default=None, help="EM training descriptors (default 100000)")
    ap.add_argument("--bags", type=int, default=None, help="bags per encoding run (default 20)")
    ap.add_argument("--bag-size", type=int, default=1000)
    ap.add_argument("--reps", type=int, default=None, help="timed repetitions per measurement (default 3)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--gap", type=float, default=20.0,
                    help="typical separation of two components in nats (default 20)")
    ap.add_argument("--data", choices=("synthetic", "real", "both"), default="both",
                    help="GMM data: synthetic (all components alive), real (the demo images' EfficientNet-Lite0 "
                         "descriptors, PCA 500, 1.5-2 components per row above 1e-6) or both (default)")
    ap.add_argument("--no-mfa", action="store_true", help="skip the MFA part")
    ap.add_argument("--mfa-only", action="store_true", help="only the MFA part (and the GEMM rate)")
    ap.add_argument("--no-build", action="store_true", help="do not run cargo build")
    ap.add_argument("--selftest", action="store_true",
                    help="only check the numpy MFA reference against dense formulas and finite differences")
    return ap.parse_args()


def plan(a):
    """The sizes from the options, the output folders, the start time and load."""
    quick = a.quick
    n = a.n or (20_000 if quick else 100_000)
    n_bags = a.bags or (8 if quick else 20)
    reps = a.reps or 3
    sizes_s = a.sizes or ("500x50,500x256" if quick else "128x256,500x50,500x256")
    sizes = [tuple(int(v) for v in s.lower().split("x")) for s in sizes_s.split(",") if s]
    threads = [int(t) for t in a.threads.split(",") if t]
    mfa_dims = (500, 50, 10)
    mfa_bags = max(4, n_bags // 2)
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    work = out / "work"
    work.mkdir(exist_ok=True)
    t_start = time.perf_counter()
    load0 = os.getloadavg()
    return Bench(a=a, quick=quick, n=n, n_bags=n_bags, reps=reps, sizes=sizes, threads=threads, mfa_dims=mfa_dims,
                 mfa_bags=mfa_bags, out=out, work=work, t_start=t_start, load0=load0)


def prepare(bench):
    """The header, the builds, the runner, the peers' versions and the results skeleton."""
    a, quick, n, n_bags, reps, out = bench.a, bench.quick, bench.n, bench.n_bags, bench.reps, bench.out
    sizes, threads, mfa_dims, mfa_bags = bench.sizes, bench.threads, bench.mfa_dims, bench.mfa_bags
    load0 = bench.load0
    print(f"fisherkit bench — {time.strftime('%Y-%m-%d %H:%M:%S %Z')}, {platform.processor() or platform.machine()},"
          f" {os.cpu_count()} CPUs, load average {load0[0]:.2f} {load0[1]:.2f} {load0[2]:.2f}")
    if load0[0] > 0.5:
        print("  warning: the machine is busy; timings (2-thread ones especially) will be noisy")
    fk, vl = build(out, a.no_build)
    fk_cli = fk.parent / "fisherkit"
    if a.data != "synthetic" and not a.no_build:
        subprocess.run(["cargo", "build", "--release", "-q", "-p", "fisherkit-cli"], cwd=ROOT, check=True)
    r = Runner(out)
    me = [sys.executable, str(Path(__file__).resolve()), "_worker"]
    bench.fk, bench.vl, bench.fk_cli, bench.r, bench.me = fk, vl, fk_cli, r, me
    py = bench.py

    info = py("blas-info", 1, data=".")
    if info:
        print(f"  numpy {info['numpy']}, scikit-learn {info['sklearn']}, scikit-image {info['skimage']}; "
              f"BLAS: " + "; ".join(f"{b['internal_api']} {b['version']} kernel {b['architecture']}"
                                    for b in info["blas"]))
    results = {"config": dict(n=n, bags=n_bags, bag_size=a.bag_size, reps=reps, sizes=sizes, threads=threads,
                              seed=a.seed, gap=a.gap, quick=quick, mfa=None if a.no_mfa else mfa_dims,
                              mfa_bags=mfa_bags),
               "machine": dict(cpus=os.cpu_count(), load_before=load0, platform=platform.platform(),
                               peers=info),
               "gemm": {}, "gemm_shape": {}, "gmm": [], "mfa": [], "checks": {}}
    bench.results = results


def measure_gemm(bench):
    """fisherkit's f32 GEMM rate, best and on each E-step's own shape."""
    a, r, fk, reps = bench.a, bench.r, bench.fk, bench.reps
    sizes, threads, results = bench.sizes, bench.threads, bench.results
    print("\nf32 GEMM rate (fisherkit::linalg::gemm, faer):", flush=True)
    for t in threads:
        results["gemm"][t] = r.run("gemm", [fk, "gemm", "--reps", reps], t, peer=False)
    # The E-step's own product shape, (16384 × 2D)·(2D × K): at small K faer's rate on it is
    # well below the best one, and no E-step can beat the GEMM it is made of.
    if not a.mfa_only:
        for (d, k) in sorted(set(sizes) | ({(500, 50), (500, 256)} if a.data in ("real", "both") else set())):
            for t in threads:
                rec = r.run(f"gemm shape D={d} K={k}", [fk, "gemm", "--reps", reps, "--d", d, "--k", k], t,
                            peer=False)
                results["gemm_shape"][f"{d}x{k}_t{t}"] = rec


def gmm_data_sets(bench):
    """The GMM data sets to measure: (kind, D, K, folder, (maker, *its arguments))."""
    a, n, n_bags, sizes, out, fk_cli = bench.a, bench.n, bench.n_bags, bench.sizes, bench.out, bench.fk_cli
    data_sets = []
    if not a.mfa_only and a.data in ("synthetic", "both"):
        for (d, k) in sizes:
            path = out / "data" / f"gmm_d{d}_k{k}_n{n}_b{n_bags}x{a.bag_size}_s{a.seed}_g{a.gap:g}_v{DATA_VERSION}"
            data_sets.append(("synthetic", d, k, path, (make_gmm_data, d, k, n, n_bags, a.bag_size, a.seed, a.gap)))
    if not a.mfa_only and a.data in ("real", "both"):
        for k in (50, 256):
            path = out / "data" / f"real_d500_k{k}_n{n}_b{n_bags}x{a.bag_size}_s{a.seed}_v{REAL_VERSION}"
            data_sets.append(("real", 500, k, path,
                              (make_real_data, k, n, n_bags, a.bag_size, a.seed, fk_cli, out / "data")))
    return data_sets


def measure_gmm(bench, data_sets):
    """GMM EM iteration and FV per bag, fisherkit vs VLFeat vs scikit-learn/scikit-image, with the checks."""
    a, n, n_bags, reps, threads, work = bench.a, bench.n, bench.n_bags, bench.reps, bench.threads, bench.work
    r, fk, vl, py, results = bench.r, bench.fk, bench.vl, bench.py, bench.results
    for (kind, d, k, path, maker) in data_sets:
        tag = f"{kind}_d{d}_k{k}"
        t = time.perf_counter()
        if ensure(path, *maker):
            print(f"\ngenerated {path.name} in {time.perf_counter() - t:.1f} s")
        ps = gmm_posterior_stats(path)
        print(f"\nGMM ({kind} descriptors) D={d} K={k}: N={n}, {n_bags} bags of {a.bag_size}; posteriors of bag 0: mean max "
              f"{ps['mean_max_posterior']:.2f}, {ps['mean_components_above_1e-6']:.1f} components > 1e-6",
              flush=True)
        model0 = ["--weights", path / "w0.npy", "--means", path / "mu0.npy", "--variances", path / "var0.npy"]
        model = ["--weights", path / "w.npy", "--means", path / "mu.npy", "--variances", path / "var.npy"]
        for thr in threads:
            f = lambda name: work / f"{name}_{tag}_t{thr}.npy"  # noqa: E731
            row = dict(data=kind, d=d, k=k, threads=thr, posteriors=ps)
            row["fk_em"] = r.run("fisherkit EM iteration", [fk, "gmm-em", "--reps", reps, "--x", path / "x.npy",
                                 *model0, "--out-means", f("fk_means")], thr, peer=False)
            if vl:
                row["vl_em"] = r.run("VLFeat EM iteration", [vl, "em", path / "x.npy", path / "w0.npy",
                                     path / "mu0.npy", path / "var0.npy", thr, reps, f("vl_means")], thr,
                                     peer=True)
            row["sk_em"] = py("sklearn-em", thr, data=path, out_means=f("sk_means"))
            row["fk_fv"] = r.run("fisherkit FV", [fk, "fv", "--reps", reps, "--bags", path / "bags.npy", *model,
                                 "--out-fv0", f("fk_fv0")], thr, peer=False)
            if vl:
                row["vl_fv"] = r.run("VLFeat FV", [vl, "fv", path / "bags.npy", path / "w.npy", path / "mu.npy",
                                     path / "var.npy", thr, reps, f("vl_fv0")], thr, peer=True)
            row["sk_fv"] = py("skimage-fv", thr, data=path, out_fv0=f("sk_fv0"))
            row["checks"] = gmm_checks(f, path, k, d)
            row["checks"]["FV raw, fisherkit f32 vs f64 (worst of 4 bags)"] = _get(row.get("fk_fv"),
                                                                                    "f32_vs_f64_raw_rel")
            for name, v in row["checks"].items():
                if v is not None:
                    print(f"  check {name}: relative difference {v:.2e}")
            results["gmm"].append(row)


def mfa_data_sets(bench):
    """The MFA data sets to measure: (kind, folder, (maker, *its arguments))."""
    a, n, mfa_bags, out, fk_cli = bench.a, bench.n, bench.mfa_bags, bench.out, bench.fk_cli
    d, k, rr = bench.mfa_dims
    tag = f"d{d}_k{k}_r{rr}"
    mfa_sets = []
    if a.data in ("synthetic", "both"):
        path = out / "data" / f"mfa_{tag}_n{n}_b{mfa_bags}x{a.bag_size}_s{a.seed}_g{a.gap:g}_v{DATA_VERSION}"
        mfa_sets.append(("synthetic", path, (make_mfa_data, d, k, rr, n, mfa_bags, a.bag_size, a.seed, a.gap)))
    if a.data in ("real", "both"):
        path = out / "data" / f"real_mfa_{tag}_n{n}_b{mfa_bags}x{a.bag_size}_s{a.seed}_v{REAL_VERSION}"
        mfa_sets.append(("real", path, (make_real_mfa_data, d, k, rr, n, mfa_bags, a.bag_size, a.seed, fk_cli,
                                        out / "data")))
    return mfa_sets


def measure_mfa(bench, mfa_sets):
    """MFA EM iteration and MFA-FS per bag, fisherkit vs the numpy reference, with the checks."""
    a, n, mfa_bags, reps, threads, work = bench.a, bench.n, bench.mfa_bags, bench.reps, bench.threads, bench.work
    r, fk, py, results = bench.r, bench.fk, bench.py, bench.results
    d, k, rr = bench.mfa_dims
    tag = f"d{d}_k{k}_r{rr}"
    for (kind, path, maker) in mfa_sets:
        t = time.perf_counter()
        if ensure(path, *maker):
            print(f"\ngenerated {path.name} in {time.perf_counter() - t:.1f} s")
        print(f"\nMFA ({kind} descriptors) D={d} K={k} R={rr}: N={n}, {mfa_bags} bags of {a.bag_size}",
              flush=True)
        m0 = ["--weights", path / "w0.npy", "--means", path / "mu0.npy", "--loadings", path / "lam0.npy",
              "--psi", path / "psi0.npy"]
        m1 = ["--weights", path / "w.npy", "--means", path / "mu.npy", "--loadings", path / "lam.npy",
              "--psi", path / "psi.npy"]
        for thr in threads:
            f = lambda name: work / f"{name}_{kind}_{tag}_t{thr}.npy"  # noqa: E731
            row = dict(data=kind, d=d, k=k, r=rr, threads=thr)
            row["fk_em"] = r.run("fisherkit MFA EM iteration", [fk, "mfa-em", "--reps", reps, "--x",
                                 path / "x.npy", *m0, "--out-means", f("fk_mfa_means"), "--out-psi",
                                 f("fk_mfa_psi")], thr, peer=False)
            row["np_em"] = py("numpy-mfa-em", thr, data=path, out_means=f("np_mfa_means"),
                              out_psi=f("np_mfa_psi"))
            row["fk_fs"] = r.run("fisherkit MFA-FS", [fk, "mfa-fs", "--reps", reps, "--bags", path / "bags.npy",
                                 *m1, "--out-fs0", f("fk_fs0")], thr, peer=False)
            row["np_fs"] = py("numpy-mfa-fs", thr, data=path, out_fs0=f("np_fs0"))
            # the kernel's large products alone (same shapes, random data): the floor of the
            # dense path, which the synthetic data take (real descriptors take the sparse one)
            row["fk_products"] = None if kind != "synthetic" else r.run("fisherkit MFA products alone", [
                fk, "mfa-products", "--reps", reps, "--n", n, "--bag", a.bag_size, "--d", d, "--k", k,
                "--r", rr], thr, peer=False)
            row["checks"] = {
                "MFA means after 1 EM iteration, fisherkit vs numpy": rel_diff_files(f("fk_mfa_means"),
                                                                                    f("np_mfa_means")),
                "MFA psi after 1 EM iteration, fisherkit vs numpy": rel_diff_files(f("fk_mfa_psi"),
                                                                                  f("np_mfa_psi")),
                "MFA-FS bag 0, fisherkit vs numpy": rel_diff_files(f("fk_fs0"), f("np_fs0")),
                "MFA-FS raw scores, fisherkit f32 vs f64 (worst of 4 bags)":
                    _get(row.get("fk_fs"), "f32_vs_f64_raw_rel"),
            }
            for name, v in row["checks"].items():
                if v is not None:
                    print(f"  check {name}: relative difference {v:.2e}")
            results["mfa"].append(row)


def write_results(bench):
    """results.json and results.md in --out, the table and the wall time on stdout."""
    r, out, results, t_start, load0 = bench.r, bench.out, bench.results, bench.t_start, bench.load0
    load1 = os.getloadavg()
    results["machine"]["load_after"] = load1
    results["wall_s"] = time.perf_counter() - t_start
    results["errors"] = r.errors
    md = report(results)
    (out / "results.json").write_text(json.dumps(results, indent=1, default=str) + "\n")
    (out / "results.md").write_text(md)
    print("\n" + md)
    print(f"wall time {results['wall_s']:.0f} s; load average before {load0[0]:.2f}, after {load1[0]:.2f}; "
          f"written {out / 'results.json'} and {out / 'results.md'}")


def rel_diff_files(a, b):
    x, y = load_opt(a), load_opt(b)
    if x is None or y is None:
        return None
    return rel_diff(x, y)


def exact_fv(x, w, mu, var):
    """The improved Fisher vector (mean + variance blocks in VLFeat's layout,
    signed square root, L2) of the bag `x` (M, D) under the GMM (w, mu, var),
    in float64 and in the centred direct form, component by component: no
    expanded-square cancellation, so it is exact to float64 rounding. The
    reference the float32 encoders are measured against."""
    x = x.astype(np.float64)
    w, mu, var = (a.astype(np.float64) for a in (w, mu, var))
    m, (k, d) = x.shape[0], mu.shape
    lj = np.empty((m, k))
    for j in range(k):
        z2 = (x - mu[j]) ** 2 / var[j]
        lj[:, j] = np.log(w[j]) - 0.5 * (np.log(2 * np.pi * var[j]).sum() + z2.sum(axis=1))
    q = np.exp(lj - lj.max(axis=1, keepdims=True))
    q /= q.sum(axis=1, keepdims=True)
    u, v = np.empty((k, d)), np.empty((k, d))
    for j in range(k):
        z = (x - mu[j]) / np.sqrt(var[j])
        u[j] = q[:, j] @ z / (m * np.sqrt(w[j]))
        v[j] = q[:, j] @ (z * z - 1.0) / (m * np.sqrt(2.0 * w[j]))
    fv = np.concatenate([u.ravel(), v.ravel()])
    fv = np.sign(fv) * np.sqrt(np.abs(fv))
    return fv / np.linalg.norm(fv)


def gmm_checks(f, path, k, d):
    """FV of bag 0: fisherkit vs VLFeat (same layout) and vs scikit-image
    (drop its prior block, flip its variance block, renormalise), and each
    (all float32) vs the exact float64 FV (`exact_fv`); means after one EM
    iteration: fisherkit vs scikit-learn and vs VLFeat."""
    checks = {}
    fk_fv, vl_fv, sk_fv = (load_opt(f(n)) for n in ("fk_fv0", "vl_fv0", "sk_fv0"))
    exact = exact_fv(np.load(path / "bags.npy", mmap_mode="r")[0], *(np.load(path / f"{n}.npy") for n in ("w", "mu", "var")))
    for name, fv in (("fisherkit", fk_fv), ("VLFeat", vl_fv)):
        checks[f"FV bag 0, {name} f32 vs exact f64"] = None if fv is None else rel_diff(fv, exact)
    checks["FV bag 0, fisherkit vs VLFeat"] = rel_diff(fk_fv, vl_fv) if fk_fv is not None and vl_fv is not None \
        else None
    if fk_fv is not None and sk_fv is not None:
        s = sk_fv.ravel().astype(np.float64)
        conv = np.concatenate([s[k : k + k * d], -s[k + k * d :]])
        conv /= np.linalg.norm(conv)
        checks["FV bag 0, fisherkit vs scikit-image"] = rel_diff(fk_fv, conv)
        checks["FV bag 0, scikit-image f32 vs exact f64"] = rel_diff(conv, exact)
    else:
        checks["FV bag 0, fisherkit vs scikit-image"] = None
    if vl_fv is not None and sk_fv is not None:  # the two peers agree: validates both harnesses
        s = sk_fv.ravel().astype(np.float64)
        conv = np.concatenate([s[k : k + k * d], -s[k + k * d :]])
        checks["FV bag 0, VLFeat vs scikit-image"] = rel_diff(vl_fv, conv / np.linalg.norm(conv))
    fk_m, sk_m, vl_m = (load_opt(f(n)) for n in ("fk_means", "sk_means", "vl_means"))
    mu0 = np.load(path / "mu0.npy").astype(np.float64)
    for name, a, b in (("fisherkit vs scikit-learn", fk_m, sk_m), ("fisherkit vs VLFeat", fk_m, vl_m),
                       ("VLFeat vs scikit-learn", vl_m, sk_m)):
        key = f"EM means, {name} (relative to the EM step)"
        if a is None or b is None:
            checks[key] = None
        else:
            checks[key] = float(np.linalg.norm(a - b) / np.linalg.norm(b.astype(np.float64) - mu0))
    return checks


def _get(rec, key):
    return None if rec is None else rec.get(key)


def report(res):
    """Markdown: the main table, thread scaling, the targets, the checks."""
    lines = []
    gemm = {t: _get(v, "gflops") for t, v in res["gemm"].items()}
    shape = {key: _get(v, "tall_gflops") for key, v in res.get("gemm_shape", {}).items()}
    tgt = _report_table(res, lines, gemm, shape)
    _report_products(res, lines, gemm)
    _report_scaling(res, lines, tgt)
    _report_targets(res, lines, tgt)
    _report_checks(res, lines)
    _report_machine(res, lines)
    return "\n".join(lines) + "\n"


def _report_table(res, lines, gemm, shape):
    """The main table; returns the times by row key: (data, D, K, threads) or ("mfa", data, threads)."""
    def gemm_col(d, k, t):
        """The best GEMM rate, and faer's rate on the E-step's own (16384 × 2D)·(2D × K) shape."""
        own = shape.get(f"{d}x{k}_t{t}")
        return fmt_num(gemm.get(t)) + (f" ({fmt_num(own)} this shape)" if own else "")

    c = res["config"]
    lines.append(f"### fisherkit benchmark (N = {c['n']}, bags of {c['bag_size']} descriptors, float32, "
                 f"median of {c['reps']})\n")
    lines.append("| work | data | D/K | thr | fisherkit | VLFeat | sklearn / skimage | × VLFeat | × sk | "
                 "fisherkit GFLOP/s | GEMM GFLOP/s |")
    lines.append("|---|---|---|---|---|---|---|---|---|---|---|")
    tgt = {}
    for row in res["gmm"]:
        d, k, t = row["d"], row["k"], row["threads"]
        data = row.get("data", "synthetic")
        fk_it = _get(row.get("fk_em"), "iteration_s")
        vl_it = _get(row.get("vl_em"), "iteration_s")
        sk_it = _get(row.get("sk_em"), "iteration_s")
        st = _get(row.get("fk_em"), "stats_s")
        gf = 8.0 * c["n"] * d * k / st / 1e9 if st else _get(row.get("fk_em"), "posteriors_gflops")
        lines.append(f"| EM iteration | {data} | {d}/{k} | {t} | {fmt_time(fk_it)} | {fmt_time(vl_it)} | {fmt_time(sk_it)} | "
                     f"{fmt_ratio(ratio(vl_it, fk_it))} | {fmt_ratio(ratio(sk_it, fk_it))} | {fmt_num(gf)} (E) | "
                     f"{gemm_col(d, k, t)} |")
        fk_fv = _get(row.get("fk_fv"), "per_bag_s")
        vl_fv = _get(row.get("vl_fv"), "per_bag_s")
        sk_fv = _get(row.get("sk_fv"), "per_bag_s")
        gf = 8.0 * c["bag_size"] * d * k / fk_fv / 1e9 if fk_fv else None
        lines.append(f"| FV per bag | {data} | {d}/{k} | {t} | {fmt_time(fk_fv)} | {fmt_time(vl_fv)} | {fmt_time(sk_fv)} | "
                     f"{fmt_ratio(ratio(vl_fv, fk_fv))} | {fmt_ratio(ratio(sk_fv, fk_fv))} | {fmt_num(gf)} | "
                     f"{gemm_col(d, k, t)} |")
        tgt[(data, d, k, t)] = dict(em=(fk_it, vl_it, sk_it), fv=(fk_fv, vl_fv, sk_fv))
    for row in res["mfa"]:
        d, k, rr, t = row["d"], row["k"], row["r"], row["threads"]
        data = row.get("data", "synthetic")
        fk_it = _get(row.get("fk_em"), "iteration_s")
        np_it = _get(row.get("np_em"), "iteration_s")
        fk_fs = _get(row.get("fk_fs"), "per_bag_s")
        np_fs = _get(row.get("np_fs"), "per_bag_s")
        gfe = 4.0 * c["n"] * d * k * rr / fk_it / 1e9 if fk_it else None
        gff = 4.0 * c["bag_size"] * d * k * rr / fk_fs / 1e9 if fk_fs else None
        lines.append(f"| MFA EM iteration | {data} | {d}/{k}/R{rr} | {t} | {fmt_time(fk_it)} | – | {fmt_time(np_it)} (numpy f64) "
                     f"| – | {fmt_ratio(ratio(np_it, fk_it))} | {fmt_num(gfe)} | {fmt_num(gemm.get(t))} |")
        lines.append(f"| MFA-FS per bag | {data} | {d}/{k}/R{rr} | {t} | {fmt_time(fk_fs)} | – | {fmt_time(np_fs)} (numpy f64) "
                     f"| – | {fmt_ratio(ratio(np_fs, fk_fs))} | {fmt_num(gff)} | {fmt_num(gemm.get(t))} |")
        tgt[("mfa", data, t)] = dict(em=(fk_it, np_it), fs=(fk_fs, np_fs))
    lines.append("")
    return tgt


def _report_products(res, lines, gemm):
    """The MFA products-alone paragraphs, the GFLOP/s legend and the dirty-AVX-state warnings."""
    for row in res["mfa"]:
        prod = row.get("fk_products")
        em_p, fs_p = _get(prod, "em_products_s"), _get(prod, "fs_products_s")
        fk_it, fk_fs = _get(row.get("fk_em"), "iteration_s"), _get(row.get("fk_fs"), "per_bag_s")
        g = gemm.get(row["threads"])
        if em_p and fs_p and fk_it and fk_fs and g:
            lines.append(
                f"MFA products alone ({row.get('data', 'synthetic')}, {row['threads']} thr; "
                f"`fisherkit-bench mfa-products`): EM {fmt_time(em_p)}, Fisher score {fmt_time(fs_p)} per bag; "
                f"the EM iteration takes {fk_it / em_p:.2f}× and the Fisher score {fk_fs / fs_p:.2f}× their time. "
                f"On the 4·N·D·K·R count the products alone reach "
                f"{100 * _get(prod, 'em_counted_gflops') / g:.0f} % (EM) and "
                f"{100 * _get(prod, 'fs_counted_gflops') / g:.0f} % (Fisher score) of the GEMM rate: they do "
                f"4·N·D·K·(R + 2) and 2·N·D·K·(2R + 3) flops (docs/math.md §5.2).")
    lines.append("")
    lines.append("GFLOP/s: GMM EM = 8·N·D·K / time of the E-step statistics (two (N×2D)·(2D×K)-sized products); "
                 "FV = 8·n·D·K per bag; MFA = 4·N·D·K·R per iteration or bag. GEMM = best of a 2048³ and a "
                 "(16384×1000)·(1000×256) f32 product through fisherkit::linalg::gemm; \"this shape\" = the same "
                 "tall product with the row's D and K, (16384×2D)·(2D×K), the GEMM the E-step is made of.\n")

    for t, g in res["gemm"].items():
        if g and g.get("scalar_exp_ns_after_gemm") and g.get("scalar_exp_ns_before_gemm"):
            slow = g["scalar_exp_ns_after_gemm"] / g["scalar_exp_ns_before_gemm"]
            if slow > 3:
                lines.append(f"**Warning** ({t} thr): scalar code right after `fisherkit::linalg::gemm` runs {slow:.0f}× "
                             f"slower ({g['scalar_exp_ns_before_gemm']:.1f} → {g['scalar_exp_ns_after_gemm']:.1f} "
                             "ns per exp): the GEMM kernel leaves the AVX upper register state dirty (no "
                             "`vzeroupper`), so every SSE instruction after it pays a transition penalty.\n")


def _report_scaling(res, lines, tgt):
    """fisherkit's 2-thread speed-ups, when both 1 and 2 threads were measured."""
    # thread scaling
    ths = res["config"]["threads"]
    if 1 in ths and 2 in ths:
        lines.append("**2-thread speed-up of fisherkit** (time at 1 thread / time at 2):\n")
        for key, vals in sorted(((kk, v) for kk, v in tgt.items() if kk[-1] == 1), key=lambda kv: str(kv[0])):
            two = tgt.get(key[:-1] + (2,))
            if not two:
                continue
            parts = []
            for w, v in vals.items():
                parts.append(f"{w} {fmt_ratio(ratio(v[0], two[w][0]))}")
            name = f"MFA {key[1]}" if key[0] == "mfa" else f"{key[0]} D/K {key[1]}/{key[2]}"
            lines.append(f"- {name}: " + ", ".join(parts))
        lines.append("")


def _report_targets(res, lines, tgt):
    """The speed targets at D = 500, K = 256 (and real K = 50, 256), recorded in res["targets"]."""
    # targets at D = 500, K = 256
    lines.append("**Targets (D = 500, 1 thread)**:\n")
    one, two = tgt.get(("synthetic", 500, 256, 1)), tgt.get(("synthetic", 500, 256, 2))
    res["targets"] = []

    def target(name, value, need):
        ok = None if value is None else value >= need
        res["targets"].append(dict(target=name, value=value, need=need, met=ok))
        mark = "n/a" if ok is None else ("met" if ok else "NOT met")
        lines.append(f"- {name}: {fmt_ratio(value)} (need ≥ {need}×) — {mark}")

    if one:
        target("FV vs VLFeat (synthetic, K = 256)", ratio(one["fv"][1], one["fv"][0]), 5)
        target("FV vs scikit-image (synthetic, K = 256)", ratio(one["fv"][2], one["fv"][0]), 4)
        target("EM iteration vs VLFeat", ratio(one["em"][1], one["em"][0]), 3)
        target("EM iteration vs scikit-learn", ratio(one["em"][2], one["em"][0]), 2.5)
    if one and two:
        target("FV, 2 threads vs 1", ratio(one["fv"][0], two["fv"][0]), 1.7)
        target("EM iteration, 2 threads vs 1", ratio(one["em"][0], two["em"][0]), 1.7)
    if not one:
        lines.append("- (synthetic D = 500, K = 256 not measured)")
    for k, need in ((50, 4), (256, 5)):
        real = tgt.get(("real", 500, k, 1))
        if real:
            target(f"FV vs scikit-image, real descriptors, K = {k}", ratio(real["fv"][2], real["fv"][0]), need)
        else:
            lines.append(f"- (real descriptors, K = {k} not measured)")
    lines.append("")


def _report_checks(res, lines):
    """The correctness checks of every row (recorded in res["checks"]) and the failed measurements."""
    checks = {}
    for row in res["gmm"]:
        for name, v in row.get("checks", {}).items():
            checks[f"{name} [{row.get('data', 'synthetic')} D/K {row['d']}/{row['k']}, {row['threads']} thr]"] = v
    for row in res["mfa"]:
        for name, v in row.get("checks", {}).items():
            checks[f"{name} [{row.get('data', 'synthetic')}, {row['threads']} thr]"] = v
    res["checks"] = checks
    if checks:
        lines.append("**Correctness checks** (relative L2 differences):\n")
        for name, v in checks.items():
            lines.append(f"- {name}: {'-' if v is None else f'{v:.2e}'}")
        lines.append("")
    if res.get("errors"):
        lines.append("**Failed measurements**:\n")
        lines += [f"- {e}" for e in res["errors"]]
        lines.append("")


def _report_machine(res, lines):
    """The machine, its load, the wall time and the peers' versions."""
    m = res["machine"]
    lines.append(f"Machine: {m['platform']}, {m['cpus']} CPUs, load average before {m['load_before'][0]:.2f}, "
                 f"after {m['load_after'][0]:.2f}; wall time {res['wall_s']:.0f} s.")
    if m.get("peers"):
        p = m["peers"]
        lines.append(f"Peers: numpy {p['numpy']}, scikit-learn {p['sklearn']}, scikit-image {p['skimage']}, "
                     + ", ".join(f"{b['internal_api']} {b['version']} ({b['architecture']} kernel)" for b in p["blas"])
                     + ", VLFeat (Debian libvl).")


def fmt_ratio(v):
    return "-" if v is None else f"{v:.1f}×"


def fmt_num(v):
    return "-" if v is None else f"{v:.0f}"


if __name__ == "__main__":
    main()
