"""The sharded likelihood comparison test (pdd_metrics.exchangeability) on synthetic orders.

The fixture: examples are item ids drawn i.i.d., so the "canonical" order of a file is a random
order; a synthetic "model" scores an ordered shard as the sum of transition scores A[x_k, x_k+1]
(random, fixed per model): the score depends on the order, but nothing ties the canonical order to
the model. A "contaminated" model adds a bonus to the transitions of the canonical file.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import kstest, ttest_1samp

from pdd_metrics.exchangeability import (
    TooFewExamples,
    shard_bounds,
    shard_permutations,
    shard_sizes,
    sharded_comparison_test,
)


def sequence_score(items: np.ndarray, transitions: np.ndarray, memorised: set | None = None, bonus: float = 0.0):
    pairs = list(zip(items[:-1], items[1:], strict=True))
    score = float(sum(transitions[a, b] for a, b in pairs))
    if memorised:
        score += bonus * sum((int(a), int(b)) in memorised for a, b in pairs)
    return score


def run_test(seed: int, shards: int = 10, per_shard: int = 5, permutations: int = 20, bonus: float = 0.0):
    rng = np.random.default_rng(seed)
    vocabulary = 50
    transitions = rng.normal(size=(vocabulary, vocabulary))
    canonical = rng.integers(vocabulary, size=shards * per_shard)
    memorised = {(int(a), int(b)) for a, b in zip(canonical[:-1], canonical[1:], strict=True)} if bonus else None
    canonical_scores, permuted_scores = [], []
    for index, (start, stop) in enumerate(shard_bounds(canonical.size, shards)):
        shard = canonical[start:stop]
        canonical_scores.append(sequence_score(shard, transitions, memorised, bonus))
        orders = shard_permutations(shard.size, permutations, seed=seed, shard_index=index)
        permuted_scores.append([sequence_score(shard[order], transitions, memorised, bonus) for order in orders])
    return sharded_comparison_test(canonical_scores, permuted_scores)


def test_shards_are_split_as_the_reference_code():
    assert shard_sizes(10, 5) == [2, 2, 2, 2, 2]
    assert shard_sizes(13, 5) == [3, 3, 3, 2, 2]
    assert shard_bounds(13, 5) == [(0, 3), (3, 6), (6, 9), (9, 11), (11, 13)]


def test_too_few_examples_names_the_fix():
    with pytest.raises(TooFewExamples, match=r"37 examples are too few for 50 shards.*num_shards\": 18"):
        shard_sizes(37, 50)
    with pytest.raises(TooFewExamples, match="at least 2 shards"):
        shard_sizes(100, 1)


def test_permutations_are_seeded_per_shard():
    first = shard_permutations(6, 4, seed=3, shard_index=2)
    assert (first == shard_permutations(6, 4, seed=3, shard_index=2)).all()
    assert not (first == shard_permutations(6, 4, seed=3, shard_index=1)).all()
    assert all(sorted(order) == list(range(6)) for order in first.tolist())


def test_statistic_is_the_one_sample_t_test_of_the_differences():
    rng = np.random.default_rng(1)
    canonical = rng.normal(size=12)
    permuted = rng.normal(size=(12, 7))
    result = sharded_comparison_test(canonical, permuted)
    reference = ttest_1samp(canonical - permuted.mean(axis=1), 0.0, alternative="greater")
    assert result.t_statistic == pytest.approx(reference.statistic)
    assert result.p_value == pytest.approx(reference.pvalue)
    assert result.num_shards == 12


def test_order_free_scores_give_no_evidence():
    result = sharded_comparison_test([-5.0, -6.0, -7.0], [[-5.0, -5.0], [-6.0, -6.0], [-7.0, -7.0]])
    assert (result.t_statistic, result.p_value) == (0.0, 1.0)


def test_p_value_is_uniform_when_the_order_carries_no_information():
    p_values = np.array([run_test(seed).p_value for seed in range(400)])
    assert kstest(p_values, "uniform").pvalue > 0.01
    # false-positive rate at 0.05: within the 99.9% binomial band of 400 draws around 0.05
    assert 0.01 <= np.mean(p_values < 0.05) <= 0.10


def test_p_value_is_small_when_the_canonical_order_was_memorised():
    p_values = [run_test(seed, bonus=2.0).p_value for seed in range(20)]
    assert max(p_values) < 1e-3


def test_bad_shapes_are_refused():
    with pytest.raises(ValueError, match=r"expected shape \(3, P\)"):
        sharded_comparison_test([1.0, 2.0, 3.0], [[1.0], [2.0]])
    with pytest.raises(ValueError, match="r >= 2"):
        sharded_comparison_test([1.0], [[1.0]])
    with pytest.raises(ValueError, match="finite"):
        sharded_comparison_test([1.0, -np.inf], [[1.0], [2.0]])
