"""Batched multivariate normal CDF (Genz SOV + randomised QMC) and the multivariate sigmoid."""
import warnings

import numpy as np
import pytest
import torch
from scipy.special import expit
from scipy.stats import multivariate_normal, norm

from pabench.metrics.avgcase import mvn
from pabench.metrics.avgcase.mvn import ABSEPS, MVNAccuracyWarning, mv_sigmoid, mvn_cdf

# The C integrand (the CPU's default) and the PyTorch one (a GPU's, forced here on the CPU).
BACKENDS = ["native", "torch"] if mvn._native() is not None else ["torch"]


def make_covs(seed, n, k, d, shared=False):
    """Covariances U U^T + 1e-5 I with unit-norm rows U (k, d), as the estimators build them.

    shared=True mimics logit-margin gradients (g_y - g_j): rows share a component, so the
    correlations are around 0.5 rather than around 0.
    """
    rng = np.random.default_rng(seed)
    covs = []
    for _ in range(n):
        u = rng.standard_normal((k, d))
        if shared:
            u = rng.standard_normal(d) - u
        u /= np.linalg.norm(u, axis=1, keepdims=True)
        covs.append(u @ u.T + 1e-5 * np.eye(k))
    return np.array(covs)


def scipy_cdf(z, cov):
    """scipy's per-point result at its default settings (abseps = releps = 1e-5)."""
    return np.array([multivariate_normal.cdf(zb, mean=np.zeros(len(zb)), cov=cb,
                                             rng=np.random.default_rng(0))
                     for zb, cb in zip(z, cov)])


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("d, shared", [(3072, False), (20, False), (3072, True)])
def test_k9_matches_scipy(d, shared, backend):
    k, n = 9, 12
    cov = make_covs(d, n, k, d, shared)
    z = np.linspace(0.3, 2.5, n)[:, None] + np.random.default_rng(1).normal(0.0, 1.0, (n, k))
    ref = scipy_cdf(z, cov)
    assert ref.min() < 0.05 and ref.max() > 0.5      # spread over (0, 1), not all near 0 or 1
    p, err = mvn_cdf(z, cov, return_error=True, backend=backend)
    assert p.dtype == np.float64 and p.shape == (n,)
    np.testing.assert_allclose(p, ref, rtol=0, atol=1e-4)
    assert (err <= 5e-5).all()


def test_k9_robust_points_near_one():
    k, n = 9, 10
    cov = make_covs(7, n, k, 3072, shared=True)
    z = 2.5 + np.abs(np.random.default_rng(2).normal(0, 1.5, (n, k)))
    ref = scipy_cdf(z, cov)
    assert ref.min() > 0.9 and ref.max() < 1 - 1e-6
    np.testing.assert_allclose(mvn_cdf(z, cov), ref, rtol=0, atol=1e-4)


# k = 99: scipy at default settings needs seconds to tens of seconds per point, so its values are
# stored. They were computed with multivariate_normal.cdf(z_b, cov=cov_b) (defaults, scipy 1.17.1)
# on exactly the inputs that make_covs / K99_Z below regenerate.
K99_CASES = {
    (3072, False): [0.02614102, 0.2431944, 0.347747, 0.4743398],
    (3072, True): [0.09236234, 0.2273073, 0.2893573, 0.376987],
}
K99_FINGERPRINT = {False: 0.03762715964962036, True: 0.4871825667665395}   # cov[0, 0, 1]


def k99_z(shared):
    offset = np.linspace(1.8, 3.0, 4) if shared else np.linspace(2.6, 3.6, 4)   # p ~ 0.03 .. 0.5
    return offset[:, None] + np.random.default_rng(5).normal(0.0, 1.0, (4, 99))


# The PyTorch path on one case (~5 s here); test_torch_backend_agrees_with_native covers k = 99 too.
@pytest.mark.parametrize("d, shared, backend", [(d, shared, b) for (d, shared) in K99_CASES
                                                for b in BACKENDS if b == BACKENDS[0] or not shared])
def test_k99_matches_stored_scipy(d, shared, backend):
    cov = make_covs(99 + shared, 4, 99, d, shared)
    assert cov[0, 0, 1] == pytest.approx(K99_FINGERPRINT[shared], abs=1e-12), \
        "numpy's random stream changed: recompute the stored scipy values"
    z = k99_z(shared)
    ref = np.array(K99_CASES[d, shared])
    np.testing.assert_allclose(mvn_cdf(z, cov, backend=backend), ref, rtol=0, atol=1e-4)


def test_k1_is_the_univariate_cdf_exactly():
    z = np.array([[-3.0], [0.0], [0.7], [np.inf], [-np.inf], [12.0]])
    var = np.array([0.5, 1.0, 4.0, 2.0, 1.0, 9.0])
    p, err = mvn_cdf(z, var[:, None, None], return_error=True)
    np.testing.assert_array_equal(p, norm.cdf(z[:, 0] / np.sqrt(var)))
    np.testing.assert_array_equal(err, 0.0)


@pytest.mark.parametrize("k", [2, 5, 9])
def test_diagonal_covariance_is_a_product_of_univariate_cdfs(k):
    rng = np.random.default_rng(k)
    z = rng.normal(0.5, 1.0, (20, k))
    var = rng.uniform(0.2, 3.0, (20, k))
    cov = np.stack([np.diag(v) for v in var])
    expected = norm.cdf(z / np.sqrt(var)).prod(axis=1)
    # A tiny abseps, since tails below 0.1 * abseps are dropped (a bounded, reported bias); the
    # float32 integrand rounds each factor at ~1e-7 relative.
    np.testing.assert_allclose(mvn_cdf(z, cov, abseps=1e-12), expected, rtol=1e-6, atol=1e-9)


def test_many_independent_variables_do_not_overflow():
    # The integrand keeps 2 Phi per factor in float32: 200 factors need its rescaling (2^200).
    z = np.random.default_rng(6).uniform(2.5, 4.0, (3, 200))
    cov = np.eye(200)
    p = mvn_cdf(z, cov, abseps=1e-12, max_samples=2048)
    np.testing.assert_allclose(p, norm.cdf(z).prod(axis=1), rtol=1e-5)


def test_infinite_limits():
    cov = make_covs(3, 6, 3, 50)
    z = np.random.default_rng(3).normal(0.3, 1.0, (6, 3))
    z[:, 1] = np.inf
    # X_1 <= +inf always holds: the 2-D marginal, which scipy integrates exactly.
    marg = np.array([multivariate_normal.cdf(zb[[0, 2]], cov=cb[np.ix_([0, 2], [0, 2])])
                     for zb, cb in zip(z, cov)])
    np.testing.assert_allclose(mvn_cdf(z, cov, abseps=1e-6), marg, rtol=0, atol=1e-5)
    z[0, 1], z[1, 2] = -np.inf, -np.inf
    assert (mvn_cdf(z, cov)[:2] == 0).all()
    np.testing.assert_array_equal(mvn_cdf(np.full((2, 4), np.inf), np.eye(4)), 1.0)


def test_singular_covariance():
    # X = (Y, Y, Y): P = Phi(min z); the degenerate variables become (near) step functions.
    z = np.array([[0.3, -0.2, 1.0], [1.5, 0.4, 0.9], [-0.5, 2.0, 2.0]])
    p = mvn_cdf(z, np.ones((3, 3)), abseps=1e-6, max_samples=2**16)
    np.testing.assert_allclose(p, norm.cdf(z.min(axis=1)), rtol=0, atol=1e-4)
    # A zero variance is X_i = 0: a factor 1 or 0 by the sign of z_i (the other two factors go
    # through the float32 integrand: ~1e-7 relative).
    cov = np.diag([1.0, 0.0, 2.0])
    p = mvn_cdf(np.array([[0.5, 0.1, 0.2], [0.5, -0.1, 0.2]]), cov)
    np.testing.assert_allclose(p, [norm.cdf(0.5) * norm.cdf(0.2 / np.sqrt(2)), 0.0], atol=1e-6)


def test_deterministic_and_independent_of_the_batch():
    cov = make_covs(11, 10, 9, 20)
    z = np.random.default_rng(4).normal(1.0, 1.0, (10, 9))
    a = mvn_cdf(z, cov, seed=3)
    np.testing.assert_array_equal(a, mvn_cdf(z, cov, seed=3))
    # A point's result does not depend on the other points of the batch.
    np.testing.assert_allclose(mvn_cdf(z[3:5], cov[3:5], seed=3), a[3:5], rtol=0, atol=1e-13)
    b = mvn_cdf(z, cov, seed=4)
    assert not np.array_equal(a, b) and np.abs(a - b).max() < 1e-4
    # A shared (k, k) covariance is the same as repeating it.
    np.testing.assert_allclose(mvn_cdf(z, cov[0]), mvn_cdf(z, np.repeat(cov[:1], 10, axis=0)),
                               rtol=0, atol=1e-13)


def test_max_samples_bounds_the_work():
    cov = make_covs(11, 4, 9, 20)
    z = np.random.default_rng(4).normal(1.0, 1.0, (4, 9))
    p, err = mvn_cdf(z, cov, abseps=1e-9, max_samples=512, return_error=True)
    assert ((0 <= p) & (p <= 1)).all() and (err > 1e-9).all()
    np.testing.assert_allclose(p, scipy_cdf(z, cov), rtol=0, atol=20 * err.max())


def test_mv_sigmoid():
    rng = np.random.default_rng(0)
    z = rng.normal(0, 3, (5, 7))
    np.testing.assert_allclose(mv_sigmoid(z), 1 / (1 + np.exp(-z).sum(axis=-1)), rtol=1e-13)
    np.testing.assert_allclose(mv_sigmoid(z[:, :1]), expit(z[:, 0]), rtol=1e-13)
    with np.errstate(over="raise", invalid="raise", divide="raise"):   # underflow is fine
        big = mv_sigmoid(np.array([[np.inf, np.inf], [np.inf, 3.0], [1000.0, 800.0],
                                   [-700.0, -701.0], [-1e4, 0.0], [-np.inf, 0.0]]))
    np.testing.assert_allclose(big[:3], [1.0, expit(3.0), 1.0], rtol=1e-15)
    # 1 / (e^700 + e^701 + 1), checked in logs since it is near the bottom of float64.
    np.testing.assert_allclose(np.log(big[3]), -(701 + np.log1p(np.exp(-1.0))), rtol=1e-13)
    assert big[4] == 0.0 and big[5] == 0.0
    assert mv_sigmoid(np.zeros((3, 4, 2))).shape == (3, 4)


@pytest.mark.parametrize("z, cov, kwargs, match", [
    (np.zeros((2, 3)), np.eye(4), {}, r"\(3, 3\).*\(4, 4\)"),
    (np.zeros((2, 3)), np.ones((3, 3, 3)), {}, r"\(2, 3, 3\).*\(3, 3, 3\)"),
    (np.zeros(3), np.eye(3), {}, r"\(3,\)"),
    (np.array([[0.0, np.nan]]), np.eye(2), {}, r"nan"),
    (np.zeros((1, 2)), np.array([[1.0, np.inf], [np.inf, 1.0]]), {}, r"inf"),
    (np.zeros((1, 2)), np.array([[1.0, np.nan], [np.nan, 1.0]]), {}, r"nan"),
    (np.zeros((1, 2)), np.diag([1.0, -2.0]), {}, r"-2\.0"),
    (np.zeros((1, 2)), np.array([[1.0, 0.5], [0.2, 1.0]]), {}, r"symmetric.*0\.3"),
    (np.zeros((1, 2)), np.eye(2), {"abseps": 0.0}, r"abseps.*0\.0"),
    (np.zeros((1, 2)), np.eye(2), {"abseps": -1e-3}, r"abseps.*-0\.001"),
    (np.zeros((1, 2)), np.eye(2), {"max_samples": 0}, r"max_samples.*0"),
    (np.zeros((1, 2)), np.eye(2), {"backend": "cuda"}, r"backend must be one of native, torch"),
    (np.zeros((1, 2)), np.eye(2), {"backend": "native", "device": "cuda"}, r"needs a CPU"),
])
def test_bad_inputs(z, cov, kwargs, match):
    with pytest.raises(ValueError, match=match):
        mvn_cdf(z, cov, **kwargs)


@pytest.mark.parametrize("k", [9, 99])
def test_native_integrand_matches_the_torch_one(k):
    """The C kernel (sov.c) and the PyTorch integrand sum the same Genz integrand over the same
    samples: their per-sample means agree to float32 rounding, on random correlated points with
    some infinite limits (fewer live dimensions) and a start offset into the samples."""
    if mvn._native() is None:
        pytest.skip("no C compiler: only the PyTorch integrand exists here")
    rng = np.random.default_rng(k)
    cov = make_covs(k, 12, k, k + 3)
    z = rng.normal(1.0, 1.0, (12, k))
    z[:3, -4:] = np.inf
    sd = np.sqrt(np.diagonal(cov, axis1=1, axis2=2))
    corr, b = cov / (sd[:, :, None] * sd[:, None, :]), z / sd
    lt, bt, keff = mvn._ordered_cholesky(corr, b)
    assert len(set(keff.tolist())) > 1
    samples = mvn._sobol_samples(3, k - 1, 1024)
    pts = np.arange(12)
    native = mvn._native_sums(lt, bt, keff, samples)(pts, 128, 640)
    lt_t, bt_t, _ = mvn._ordered_cholesky_torch(torch.tensor(corr), torch.tensor(b))
    torch_sums = mvn._torch_sums(lt_t, bt_t, keff, samples)(pts, 128, 640)
    assert native.shape == torch_sums.shape == (12, mvn._N_RAND)
    np.testing.assert_allclose(native / 512, torch_sums / 512, rtol=0, atol=2e-6)
    assert np.abs(native - torch_sums).max() > 0   # two implementations, not one called twice


def rank_deficient(n, k, rank, seed):
    """UU^T + 1e-5 I with U (k, rank) of unit rows, as the estimators build it for a model whose
    k decision-function gradients span only `rank` dimensions (a linear model on 2 features)."""
    rng = np.random.default_rng(seed)
    u = rng.standard_normal((n, k, rank))
    u /= np.linalg.norm(u, axis=-1, keepdims=True)
    return rng.uniform(-0.5, 3.5, (n, k)), u @ u.transpose(0, 2, 1) + 1e-5 * np.eye(k)


def test_points_over_tolerance_are_not_silent():
    """A rank-deficient UU^T plus the jitter makes the later factors near step functions: some
    points stop at max_samples above abseps.  Without return_error that warns with their count;
    with it the caller gets the estimates (and no warning), for the estimators to count."""
    z, cov = rank_deficient(20, 9, 2, seed=0)
    with pytest.warns(MVNAccuracyWarning, match=r"of 20 points ended at max_samples"):
        p = mvn_cdf(z, cov)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        p2, err = mvn_cdf(z, cov, return_error=True)
    np.testing.assert_array_equal(p, p2)
    assert 0 < (err > ABSEPS).sum() < 20
    # The refinement did run to the cap for those points: more samples lower their estimates.
    _, err_more = mvn_cdf(z, cov, return_error=True, max_samples=400_000)
    over = err > ABSEPS
    assert (err_more[over] < err[over]).mean() > 0.8


def test_torch_ordering_equals_numpy():
    """The device's factorisation (PyTorch) is the CPU's (numpy) to rounding: the same variable
    order, factor, limits and live dimensions, with infinite limits and degenerate variables."""
    z, cov = rank_deficient(30, 9, 3, seed=1)
    cov[:5] = np.ones((9, 9))                       # degenerate: every variable the same
    z[5:10, 2:4] = np.inf
    sd = np.sqrt(np.diagonal(cov, axis1=1, axis2=2))
    corr, b = cov / (sd[:, :, None] * sd[:, None, :]), z / sd
    lt, bt, keff = mvn._ordered_cholesky(corr, b)
    lt_t, bt_t, keff_t = mvn._ordered_cholesky_torch(torch.tensor(corr), torch.tensor(b))
    np.testing.assert_array_equal(keff_t.numpy(), keff)
    np.testing.assert_allclose(lt_t.numpy(), lt, rtol=1e-9, atol=1e-9)
    np.testing.assert_array_equal(np.isinf(bt_t.numpy()), np.isinf(bt))
    finite = np.isfinite(bt)
    np.testing.assert_allclose(bt_t.numpy()[finite], bt[finite], rtol=1e-9)


@pytest.mark.parametrize("k, n, d, offset", [(9, 6, 12, 0.8), (99, 3, 3072, 3.0)])
def test_torch_backend_agrees_with_native(k, n, d, offset):
    """Forced on the CPU, the PyTorch path (a GPU's) gives the C path's results to float32
    rounding: the same samples, order and refinement."""
    if mvn._native() is None:
        pytest.skip("no C compiler: only the PyTorch integrand exists here")
    cov = make_covs(k, n, k, d, shared=True)
    z = np.random.default_rng(k).normal(offset, 1.0, (n, k))
    p_n, err_n = mvn_cdf(z, cov, backend="native", return_error=True)
    p_t, err_t = mvn_cdf(z, cov, backend="torch", device="cpu", return_error=True)
    assert p_n.min() < 0.9 and (err_n <= ABSEPS).all() and (err_t <= ABSEPS).all()
    np.testing.assert_allclose(p_t, p_n, rtol=0, atol=1e-6)


def test_gpu_work_sizes_change_nothing(monkeypatch):
    """The PyTorch path's larger chunks and blocks on a GPU, run here on the CPU: the same
    results as the CPU sizes (the chunks only bound the memory)."""
    cov = make_covs(4, 40, 9, 20)
    z = np.random.default_rng(4).normal(1.0, 1.0, (40, 9))
    z[:3, -2:] = np.inf
    small = mvn_cdf(z, cov, backend="torch", return_error=True)
    monkeypatch.setitem(mvn._CHUNK, "cpu", mvn._CHUNK["cuda"])
    monkeypatch.setitem(mvn._BLOCK, "cpu", mvn._BLOCK["cuda"])
    large = mvn_cdf(z, cov, backend="torch", return_error=True)
    np.testing.assert_allclose(large, small, rtol=0, atol=1e-12)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.parametrize("k", [9, 99])
def test_cuda_matches_the_cpu(k):
    cov = make_covs(k, 8, k, 3072, shared=True)
    z = np.random.default_rng(k).normal(2.0 if k == 99 else 0.8, 1.0, (8, k))
    p_cpu = mvn_cdf(z, cov)
    p_gpu, err = mvn_cdf(z, cov, device="cuda", return_error=True)
    assert (err <= ABSEPS).all()
    np.testing.assert_allclose(p_gpu, p_cpu, rtol=0, atol=1e-4)
