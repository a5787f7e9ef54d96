"""The exact PA solver against independent references and the paper's properties."""
import math

import numpy as np
import pytest
from scipy.optimize import brentq
from scipy.special import logsumexp, softmax

from pabench.metrics import pa_curve, posterior_agreement
from pabench.experiments.toy.compute import random_classifier_closed_form


def ref_objective(a, b, beta):
    """sum_i log sum_j softmax(beta a_i)_j softmax(beta b_i)_j, written independently."""
    la = beta * a - logsumexp(beta * a, axis=1, keepdims=True)
    lb = beta * b - logsumexp(beta * b, axis=1, keepdims=True)
    return float(logsumexp(la + lb, axis=1).sum())


def ref_slope(a, b, beta):
    s = a + b
    return float(((softmax(beta * s, 1) * s).sum(1) - (softmax(beta * a, 1) * a).sum(1)
                  - (softmax(beta * b, 1) * b).sum(1)).sum())


def noisy_pair(n=500, k=10, noise=2.0, seed=0):
    rng = np.random.default_rng(seed)
    a = rng.normal(size=(n, k)) * 3
    return a, a + rng.normal(size=(n, k)) * noise


@pytest.mark.parametrize("seed,noise", [(0, 2.0), (1, 0.5), (2, 5.0)])
def test_exact_matches_an_independent_root_to_1e9(seed, noise):
    a, b = noisy_pair(seed=seed, noise=noise)
    r = posterior_agreement(a, b)
    root = brentq(lambda x: ref_slope(a, b, x), r.beta / 2, r.beta * 2, xtol=1e-15, rtol=1e-15)
    assert abs(r.beta - root) <= 1e-9 * root
    assert r.logpa == pytest.approx(ref_objective(a, b, root), rel=1e-12)
    assert r.kernel.sum() == pytest.approx(r.logpa, rel=1e-12)
    # no grid point does better
    grid = np.geomspace(root / 100, root * 100, 400)
    assert max(ref_objective(a, b, g) for g in grid) <= r.logpa + 1e-9


def test_bounds_and_normalisation():
    a, b = noisy_pair(n=300, k=7)
    r = posterior_agreement(a, b)
    n, k = a.shape
    assert -n * math.log(k) <= r.logpa <= 0
    assert 0 <= r.pa <= math.log(k)
    assert r.pa == pytest.approx(r.logpa / n + math.log(k))
    assert r.kernel.shape == (n,)


def test_symmetry():
    a, b = noisy_pair(n=300, k=5, seed=3)
    r1, r2 = posterior_agreement(a, b), posterior_agreement(b, a)
    assert r1.beta == pytest.approx(r2.beta, rel=1e-9)
    assert r1.logpa == pytest.approx(r2.logpa, rel=1e-12)


def test_identical_inputs_are_unbounded_with_pa_zero():
    a, _ = noisy_pair(n=200)
    r = posterior_agreement(a, a.copy())
    assert r.beta == math.inf and r.logpa == 0.0 and r.pa == pytest.approx(math.log(10))
    assert np.all(r.kernel == 0)


def test_constant_scores_give_beta_zero():
    z = np.zeros((50, 4))
    r = posterior_agreement(z, z + 3.0)
    assert r.beta == 0.0
    assert r.logpa == pytest.approx(-50 * math.log(4))
    assert r.pa == pytest.approx(0.0, abs=1e-12)


def test_every_prediction_disagreeing_gives_beta_zero():
    rng = np.random.default_rng(5)
    a = rng.normal(size=(100, 3))
    b = np.roll(a, 1, axis=1) * 2  # each b's argmax is a different class
    assert np.all(a.argmax(1) != b.argmax(1))
    r = posterior_agreement(a, b)
    assert r.beta == 0.0
    assert r.logpa == pytest.approx(-100 * math.log(3))
    assert ref_objective(a, b, 1e-3) < r.logpa  # f decreases away from 0


@pytest.mark.parametrize("agree,disagree", [(70, 30), (95, 5), (51, 49), (40, 60)])
def test_closed_form_binary_case(agree, disagree):
    x = 2.5
    a = np.array([[x, 0.0]] * (agree + disagree))
    b = np.array([[x, 0.0]] * agree + [[0.0, x]] * disagree)
    beta, logpa = random_classifier_closed_form(agree, disagree)
    r = posterior_agreement(a, b)
    assert r.beta == pytest.approx(beta / x, rel=1e-9, abs=1e-12)
    assert r.logpa == pytest.approx(logpa, rel=1e-12)


def test_objective_is_not_concave_near_zero_and_the_global_maximum_is_found():
    """Theorem 3 (concavity) fails: f''(0) = 2 sum_i Cov(a_i, b_i) > 0 for agreeing scores,
    and f can have two local maxima.  Many mildly agreeing samples plus a few confidently
    disagreeing ones: f falls from beta = 0, rises, then falls again."""
    agree = np.tile([[1.0, 0.0]], (1000, 1))
    clash_a = np.tile([[100.0, 0.0]], (2, 1))
    clash_b = np.tile([[0.0, 100.0]], (2, 1))
    a, b = np.vstack([agree, clash_a]), np.vstack([agree, clash_b])
    betas = np.geomspace(1e-4, 1e3, 3000)
    f = pa_curve(a, b, betas)
    second = np.diff(f, 2)
    assert second.max() > 0 and second.min() < 0  # convex and concave stretches
    slopes = np.sign(np.diff(f))
    assert np.count_nonzero(np.diff(slopes) != 0) >= 2  # down, up, down
    r = posterior_agreement(a, b)
    assert r.logpa >= f.max() - 1e-9
    assert r.logpa == pytest.approx(ref_objective(a, b, r.beta), rel=1e-12)


def test_objective_concave_where_the_paper_uses_it():
    """Around beta* of realistic noisy logits the objective is concave (f'' < 0)."""
    a, b = noisy_pair(n=400)
    r = posterior_agreement(a, b)
    betas = np.linspace(r.beta / 3, r.beta * 3, 200)
    assert np.diff(pa_curve(a, b, betas), 2).max() < 0


def test_log_probs_and_probs_match_logits():
    a, b = noisy_pair(n=300, k=6, seed=7)
    la = a - logsumexp(a, 1, keepdims=True)
    lb = b - logsumexp(b, 1, keepdims=True)
    r = posterior_agreement(a, b)
    assert posterior_agreement(la, lb, inputs="log_probs").logpa == pytest.approx(r.logpa, rel=1e-12)
    assert posterior_agreement(np.exp(la), np.exp(lb), inputs="probs").logpa == pytest.approx(r.logpa, rel=1e-10)


def test_probabilities_with_exact_zeros():
    """Zero probabilities are -inf log-scores, handled exactly (no flooring)."""
    pa = np.array([[0.7, 0.3, 0.0], [0.0, 0.5, 0.5], [0.2, 0.0, 0.8]])
    pb = np.array([[0.6, 0.4, 0.0], [0.0, 0.9, 0.1], [0.1, 0.0, 0.9]])
    r = posterior_agreement(pa, pb, inputs="probs")
    # reference on the supports only: zeros drop out of every softmax
    def f(beta):
        total = 0.0
        for x, y in zip(pa, pb):
            s = (x > 0) & (y > 0)
            px = softmax(beta * np.log(x[x > 0]))
            py = softmax(beta * np.log(y[y > 0]))
            fx = dict(zip(np.flatnonzero(x > 0), px))
            fy = dict(zip(np.flatnonzero(y > 0), py))
            total += math.log(sum(fx[j] * fy[j] for j in np.flatnonzero(s)))
        return total
    grid = np.geomspace(1e-3, 1e3, 2000)
    assert r.logpa >= max(f(g) for g in grid) - 1e-9
    if 0 < r.beta < math.inf:
        assert r.logpa == pytest.approx(f(r.beta), rel=1e-10)


def test_disjoint_supports_give_minus_infinity():
    pa = np.array([[1.0, 0.0], [0.5, 0.5]])
    pb = np.array([[0.0, 1.0], [0.5, 0.5]])
    r = posterior_agreement(pa, pb, inputs="probs")
    assert r.logpa == -math.inf


def test_stack_of_pairs_matches_single_pairs():
    pairs = [noisy_pair(n=200, k=4, seed=s) for s in range(3)]
    stack = posterior_agreement(np.stack([p[0] for p in pairs]), np.stack([p[1] for p in pairs]))
    for i, (a, b) in enumerate(pairs):
        single = posterior_agreement(a, b)
        assert stack.beta[i] == single.beta
        assert stack.logpa[i] == single.logpa
    assert stack.kernel.shape == (3, 200)


def test_large_logits_do_not_underflow():
    """beta * (logit gaps) far beyond float64's exp range: still finite and exact."""
    a, b = noisy_pair(n=300, k=10, seed=11)
    scale = 1e4
    r = posterior_agreement(a * scale, b * scale)
    r0 = posterior_agreement(a, b)
    assert r.beta * scale == pytest.approx(r0.beta, rel=1e-8)
    assert r.logpa == pytest.approx(r0.logpa, rel=1e-10)


def test_kernel_where_the_product_of_exponentials_underflows():
    """exp(beta a) * exp(beta b) underflows for confident disagreements at large beta; the
    kernel falls back to exp(beta (a + b)) there and matches a log-space reference."""
    a = np.array([[10.0, 0.0, -3.0], [1.0, 0.5, 0.0]])
    b = np.array([[0.0, 10.0, -3.0], [1.0, 0.2, 0.0]])
    for beta in (1.0, 70.0, 100.0, 500.0):  # beta * 10 up to 5000 >> 745
        got = pa_curve(a, b, [beta])[0]
        assert np.isfinite(got)
        assert got == pytest.approx(ref_objective(a, b, beta), rel=1e-12)


def test_second_derivative_at_zero_is_twice_the_class_covariance():
    """f''(0) = 2 sum_i Cov_j(a_ij, b_ij): for a = b = (x, 0) that is x^2 / 2 > 0 per sample,
    so f is convex at 0 (Theorem 3's concavity does not hold there)."""
    from pabench.metrics.kernel import CentredPairs, summed_terms
    import torch

    x = 3.0
    a = torch.tensor([[x, 0.0]] * 5, dtype=torch.float64)
    p = CentredPairs.from_scores(a, a.clone())
    _, f1, f2, _ = summed_terms(p, torch.tensor(0.0, dtype=torch.float64), order=2)
    assert float(f1) == pytest.approx(0.0, abs=1e-12)
    assert float(f2) == pytest.approx(5 * x * x / 2, rel=1e-12)
    h = 1e-4
    curve = pa_curve(a.numpy(), a.numpy(), [0.0, h, 2 * h])
    assert (curve[2] - 2 * curve[1] + curve[0]) / h**2 == pytest.approx(5 * x * x / 2, rel=1e-3)
