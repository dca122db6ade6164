"""Holm's step-down adjustment (pdd_metrics.multiple_testing) against its definition."""

from __future__ import annotations

import doctest
import itertools

import numpy as np
import pytest

import pdd_metrics.multiple_testing
from pdd_metrics.multiple_testing import holm_adjusted


def holm_by_definition(p: list[float], alpha: float) -> set[int]:
    """The tests Holm's procedure rejects at ``alpha``: step down the sorted p-values while
    p_(i) <= alpha / (m - i + 1) (Holm 1979)."""
    order = sorted(range(len(p)), key=lambda i: p[i])
    rejected = set()
    for rank, i in enumerate(order):
        if p[i] > alpha / (len(p) - rank):
            break
        rejected.add(i)
    return rejected


def test_adjusted_p_values_reject_what_the_procedure_rejects():
    rng = np.random.default_rng(0)
    for m in (1, 2, 3, 5, 8):
        for _ in range(200):
            p = rng.uniform(0, 0.2, m).round(3).tolist()  # rounded: ties too
            adjusted = holm_adjusted(p)
            for alpha in (0.01, 0.05, 0.1):
                assert {i for i in range(m) if adjusted[i] <= alpha} == holm_by_definition(p, alpha), (p, alpha)


def test_one_p_value_is_its_own_adjustment_and_order_is_kept():
    assert holm_adjusted([0.2]).tolist() == [0.2]
    for p in itertools.permutations([0.01, 0.04, 0.03]):
        expected = {0.01: 0.03, 0.03: 0.06, 0.04: 0.06}
        assert holm_adjusted(list(p)).tolist() == pytest.approx([expected[x] for x in p])


@pytest.mark.parametrize("bad", [[], [0.5, float("nan")], [1.5], [-0.1]])
def test_bad_p_values_are_refused(bad):
    with pytest.raises(ValueError, match="p_values"):
        holm_adjusted(bad)


def test_doctest():
    result = doctest.testmod(pdd_metrics.multiple_testing)
    assert result.failed == 0 and result.attempted > 0  # examples that ran, none failed
