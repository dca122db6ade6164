"""The contamination verdict of a benchmark from its dataset-level tests, never from one test alone.

The 2026 study of dataset-level methods (arXiv 2606.03305) found them right in 199 of 335 cases:
a single test's call is wrong too often to be a verdict. Here a benchmark is called contaminated
only where every test applied and each one rejects its null hypothesis after Holm's correction
across all the tests read together (:func:`pdd_metrics.multiple_testing.holm_adjusted`, family-wise
error rate ``alpha``):

- ``"contaminated"``: every test flags it (adjusted p <= alpha);
- ``"inconclusive"``: some test flags it, another does not;
- ``"not detected"``: no test flags it (which is not evidence of a clean benchmark: the tests'
  power is limited, docs/dataset-tests.md);
- ``"no verdict"``: fewer than ``required`` tests applied.

The p-values are the exchangeability test's (Oren et al. 2024) and CoDeC's binomial one
(:func:`pdd_metrics.codec.codec_pvalue`); which tests and how the verdict's level and power were
measured: docs/dataset-tests.md ("Controls").
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from .multiple_testing import holm_adjusted


__all__ = ["ALPHA", "VERDICTS", "Decision", "decide", "verdict_of"]

#: The family-wise error rate of the verdict's tests.
ALPHA = 0.05

VERDICTS = ("contaminated", "inconclusive", "not detected", "no verdict")


def verdict_of(flags: Mapping[str, bool | None], required: int = 2) -> str:
    """The verdict from each test's flag (True: rejects; False: does not; None: did not apply).

    >>> verdict_of({"codec": True, "exchangeability": True}), verdict_of({"codec": True, "exchangeability": False})
    ('contaminated', 'inconclusive')
    >>> verdict_of({"codec": False, "exchangeability": None})
    'no verdict'
    """
    applied = [flag for flag in flags.values() if flag is not None]
    if len(applied) < max(required, 1) or len(applied) < len(flags):
        return "no verdict"
    if all(applied):
        return "contaminated"
    return "inconclusive" if any(applied) else "not detected"


@dataclass(frozen=True)
class Decision:
    """Holm-adjusted p-values, each test's flag (None where it did not apply) and the verdict."""

    adjusted: dict[str, float | None]
    flags: dict[str, bool | None]
    verdict: str


def decide(p_values: Mapping[str, float | None], alpha: float = ALPHA, required: int = 2) -> Decision:
    """Holm's correction across the p-values given (None: the test did not apply), each test's flag at
    ``alpha``, and :func:`verdict_of`.

    >>> decide({"codec": 0.01, "exchangeability": 0.04}).verdict  # adjusted 0.02, 0.04
    'contaminated'
    >>> decide({"codec": 0.03, "exchangeability": 0.04}).adjusted  # 2 x 0.03 = 0.06 > 0.05
    {'codec': 0.06, 'exchangeability': 0.06}
    """
    given = {name: p for name, p in p_values.items() if p is not None}
    adjusted: dict[str, float | None] = dict.fromkeys(p_values)
    if given:
        adjusted |= dict(zip(given, (float(p) for p in holm_adjusted(list(given.values()))), strict=True))
    flags = {name: None if p is None else bool(p <= alpha) for name, p in adjusted.items()}
    return Decision(adjusted, flags, verdict_of(flags, required))
