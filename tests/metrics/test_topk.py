"""approximate_mu_sigma (Min-K%++'s mu/sigma from top-k log-probs) against brute force."""

from __future__ import annotations

import doctest

import numpy as np
import pytest

import pdd_metrics.topk
from pdd_metrics import approximate_mu_sigma


def exact_mu_sigma(logprobs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Eq. 3-4 over full distributions, shape (n, V): the reference."""
    probs = np.exp(logprobs)
    mu = (probs * logprobs).sum(-1)
    sigma = np.sqrt((probs * (logprobs - mu[:, None]) ** 2).sum(-1))
    return mu, sigma


def random_distributions(rng, n: int, vocab: int, temperature: float = 2.0) -> np.ndarray:
    logits = rng.normal(size=(n, vocab)) * temperature
    return logits - np.logaddexp.reduce(logits, axis=-1, keepdims=True)


def top_k_of(logprobs: np.ndarray, k: int, rng) -> list[np.ndarray]:
    """The k largest log-probs per row, shuffled (servers need not sort)."""
    rows = []
    for row in logprobs:
        top = np.sort(row)[::-1][:k].copy()
        rng.shuffle(top)
        rows.append(top)
    return rows


def brute_force_completion(top: np.ndarray, token: float, vocab: int, tolerance: float = 1e-4) -> np.ndarray:
    """The completed distribution written out token by token (independent of the vectorized code)."""
    known = list(top)
    if not any(abs(value - token) <= tolerance for value in known):
        known.append(token)
    mass = max(0.0, 1.0 - sum(np.exp(known)))
    rest = vocab - len(known)
    tail = [np.log(mass / rest)] * rest if mass > 0 and rest > 0 else [-np.inf] * rest
    return np.array(known + tail)


def moments(logprobs: np.ndarray) -> tuple[float, float]:
    probs = np.exp(logprobs)
    finite = np.isfinite(logprobs)
    mu = float((probs[finite] * logprobs[finite]).sum())
    return mu, float(np.sqrt((probs[finite] * (logprobs[finite] - mu) ** 2).sum()))


def test_doctests():
    result = doctest.testmod(pdd_metrics.topk)
    assert result.failed == 0 and result.attempted > 0  # examples that ran, none failed


@pytest.mark.parametrize("vocab", [2, 7, 50])
def test_exact_when_every_token_is_reported(vocab):
    rng = np.random.default_rng(vocab)
    full = random_distributions(rng, 30, vocab)
    tokens = full[np.arange(30), rng.integers(0, vocab, size=30)]
    mu, sigma = approximate_mu_sigma(top_k_of(full, vocab, rng), tokens, vocab)
    want_mu, want_sigma = exact_mu_sigma(full)
    assert mu.dtype == np.float32 and sigma.dtype == np.float32
    np.testing.assert_allclose(mu, want_mu, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(sigma, want_sigma, rtol=1e-6, atol=1e-6)


def test_exact_when_the_unreported_tokens_really_are_uniform():
    # 5 peaked tokens + 995 tokens of equal probability: the uniform tail is the truth.
    rng = np.random.default_rng(1)
    vocab, k = 1000, 5
    full = np.empty((10, vocab))
    for row in full:
        head = rng.dirichlet(np.ones(k)) * 0.8
        row[:k] = np.log(head)
        row[k:] = np.log(0.2 / (vocab - k))
    tokens = full[:, 2]
    mu, sigma = approximate_mu_sigma(top_k_of(full, k, rng), tokens, vocab)
    want_mu, want_sigma = exact_mu_sigma(full)
    np.testing.assert_allclose(mu, want_mu, rtol=1e-6)
    np.testing.assert_allclose(sigma, want_sigma, rtol=1e-6)


@pytest.mark.parametrize("k", [1, 3, 10])
def test_matches_brute_force_completion_on_random_distributions(k):
    rng = np.random.default_rng(k)
    vocab, n = 64, 40
    full = random_distributions(rng, n, vocab, temperature=3.0)
    # half the actual tokens are the argmax (inside the top-k), half random (usually outside)
    ids = np.where(np.arange(n) % 2 == 0, full.argmax(-1), rng.integers(0, vocab, size=n))
    tokens = full[np.arange(n), ids]
    top = top_k_of(full, k, rng)
    mu, sigma = approximate_mu_sigma(top, tokens, vocab)
    for i in range(n):
        want_mu, want_sigma = moments(brute_force_completion(top[i], tokens[i], vocab))
        assert mu[i] == pytest.approx(want_mu, rel=1e-5, abs=1e-6)
        assert sigma[i] == pytest.approx(want_sigma, rel=1e-5, abs=1e-6)
    # the uniform tail has the maximum entropy: estimated mu never above the exact one
    exact_mu, _ = exact_mu_sigma(full)
    assert np.all(mu <= exact_mu + 1e-5)


def test_error_shrinks_as_k_grows():
    rng = np.random.default_rng(7)
    vocab = 500
    full = random_distributions(rng, 200, vocab, temperature=2.5)
    tokens = full[np.arange(200), rng.integers(0, vocab, size=200)]
    exact_mu, exact_sigma = exact_mu_sigma(full)
    errors = []
    for k in (1, 5, 20, 100, vocab):
        mu, sigma = approximate_mu_sigma(top_k_of(full, k, rng), tokens, vocab)
        errors.append((np.abs(mu - exact_mu).mean(), np.abs(sigma - exact_sigma).mean()))
    mu_errors = [e[0] for e in errors]
    assert mu_errors == sorted(mu_errors, reverse=True)
    assert errors[-1][0] < 1e-5 and errors[-1][1] < 1e-5
    assert errors[0][0] > 10 * errors[3][0]


def test_actual_token_outside_top_k_is_added():
    # p = (0.5, 0.3, 0.1, 0.05, 0.05), |V| = 5. top-1 reported, actual token has p = 0.1.
    lp = np.log([0.5, 0.3, 0.1, 0.05, 0.05])
    mu, sigma = approximate_mu_sigma([lp[:1]], np.array([lp[2]]), vocab_size=5)
    # known: 0.5, 0.1; tail 0.4 over 3 tokens
    completed = np.log([0.5, 0.1, 0.4 / 3, 0.4 / 3, 0.4 / 3])
    want = moments(completed)
    assert (float(mu[0]), float(sigma[0])) == pytest.approx(want, rel=1e-6)


def test_actual_token_inside_top_k_is_not_counted_twice():
    lp = np.log([0.5, 0.3, 0.1, 0.05, 0.05])
    # the echoed value differs from the reported one by float32/JSON rounding only
    echoed = np.array([np.float32(lp[1]) + 3e-7])
    mu, sigma = approximate_mu_sigma([lp[:2]], echoed, vocab_size=5)
    completed = np.log([0.5, 0.3, 0.2 / 3, 0.2 / 3, 0.2 / 3])
    assert (float(mu[0]), float(sigma[0])) == pytest.approx(moments(completed), rel=1e-5)
    # a tighter tolerance than the rounding: the token is taken as a further, distinct token
    mu_strict, _ = approximate_mu_sigma([lp[:2]], echoed, vocab_size=5, tolerance=1e-9)
    assert mu_strict[0] != pytest.approx(mu[0], rel=1e-4)


def test_zero_tail_mass_adds_nothing():
    # 3 of 10 tokens hold all the mass; the other 7 have probability 0
    lp = np.log([0.6, 0.3, 0.1])
    mu, sigma = approximate_mu_sigma([lp], np.array([lp[0]]), vocab_size=10)
    assert (float(mu[0]), float(sigma[0])) == pytest.approx(moments(lp), rel=1e-6)


def test_known_mass_above_one_from_rounding_is_not_renormalized():
    lp = np.log([0.6, 0.3, 0.1]) + 1e-6  # sums to 1 + 1e-6
    mu, _ = approximate_mu_sigma([lp], np.array([lp[0]]), vocab_size=100)
    assert float(mu[0]) == pytest.approx(moments(lp)[0], rel=1e-6)


def test_k_at_least_vocab_has_no_tail_and_one_hot_gives_zero_sigma():
    mu, sigma = approximate_mu_sigma([np.array([0.0, -np.inf])], np.array([0.0]), vocab_size=2)
    assert float(mu[0]) == 0.0 and float(sigma[0]) == 0.0
    # k = |V| = 3, reported values sum to slightly less than 1: no tokens left for a tail
    lp = np.log([0.5, 0.3, 0.19])
    mu, _ = approximate_mu_sigma([lp], np.array([lp[1]]), vocab_size=3)
    assert float(mu[0]) == pytest.approx(moments(lp)[0], rel=1e-6)


def test_k_may_differ_per_position_and_be_empty():
    lp = np.log([0.5, 0.25, 0.125, 0.125])
    top = [lp[:1], lp, np.array([])]
    tokens = np.array([lp[0], lp[2], lp[1]])
    mu, sigma = approximate_mu_sigma(top, tokens, vocab_size=4)
    exact = moments(lp)
    assert (float(mu[1]), float(sigma[1])) == pytest.approx(exact, rel=1e-6)
    # position 2: only the actual token (0.25) known, 0.75 over 3 tokens
    assert (float(mu[2]), float(sigma[2])) == pytest.approx(moments(np.log([0.25, 0.25, 0.25, 0.25])), abs=1e-6)
    # position 0: 0.5 known, 0.5 over 3 tokens
    assert (float(mu[0]), float(sigma[0])) == pytest.approx(moments(np.log([0.5, 1 / 6, 1 / 6, 1 / 6])), rel=1e-6)


@pytest.mark.parametrize(
    ("top", "tokens", "vocab", "message"),
    [
        ([np.array([-1.0])], np.array([-1.0, -2.0]), 10, "top_logprobs has 1 positions but token_logprobs has 2"),
        ([np.array([-1.0, -2.0, -3.0])], np.array([-4.0]), 3, "position 0 has 4 known tokens .* vocab_size is 3"),
        ([np.array([0.5])], np.array([-1.0]), 10, "expected natural-log probabilities"),
        ([np.array([np.nan])], np.array([-1.0]), 10, "without NaN"),
        ([np.array([-1.0])], np.array([np.nan]), 10, r"token_logprobs\[0\] is nan"),
        ([np.array([-1.0])], np.array([2.0]), 10, "> 0"),
        ([np.array([-1.0])], np.array([-1.0]), 0, "vocab_size must be a positive integer"),
        ([np.array([[-1.0]])], np.array([-1.0]), 10, "must be a 1-D array"),
    ],
)
def test_bad_input_is_refused_with_a_clear_message(top, tokens, vocab, message):
    with pytest.raises(ValueError, match=message):
        approximate_mu_sigma(top, tokens, vocab)
