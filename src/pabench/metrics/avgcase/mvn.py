"""Batched multivariate normal CDF and the multivariate sigmoid, for the average-case estimators.

`mvn_cdf` evaluates P[X <= z_b], X ~ N(0, cov_b), for many points at once with Genz's
separation-of-variables (SOV) transform: variables are reordered per point while factorising
(Gibson-Glasbey-Elston: most constraining first), and the resulting (k-1)-dimensional integral
over the unit cube is estimated by randomised QMC, with independently scrambled Sobol'
sequences whose spread gives the error estimate. (Sobol' rather than a Richtmyer lattice: on
these integrands it needed several times fewer points for the same error.) Work is vectorised
over points and samples; Python loops run only over dimensions, sample blocks and point chunks.

Two paths, chosen by the device (`mvn_cdf`'s device and backend): on a CPU the factorisation is
numpy and the integrand a small C kernel (sov.c), faster there than their PyTorch versions (the
factorisation ~1.5x, the integrand several times); on any other device (a GPU, next to the
model) both run in PyTorch on the device. They read the same samples and agree to rounding.
"""
import ctypes
import math
import warnings
from functools import lru_cache
from pathlib import Path

import numpy as np
import torch
from scipy.special import log_ndtr, logsumexp, ndtr
from scipy.stats import qmc

from pabench.core.native import compile_library
from pabench.core.threads import limit_threads, size_of

ABSEPS = 5e-5           # default error tolerance of mvn_cdf (the estimators' too)
BACKENDS = ("native", "torch")
_N_RAND = 8             # independent scramblings; their spread gives the error estimate
_N_FIRST = 128          # samples per scrambling in the first round (a power of 2; then doubles)
_VAR_TOL = 1e-10        # residual (correlation-scale) variance below which a variable is degenerate
_DIAG_FLOOR = 1e-5      # Cholesky diagonal used for degenerate variables: a near step function
_DROP_FRAC = 0.1        # share of abseps that may go to dropping variables with negligible tails
# Elements per (points, k, k) chunk of the factorisation, and points x samples per work array of
# the PyTorch integrand (whose (points, k, samples) array is k times that): larger on a GPU,
# where each operation's launch costs more than its work at CPU sizes.
_CHUNK = {"cpu": 1 << 20, "cuda": 1 << 24}
_BLOCK = {"cpu": 1 << 17, "cuda": 1 << 22}
_DIM_BLOCK = 16         # dimensions whose dot products with the earlier samples share one bmm


class MVNAccuracyWarning(UserWarning):
    """mvn_cdf stopped at max_samples with some points' error estimates above abseps."""


def mv_sigmoid(z):
    """Multivariate sigmoid 1 / (1 + sum_i exp(-z_i)) over the last axis, computed stably."""
    z = np.asarray(z, dtype=np.float64)
    if z.ndim == 0:
        raise ValueError(f"mv_sigmoid needs at least one axis, got a scalar {z!r}")
    zero = np.zeros(z.shape[:-1] + (1,))
    # log(1 + sum exp(-z)) as a logsumexp, so +inf and very negative z neither overflow nor NaN.
    return np.exp(-logsumexp(np.concatenate([zero, -z], axis=-1), axis=-1))


# Threads by the first round's work (limits times samples): small batches run on one thread.
@limit_threads(lambda z, *args, **kwargs: size_of(z) * _N_RAND * _N_FIRST)
def mvn_cdf(z, cov, *, abseps=ABSEPS, max_samples=100_000, seed=0, return_error=False,
            device=None, backend=None):
    """P[X <= z_b] for X ~ N(0, cov_b), for each row z_b of `z`.

    z: (B, k) upper limits (+inf and -inf allowed); cov: (B, k, k), or (k, k) shared by all
    points, symmetric positive semi-definite. Each point is refined (doubling its number of
    samples) until its error estimate -- 3 standard errors over the independent scramblings, plus
    the bound on the dropped negligible tails -- is at most `abseps`, or until the next round
    would take it past `max_samples` integrand evaluations (the first round, 1,024 or the largest
    power of 2 within `max_samples`, always runs). Points stopped by `max_samples` keep an error
    estimate above `abseps` (near-singular covariances, e.g. rank-deficient UU^T plus a small
    jitter, make the integrand a near step function, whose error falls only like plain Monte
    Carlo's): `return_error=True` returns the estimates for the caller to count; without it such
    points raise an MVNAccuracyWarning naming how many.

    device: where the work runs (default the CPU); backend: "native" (the C integrand, CPU only)
    or "torch" (any device); default native on a CPU where it builds, else torch.
    The result for a point depends only on its own inputs, `seed`, k and the backend, not on the
    rest of the batch. Returns (B,) float64 probabilities, and with `return_error` also (B,)
    error estimates.
    """
    z, cov = _check(z, cov, abseps, max_samples)
    device = torch.device(device or "cpu")
    native = _use_native(backend, device)
    n_pts, k = z.shape
    prob, err = np.ones(n_pts), np.zeros(n_pts)
    if n_pts == 0 or k == 0:
        return (prob, err) if return_error else prob
    sd = np.sqrt(np.diagonal(cov, axis1=-2, axis2=-1))
    # A zero variance means X_i = 0 (and, the matrix being PSD, independent of the rest): its
    # limit becomes -inf or +inf, i.e. a factor 0 or 1.
    b = np.where(sd > 0, z / np.where(sd > 0, sd, 1.0), np.where(z >= 0, np.inf, -np.inf))
    b = np.broadcast_to(b, (n_pts, k))
    if k == 1:                               # univariate: exact
        prob = ndtr(b[:, 0])
        return (prob, err) if return_error else prob

    zero = np.isneginf(b).any(axis=1)        # a -inf limit gives exactly 0
    prob[zero] = 0.0
    todo = np.flatnonzero(~zero)
    sd = np.where(sd > 0, sd, 1.0)
    # Chunks of points bound the (points, k, k) work arrays; results do not depend on them.
    per_chunk = max(1, _CHUNK.get(device.type, _CHUNK["cuda"]) // (k * k))
    for idx in np.array_split(todo, -(-todo.size // per_chunk)) if todo.size else []:
        c, s = (cov[idx], sd[idx]) if cov.ndim == 3 else (cov, sd)
        corr = np.broadcast_to(c / (s[..., :, None] * s[..., None, :]), (idx.size, k, k))
        prob[idx], err[idx] = _mvn_points(b[idx], corr, abseps, max_samples, seed, device, native)
    prob = np.clip(prob, 0.0, 1.0)
    if return_error:
        return prob, err
    over = err > abseps
    if over.any():
        warnings.warn(f"mvn_cdf: {int(over.sum())} of {n_pts} points ended at max_samples = "
                      f"{max_samples:,} with error estimates above abseps = {abseps:g} (the "
                      f"largest {err.max():.2g}); pass return_error=True to get them",
                      MVNAccuracyWarning, stacklevel=2)
    return prob


def _use_native(backend, device) -> bool:
    if backend not in (None, *BACKENDS):
        raise ValueError(f"backend must be one of {', '.join(BACKENDS)} (or None), got {backend!r}")
    if backend == "native" and (device.type != "cpu" or _native() is None):
        raise ValueError(f"backend 'native' needs a CPU with a C compiler (device {device}; the "
                         f"kernel {'built' if _native() is not None else 'did not build'})")
    return backend != "torch" and device.type == "cpu" and _native() is not None


def _check(z, cov, abseps, max_samples):
    z = np.asarray(z, dtype=np.float64)
    cov = np.asarray(cov, dtype=np.float64)
    if z.ndim != 2:
        raise ValueError(f"z must have shape (B, k), got shape {z.shape}")
    n_pts, k = z.shape
    if cov.shape not in ((k, k), (n_pts, k, k)):
        raise ValueError(f"cov must have shape ({k}, {k}) or ({n_pts}, {k}, {k}) for z of shape "
                         f"{z.shape}, got shape {cov.shape}")
    nan = np.argwhere(np.isnan(z))
    if nan.size:
        raise ValueError(f"z must not contain NaN, got {z[tuple(nan[0])]} at index {tuple(nan[0])}")
    bad = np.argwhere(~np.isfinite(cov))
    if bad.size:
        raise ValueError(f"cov must be finite, got {cov[tuple(bad[0])]} at index {tuple(bad[0])}")
    diag = np.diagonal(cov, axis1=-2, axis2=-1)
    if (diag < 0).any():
        raise ValueError(f"cov must have non-negative variances, got {diag.min()}")
    flat, step = cov.reshape(-1, k, k), max(1, _CHUNK["cpu"] // max(1, k * k))
    scale = max(1.0, float(np.abs(diag).max(initial=0.0)))
    for lo in range(0, len(flat), step):        # in chunks, so that no full copy is made
        c = flat[lo:lo + step]
        asym = float(np.abs(c - np.swapaxes(c, 1, 2)).max(initial=0.0))
        if asym > 1e-8 * scale:
            raise ValueError(f"cov must be symmetric, got max |cov - cov^T| = {asym}")
    if isinstance(abseps, bool) or not (np.isscalar(abseps) and abseps > 0 and math.isfinite(abseps)):
        raise ValueError(f"abseps must be a positive finite number, got {abseps!r}")
    if isinstance(max_samples, bool) or not (isinstance(max_samples, (int, np.integer))
                                             and max_samples > 0):
        raise ValueError(f"max_samples must be a positive integer, got {max_samples!r}")
    return z, cov


@torch.inference_mode()
def _mvn_points(b, corr, abseps, max_samples, seed, device, native):
    """Probabilities and error estimates for a chunk of points (correlation scale, finite-or-+inf b)."""
    n_pts, k = b.shape
    # Drop variables whose marginal tails sum to a negligible amount: by the union bound that
    # changes the probability by at most the sum; it is added to the error estimate.
    tails = ndtr(-b)
    order = np.argsort(tails, axis=1)
    cum = np.cumsum(np.take_along_axis(tails, order, axis=1), axis=1)
    drop = np.zeros_like(tails, dtype=bool)
    np.put_along_axis(drop, order, cum <= _DROP_FRAC * abseps, axis=1)
    bias = np.where(drop, tails, 0.0).sum(axis=1)
    b = np.where(drop, np.inf, b)

    if native:
        lt, bt, keff = _ordered_cholesky(corr, b)
        prob = np.where(keff > 0, ndtr(bt[:, 0]), 1.0)   # one variable left: exact
    else:
        lt, bt, keff = _ordered_cholesky_torch(torch.tensor(corr, device=device),
                                               torch.tensor(b, device=device))
        keff = keff.cpu().numpy()
        prob = np.where(keff > 0, ndtr(bt[:, 0].cpu().numpy()), 1.0)
    err = bias.copy()
    live = np.flatnonzero(keff > 1)
    if not live.size:
        return prob, err
    # Sizes stay powers of 2: a scrambled Sobol' mean over 2^m points (a net) was far more
    # accurate than over sizes between them, so a point that is not yet accurate doubles.
    n_max = 1 << (max(1, max_samples // _N_RAND).bit_length() - 1)   # per randomisation
    samples = _sobol_samples(seed, k - 1, n_max, device)
    sums_of = (_native_sums if native else _torch_sums)(lt, bt, keff, samples)
    sums = np.zeros((n_pts, _N_RAND))
    done, size = 0, min(_N_FIRST, n_max)
    while live.size:
        sums[live] += sums_of(live, done, size)
        done, size = size, 2 * size
        est = sums[live] / done
        prob[live] = est.mean(axis=1)
        err[live] = 3 * est.std(axis=1, ddof=1) / math.sqrt(_N_RAND) + bias[live]
        live = live[err[live] > abseps]
        if size > n_max:
            break
    return prob, err


def _ordered_cholesky(corr, b):
    """Cholesky factor with per-point variable reordering (smallest conditional probability first).

    Returns the permuted factor with rows divided by their diagonal (lower triangular, unit
    diagonal dropped), the permuted limits divided likewise, and the number of finite limits.
    """
    n_pts, k = b.shape
    rows = np.arange(n_pts)
    chol = np.zeros((n_pts, k, k))     # rows in the original variable order, column j = step j
    var = np.diagonal(corr, axis1=1, axis2=2).copy()   # residual variances
    mean = np.zeros((n_pts, k))        # conditional means given the expected earlier values
    free = np.ones((n_pts, k), dtype=bool)
    perm = np.empty((n_pts, k), dtype=np.intp)
    for j in range(k):
        std = np.sqrt(np.maximum(var, _DIAG_FLOOR ** 2))
        # Phi is monotone, so ranking the standardised limits ranks the probabilities; +inf
        # limits are capped so that they still rank before the variables already taken.
        score = np.where(free, np.minimum((b - mean) / std, 1e300), np.inf)
        p = np.argmin(score, axis=1)
        perm[:, j] = p
        free[rows, p] = False
        col = corr[rows, :, p] - np.einsum("pil,pl->pi", chol[:, :, :j], chol[rows, p, :j])
        piv = np.sqrt(np.maximum(var[rows, p], 0.0))
        degen = var[rows, p] <= _VAR_TOL
        # A degenerate variable is a function of the earlier ones: zero column, floored diagonal.
        col = np.where(free & ~degen[:, None], col / np.where(degen, 1.0, piv)[:, None], 0.0)
        col[rows, p] = np.where(degen, _DIAG_FLOOR, piv)
        chol[:, :, j] = col
        var = np.where(free, var - col ** 2, var)
        # E[Z | Z < c] = -pdf(c) / Phi(c), in logs so that it stays finite for very negative c.
        c = (b[rows, p] - mean[rows, p]) / col[rows, p]
        y = -np.exp(-0.5 * c * c - 0.5 * math.log(2 * math.pi) - log_ndtr(c))
        mean = mean + np.where(free, col * np.nan_to_num(y)[:, None], 0.0)
    chol = np.take_along_axis(chol, perm[:, :, None], axis=1)
    diag = np.diagonal(chol, axis1=1, axis2=2)
    lt = chol / diag[:, :, None]
    bt = np.take_along_axis(b, perm, axis=1) / diag
    keff = np.isfinite(bt).sum(axis=1)    # +inf limits are ordered last and contribute a factor 1
    return lt, bt, keff


def _ordered_cholesky_torch(corr, b):
    """_ordered_cholesky in PyTorch, for the device's own integrand: corr (n, k, k) and b (n, k)
    float64 tensors on one device, results on it (the same up to rounding; on a CPU, where its
    k steps of small operations took ~1.5x numpy's time, the numpy one runs)."""
    n_pts, k = b.shape
    # Rows are picked with gather/index_select and masks applied with masked_fill: on a CPU
    # PyTorch's advanced indexing took ~100 us a call and torch.where with a Python scalar
    # ~500 us, 10-100x those, and the loop below runs k times.
    first = torch.arange(n_pts, device=b.device) * k      # row offsets into (n_pts * k, k) views
    chol_t = torch.zeros_like(corr)     # row j = step j's column, in the original variable order
    var = corr.diagonal(dim1=1, dim2=2).clone()        # residual variances
    mean = torch.zeros_like(b)          # conditional means given the expected earlier values
    taken = torch.zeros_like(b, dtype=torch.bool)
    perm = torch.empty((n_pts, k), dtype=torch.long, device=b.device)
    half_log_2pi = 0.5 * math.log(2 * math.pi)
    for j in range(k):
        std = var.clamp_min(_DIAG_FLOOR ** 2).sqrt_()
        # Phi is monotone, so ranking the standardised limits ranks the probabilities; +inf
        # limits are capped so that they still rank before the variables already taken.
        score = (b - mean).div_(std).clamp_max_(1e300).masked_fill_(taken, math.inf)
        p = score.argmin(dim=1, keepdim=True)
        perm[:, j] = p[:, 0]
        taken.scatter_(1, p, True)
        earlier = chol_t[:, :j].gather(2, p[:, :, None].expand(n_pts, j, 1))    # (n, j, 1)
        col = corr.reshape(-1, k).index_select(0, first + p[:, 0]) \
            - (earlier.transpose(1, 2) @ chol_t[:, :j]).squeeze(1)
        piv_var = var.gather(1, p)
        degen = piv_var <= _VAR_TOL
        # A degenerate variable is a function of the earlier ones: zero column, floored diagonal.
        piv = piv_var.clamp_min_(0.0).sqrt_().masked_fill_(degen, 1.0)
        col = col.div_(piv).masked_fill_(taken | degen, 0.0)   # zero at the variables taken
        var.sub_(col * col)
        diag = piv.masked_fill_(degen, _DIAG_FLOOR)
        # E[Z | Z < c] = -pdf(c) / Phi(c), in logs so that it stays finite for very negative c.
        c = (b.gather(1, p) - mean.gather(1, p)).div_(diag)
        y = torch.addcmul(torch.special.log_ndtr(c).add_(half_log_2pi), c, c, value=0.5)
        mean.sub_(col * y.neg_().exp_().nan_to_num_())
        chol_t[:, j] = col.scatter_(1, p, diag)
    rows = (first[:, None] + perm).reshape(-1)
    chol = chol_t.transpose(1, 2).reshape(-1, k).index_select(0, rows).reshape(n_pts, k, k)
    diag = chol.diagonal(dim1=1, dim2=2)
    lt = chol / diag[:, :, None]
    bt = b.reshape(-1).index_select(0, rows).reshape(n_pts, k) / diag
    keff = torch.isfinite(bt).sum(dim=1)  # +inf limits are ordered last and contribute a factor 1
    return lt, bt, keff


_SAMPLES = {}   # (seed, dim, device) -> scrambled Sobol' points: scrambling 8 took ~3 ms a call


def _sobol_samples(seed, dim, n, device="cpu"):
    """(dim, _N_RAND, >= n) float32 tensor on `device`: the first n points of _N_RAND
    independently scrambled Sobol' sequences, fixed by the seed (drawn on the CPU, so every device
    integrates the same points). Cached for integer seeds (the two latest (seed, dim, device)
    only, to bound the memory), so that repeated calls do not scramble again."""
    device = torch.device(device)
    key = (int(seed), dim, str(device)) if isinstance(seed, (int, np.integer)) else None
    if key not in _SAMPLES or _SAMPLES[key].shape[2] < n:
        seeds = np.random.default_rng(seed).integers(2**63, size=_N_RAND)
        m = max(0, n - 1).bit_length()
        pts = np.stack([_sobol_engine(dim, s).random_base2(m) for s in seeds], axis=1)
        pts = torch.from_numpy(np.ascontiguousarray(pts.T, dtype=np.float32)).to(device)
        if key is None:
            return pts
        _SAMPLES.pop(key, None)
        while len(_SAMPLES) >= 2:
            _SAMPLES.pop(next(iter(_SAMPLES)))
        _SAMPLES[key] = pts
    return _SAMPLES[key]


def _sobol_engine(dim, seed):
    try:
        return qmc.Sobol(dim, scramble=True, rng=np.random.default_rng(seed))
    except TypeError:                         # scipy < 1.15 names it `seed`
        return qmc.Sobol(dim, scramble=True, seed=np.random.default_rng(seed))


SOURCE = Path(__file__).with_name("sov.c")
# -ffast-math lets the compiler use the vectorised logf/expf of glibc's libmvec; the kernel never
# sees an infinity (only the first keff limits of a point, all finite, are read).
FLAGS = ("-O3", "-march=native", "-ffast-math", "-fPIC", "-shared")


@lru_cache(maxsize=None)
def _native():
    """sov.c's kernel, or None where it cannot be built (then the PyTorch integrand runs)."""
    lib = compile_library(SOURCE, FLAGS)
    if lib is None:
        return None
    lib.sov_sums.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p,
                             ctypes.c_void_p, ctypes.c_long, ctypes.c_long, ctypes.c_long,
                             ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]
    lib.sov_sums.restype = ctypes.c_int
    return lib


_SQRT2 = math.sqrt(2.0)
_X_MAX = 1.0 - 2e-7   # float32 keeps erfinv(x) finite for |x| <= 1 - 2e-7 (u in [1e-7, 1 - 1e-7])


def _native_sums(lt, bt, keff, samples):
    """sums(points, lo, hi): per-randomisation sums of the SOV integrand over samples[:, :, lo:hi]
    for the given points (numpy indices), by sov.c. lt, bt, keff as _ordered_cholesky returns
    them (numpy); samples: (dims, _N_RAND, n) float32."""
    lib = _native()
    full = np.ascontiguousarray(samples.numpy())   # the cached array itself: no copy
    k = bt.shape[1]
    lt32 = lt.astype(np.float32)
    bs32 = np.where(np.isfinite(bt), bt / _SQRT2, 0.0).astype(np.float32)

    def sums(pts, lo, hi):
        l32, b32 = np.ascontiguousarray(lt32[pts]), np.ascontiguousarray(bs32[pts])
        kq = np.ascontiguousarray(keff[pts], dtype=np.int64)
        out = np.zeros((len(pts), _N_RAND))
        status = lib.sov_sums(len(pts), k, l32.ctypes.data, b32.ctypes.data, kq.ctypes.data,
                              _N_RAND, full.shape[2], lo, hi - lo, full.ctypes.data,
                              out.ctypes.data)
        if status != 0:
            raise MemoryError("mvn_cdf: the native integrand could not allocate its work arrays")
        return out
    return sums


def _torch_sums(lt, bt, keff, samples):
    """The same as _native_sums by the PyTorch integrand, on the device of lt and samples (lt, bt
    as _ordered_cholesky_torch returns them; keff numpy)."""
    device = lt.device
    lt32, bs32 = lt.float(), (bt / _SQRT2).float()
    block = _BLOCK.get(device.type, _BLOCK["cuda"])

    def sums(pts, lo, hi):
        w = samples[:, :, lo:hi]
        n = hi - lo
        order = np.argsort(keff[pts], kind="stable")   # chunks of similar dimension: few dead ones
        out = torch.zeros((len(pts), _N_RAND), dtype=torch.float64, device=device)
        n_block = min(n, max(1, block // _N_RAND))
        n_pc = max(1, block // (_N_RAND * n_block))
        for s in range(0, n, n_block):
            for c in range(0, len(pts), n_pc):
                pos = order[c:c + n_pc]
                kq = int(keff[pts[pos]].max())
                idx = torch.as_tensor(pts[pos], device=device)
                # Columns ordered (randomisation, sample) so that sums per randomisation are
                # reshapes.
                ws = w[:kq - 1, :, s:s + n_block].reshape(kq - 1, -1)
                f = _sov_integrand(lt32[idx], bs32[idx], kq, ws)
                out[torch.as_tensor(pos, device=device)] += \
                    f.reshape(len(pos), _N_RAND, -1).sum(2, dtype=torch.float64)
        return out.cpu().numpy()
    return sums


def _sov_integrand(lt, bs, kq, w):
    """Genz's integrand prod_i e_i at the sample columns of w, for points with <= kq finite limits.

    bs are the limits divided by sqrt(2), so that with v = erfinv(2u - 1) = Phi^-1(u) / sqrt(2)
    each factor is e_i = Phi(b_i - (L y)_i) = erfc((L v)_i - bs_i) / 2: no scaling passes. The
    loop keeps 2 e_i and multiplies the product by 2^-kq at the end (rescaling on the way so
    that it cannot overflow). The dot products (L v)_i are taken a block of _DIM_BLOCK
    dimensions at a time: one bmm over the samples of all earlier blocks, then the few terms
    within the block, so that the earlier samples are read once per block, not per dimension.
    In float32 torch: its vectorised erfinv and erfc measured ~8x and ~3x faster than scipy's
    float64 ndtri and ndtr. The rounding (~1e-7 per factor) and the clamp of u (a sample enters
    [0, 1e-7] with probability 1e-7) are far below the 1e-4 accuracy asked of the result; the
    sums are taken in float64 by the caller.
    """
    n_pts, n_s = lt.shape[0], w.shape[1]
    e = torch.erfc(-bs[:, :1]).expand(n_pts, n_s)       # 2 e_0: it does not depend on the sample
    f = e.clone()
    v = torch.empty((n_pts, kq - 1, n_s), device=lt.device)
    minus_one = torch.tensor(-1.0, device=lt.device)
    for i in range(1, kq):
        if (i - 1) % _DIM_BLOCK == 0:     # a block of dimensions i .. i + _DIM_BLOCK - 1 starts
            top = min(i + _DIM_BLOCK, kq)
            base = torch.baddbmm(-bs[:, i:top, None], lt[:, i:top, :i - 1], v[:, :i - 1])
        x = torch.addcmul(minus_one, w[i - 1], e).clamp_(-_X_MAX, _X_MAX)   # 2u - 1, u = w e_{i-1}
        torch.erfinv(x, out=v[:, i - 1])
        start = (i - 1) // _DIM_BLOCK * _DIM_BLOCK        # v index where the block began
        r = i - 1 - start                                   # row of dimension i in base
        t = torch.baddbmm(base[:, r:r + 1], lt[:, i:i + 1, start:i], v[:, start:i]).squeeze_(1)
        e = t.erfc_()
        f.mul_(e)
        if i % 64 == 0:                   # by 2^-64 exactly, so the product cannot overflow
            f.mul_(2.0 ** -64)
    return f.mul_(2.0 ** -(kq - 64 * ((kq - 1) // 64)))
