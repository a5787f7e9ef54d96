"""Exact maximisation of the PA objective f(beta) = sum_i k_i(beta) over beta >= 0.

The paper (Theorem 3) calls f concave, but it is not in general: f'(0) = 0 always and
f''(0) = 2 sum_i Cov_j(a_ij, b_ij), which is positive when the two score sets agree, so f is
convex near 0, and f can have two local maxima (tests/test_pa_exact.py builds one).  So:

1. scan f' on a log-spaced grid of beta over a subsample of rows (all rows for small inputs),
   widening the grid until the slope signs at its ends are settled;
2. every + to - sign change brackets a local maximum: locate it on the subsample, then polish
   it on the full data with safeguarded Newton steps (bisection in log beta when a Newton step
   leaves the bracket) to a relative step below 1e-10;
3. return the best of those maxima, beta = 0 and the limit beta -> inf (ties: smallest beta).
"""
from __future__ import annotations

import math

import torch

from pabench.metrics.kernel import CentredPairs, limit_at_infinity, summed_terms

GRID_DECADES = (-2.0, 3.0)  # initial scan, in units of 1 / (typical row range of the scores)
GRID_PER_DECADE = 2
SCAN_ELEMS = 1 << 14  # scores per input used by the scan (at least SCAN_ROWS rows)
SCAN_ROWS = 256
LEVEL_FACTOR = 8  # each refinement level uses this many times more rows, up to all of them
REL_TOL = 1e-10  # stopping tolerance on beta (1e-9 asked); f' rounding noise sits near 1e-12
# A Newton step this small (relative) is taken without another check: quadratic convergence
# leaves a relative error of order POLISH**2 times beta * f3 / f2 (of order one).
POLISH = 1e-6
MAX_WIDEN = 30


def _scale(p: CentredPairs) -> float:
    """Typical range of a row's scores (finite entries), from up to 4096 evenly spaced rows."""
    idx = torch.linspace(0, p.n - 1, min(p.n, 4096)).long()
    sub = torch.cat([p.A[idx], p.B[idx]])
    fin = torch.where(torch.isinf(sub), torch.zeros_like(sub), sub)
    rng = -fin.amin(-1)
    rng = rng[rng > 0]
    return float(rng.median()) if rng.numel() else 1.0


def _subsample(p: CentredPairs, rows: int) -> CentredPairs:
    """`rows` evenly spaced rows (all of p when it has no more)."""
    if rows >= p.n:
        return p
    return p.take(torch.linspace(0, p.n - 1, rows).long())


def _eval(p: CentredPairs, beta, order: int, keep_kernel: bool = False):
    beta = torch.as_tensor(beta, dtype=p.X.dtype, device=p.X.device)
    return summed_terms(p, beta, order, keep_kernel=keep_kernel)


def _slopes(p: CentredPairs, betas: list[float]) -> list[float]:
    return _eval(p, betas, order=1)[1].tolist()


def _scan(p: CentredPairs) -> list[tuple[float, float]]:
    """Brackets (lo, hi) with f'(lo) > 0 >= f'(hi) around every local maximum the grid sees."""
    unit = 1.0 / _scale(p)
    lo_dec, hi_dec = GRID_DECADES
    n_grid = int(round((hi_dec - lo_dec) * GRID_PER_DECADE)) + 1
    grid = [unit * 10 ** (lo_dec + i / GRID_PER_DECADE) for i in range(n_grid)]
    slopes = _slopes(p, grid)
    # f rises from beta = 0 when f''(0) > 0: if it already falls at the first grid point,
    # the maximum lies below it; go down until the slope is positive.
    curvature0 = float(_eval(p, 0.0, order=2)[2])
    for _ in range(MAX_WIDEN):
        if slopes[0] > 0 or curvature0 <= 0:
            break
        grid.insert(0, grid[0] / 10)
        slopes.insert(0, _slopes(p, [grid[0]])[0])
    for _ in range(MAX_WIDEN):
        if slopes[-1] <= 0:
            break
        grid.append(grid[-1] * 10)
        slopes.append(_slopes(p, [grid[-1]])[0])
    return [(grid[i], grid[i + 1]) for i in range(len(grid) - 1) if slopes[i] > 0 >= slopes[i + 1]]


def _newton(p: CentredPairs, x: float, lo: float = 0.0, hi: float = math.inf):
    """Root of f' from x, kept inside a bracket [lo, hi] that is tightened with every slope seen.
    Returns (beta, f(beta), kernel at beta)."""
    for _ in range(400):
        f, g, h, kernel = _eval(p, x, order=2, keep_kernel=True)
        g, h = float(g), float(h)
        if g == 0:
            return x, float(f), kernel
        if g > 0:
            lo = max(lo, x)
        else:
            hi = min(hi, x)
        step = -g / h if h < 0 else math.nan
        if abs(step) <= REL_TOL * x or (hi < math.inf and hi - lo <= REL_TOL * hi):
            return x, float(f), kernel
        if abs(step) <= POLISH * x and lo < x + step < hi:
            x += step
            f, _, _, kernel = _eval(p, x, order=0, keep_kernel=True)
            return x, float(f), kernel
        nxt = x + step
        if not lo < nxt < hi:  # Newton left the bracket: bisect in log beta, or widen it
            if hi == math.inf:
                nxt = x * 4
            elif lo == 0.0:
                nxt = hi / 4
            else:
                nxt = math.sqrt(lo * hi) if hi / lo > 4 else 0.5 * (lo + hi)
        if nxt > 1e300 or nxt < 1e-300:
            return (math.inf if nxt > 1 else 0.0), None, None
        x = nxt
    return x, float(f), kernel


def solve_exact(p: CentredPairs):
    """Maximiser of f over beta in [0, inf] for one pair (2-D CentredPairs).

    Returns (beta, logpa, kernel): the smallest best candidate, its objective value and the
    per-sample kernel there."""
    lim = limit_at_infinity(p)
    f_inf = float(lim.sum())
    if f_inf == 0.0:  # every argmax shared, no ties: f < 0 = f(inf) for all finite beta
        return math.inf, 0.0, lim
    if p.masked:
        f0, _, _, k0 = _eval(p, 0.0, order=0, keep_kernel=True)
    else:  # uniform posteriors: k_i(0) = -log K
        k0 = torch.full((p.n,), -math.log(p.k), dtype=p.X.dtype, device=p.X.device)
        f0 = -p.n * math.log(p.k)
    candidates = [(float(f0), 0.0, k0)]
    if f_inf > -math.inf:
        candidates.append((f_inf, math.inf, lim))
    # Locate local maxima on few rows, then follow each through ever larger subsamples: each
    # level starts Newton close to its root, so the full data needs only about three passes.
    rows = max(SCAN_ROWS, SCAN_ELEMS // p.k)
    levels = [_subsample(p, rows)]
    while levels[-1] is not p:
        rows *= LEVEL_FACTOR
        levels.append(_subsample(p, rows))
    for lo, hi in _scan(levels[0]):
        beta, value, kernel = math.sqrt(lo * hi), None, None
        for i, level in enumerate(levels):
            if not 0.0 < beta < math.inf:
                break
            beta, value, kernel = _newton(level, beta, *((lo, hi) if i == 0 else ()))
        if value is not None and 0.0 < beta < math.inf:
            candidates.append((value, beta, kernel))
    value, beta, kernel = min(candidates, key=lambda c: (-c[0], c[1]))
    return beta, value, kernel
