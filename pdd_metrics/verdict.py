"""The contamination verdict of a table of benchmarks from their dataset-level tests.

Each test sees its own kind of exposure (issue 33; the measurements: docs/controls.md
and the exposure pages it lists):

- **CoDeC** (Zawalski et al., ICLR 2026) sees a benchmark **seen example by example** (each example
  its own training sequence, in random order, as the authors' notebook contaminates a model): context
  from the same file then lowers the likelihood of most of its examples. It does not see the file
  packed in its published order (there the in-context request resembles training more than the
  baseline does, and the score falls);
- **the exchangeability test** (Oren et al., ICLR 2024) sees a benchmark **seen in its published
  order** (a copy of the file in the corpus), and not examples seen one by one in random order.

So the verdict fires on either: a benchmark is called contaminated where **any** test rejects its
null hypothesis after Holm's correction over **every test of every task of the table**
(:func:`pdd_metrics.multiple_testing.holm_adjusted`, family-wise error rate ``alpha``), and the line
names what was detected (each test's entry declares it).

**CoDeC's null is calibrated, not 1/2.** The paper reads a score above about 0.8 as a red flag and
finds unseen data mostly below 0.5-0.6; a binomial test against 1/2 (the rule before issue 33) does
not hold its level on data the model has seen *the kind of*. Measured with the default model
(SmolLM2-135M-Instruct, float32), each example its own training sequence, 12 optimizer steps
(``benchmarks/contamination_controls.py --exposure examples``; docs/controls-examples.md, "Each kind of
exposure"), files of 48 rows built from real sentences, 3 tuning seeds per shape:

- untouched files, the untuned model: ARC-shaped 0.000, 0.021, 0.021; GSM8K-shaped 0.000, 0.000,
  0.000 (p against 1/2: 1.0);
- the file tuned on, the tuned models: ARC-shaped 0.979, 0.979, 0.958; GSM8K-shaped 1.000, 0.979,
  1.000 (p against 1/2 at most 4.2e-12);
- unseen files of the same shape, the tuned models: ARC-shaped 0.854, 0.812, 0.833; GSM8K-shaped
  0.854, 0.854, 0.917 (p against 1/2 from 7.6e-10 to 7.6e-06);
- besides, issue 33's templated ARC-shaped questions (not rerun here): 1.000 on the file, 0.896
  [0.778, 0.955] on 48 unseen ones;
- at CoDeC's default of 1,000 examples (ARC-shaped rows from the Pile test sample's prose, 1 epoch =
  250 steps; docs/controls-examples.md, "At CoDeC's default of 1,000 examples"): untouched files 0.060,
  0.061, 0.055; the files tuned on 0.988, 0.932, 0.994; unseen files of the shape 0.886, 0.803,
  0.936 [0.919, 0.950].

Against 1/2, every unseen file of the shape is "contaminated" (a model tuned on a benchmark's train
split would flag its test split). :data:`CODEC_NULL_SCORE` is therefore the highest upper end of the
95% Wilson intervals of the scores measured on unseen data of a kind the model was tuned on (44 of
48 GSM8K-shaped rows: 0.917 [0.805, 0.967]), rounded up to 0.97: the measured unseen scores are
estimates from 48 examples, and the null must bound their true rate, not their estimate, for the
test to hold its level at the default 1,000 examples, where sampling noise no longer hides a null
that is too low (0.56 against 1/2 is p < 1e-3 there). Its price: at 48 examples CoDeC alone cannot
call a file contaminated (48 of 48 is p = 0.23 against 0.97), so the tuned files above read
"inconclusive", as the issue asks of a file CoDeC cannot separate from unseen data of its kind (1.000
vs 0.896 there); at 1,000 examples a score of at least 0.981 rejects in a one-task table (Holm's
alpha/2), which a file scoring 0.99 in truth reaches with probability 0.997 (binomial), one at 0.979
(the median tuned file above) with 0.38; measured at 1,000 examples, 2 of the 3 tuned files were
detected (0.988, 0.994), the third (0.932) read "inconclusive", and no unseen file was flagged. On
another model family, Gemma-3-270M (its tokenizer adds ``<bos>``), the same 12 steps on the ARC-shaped
files gave 0.938-1.000 on the files tuned on and 0.875-0.896 [upper end 0.955] on unseen ones. A null
measured on two small models, two shapes and a few exposure levels is a floor for larger models and
heavier exposure, not a proof; docs/controls-shuffled.md lists what was not measured.

Where CoDeC's score is significantly above 1/2 (Holm over the table's CoDeC tests) but not above the
calibrated null, the verdict is **"inconclusive"**: the model has seen this benchmark or data of
its kind and format, and CoDeC cannot tell which.

**A reference of known-unseen examples answers that question** (``pdd_contamination``'s
``references``: examples of the same kind and format the model cannot have seen, freshly written or
dated after its data, scored the same way). Then CoDeC's p-value is the one-sided Fisher exact test
of the benchmark's share of drops against the reference's (:func:`codec_reference_pvalue`), not the
binomial test against a constant: if the model has not seen the benchmark, the benchmark's examples
and the reference's are two samples of the same unseen data of the kind, whatever the kind, the
model and how much of the kind it has seen, so the test holds its level without a calibrated
constant (the calibration above holds for the model and exposures measured; the reference's
exchangeability with the benchmark is the one assumption, and the user's to meet). Its power is
the gap between the two: after 12 steps of tuning on a file, example by example, the file scored
0.958-1.000 and unseen files of its shape 0.812-0.917 (above; Fisher p 0.0062-0.059 at 48 examples,
1.6e-23 to 5.2e-14 at 1,000); on the default model and plain text
(issue 33: 48 WikiMIA-32 non-members), 0.979 on the tuned file and 0.56 on unseen ones; through the
whole pipeline with a reference (``tests/end_to_end/test_verdict_end_to_end.py``), 0.875 against 0.583, p =
0.0012. Like CoDeC's own binomial interval, the test treats the examples' drops as independent (each
example's in-context example is drawn from its own file, which couples them weakly). A task with a
reference is not "inconclusive": the reference says what data of its kind scores.

**The verdict knows no test by name.** Each test's entry in the registry of dataset-level tests
(:data:`pdd_tasks.dataset_tests.DATASET_TESTS`) reads its results into an :class:`Evidence` (its
p-value, and where it has one, its p-value against the weaker null "nothing of this kind was seen",
which decides "inconclusive"); :func:`decide_table` corrects and combines them. CoDeC's reading is
:func:`codec_evidence`.

Verdicts (:data:`VERDICTS`):

- ``"contaminated"``: some test rejects after Holm's correction over the table;
- ``"inconclusive"``: none does, but a test's p-value against its weaker null rejects after Holm's
  correction over those p-values (CoDeC's score significantly above 1/2: seen data of this kind, and
  no reference was given);
- ``"not detected"``: none does and every test of the table applied (not evidence of a clean benchmark: the
  tests' power is limited, docs/controls.md);
- ``"no verdict"``: none rejects and some test did not apply (too few examples, shards longer than
  the context): the missing test might have.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from scipy.stats import binom, fisher_exact

from .multiple_testing import holm_adjusted


__all__ = [
    "ALPHA",
    "CODEC_NULL_SCORE",
    "VERDICTS",
    "Decision",
    "Evidence",
    "codec_calibrated_pvalue",
    "codec_evidence",
    "codec_examples_needed",
    "codec_reference_pvalue",
    "decide",
    "decide_table",
    "decide_tables",
    "verdict_of",
]

#: The family-wise error rate of the verdict's tests (over every test of every task of a table).
ALPHA = 0.05

#: CoDeC's calibrated null: the upper end of the 95% Wilson interval of the highest CoDeC score
#: measured on unseen data of a kind the model was tuned on (44 of 48: 0.967), rounded up. Its
#: measurement and the argument: module docstring.
CODEC_NULL_SCORE = 0.97

VERDICTS = ("contaminated", "inconclusive", "not detected", "no verdict")


@dataclass(frozen=True)
class Evidence:
    """What one test says of one task: ``p_value`` against its null (the benchmark was not seen the way
    the test detects), and optionally ``kind_p_value`` against a weaker null (nothing of the benchmark's
    kind was seen: CoDeC against 1/2), which can make the verdict "inconclusive" but never
    "contaminated"."""

    p_value: float
    kind_p_value: float | None = None

    def __post_init__(self) -> None:
        for name in ("p_value", "kind_p_value"):
            value = getattr(self, name)
            if value is not None and not 0 <= value <= 1:
                raise ValueError(f"{name} must be in [0, 1], got {value!r}")


def codec_calibrated_pvalue(drops: int, examples: int, null: float = CODEC_NULL_SCORE) -> float:
    """One-sided exact binomial p-value of a CoDeC score against ``null``: P(X >= ``drops``) for X ~
    Binomial(``examples``, ``null``), the null hypothesis that the benchmark scores no higher than
    unseen data of its kind (:data:`CODEC_NULL_SCORE`; ``null=0.5`` gives
    :func:`pdd_metrics.codec.codec_pvalue`).

    >>> codec_calibrated_pvalue(10, 10, 0.5) == 0.5**10, codec_calibrated_pvalue(0, 10)
    (True, 1.0)
    """
    if isinstance(examples, bool) or not isinstance(examples, int) or examples < 1:
        raise ValueError(f"examples must be a positive whole number, got {examples!r}")
    if isinstance(drops, bool) or not isinstance(drops, int) or not 0 <= drops <= examples:
        raise ValueError(f"drops must be a whole number in [0, {examples}], got {drops!r}")
    if not 0 < null < 1:
        raise ValueError(f"null must be in (0, 1), got {null!r}")
    return float(binom.sf(drops - 1, examples, null))


def codec_reference_pvalue(drops: int, examples: int, reference_drops: int, reference_examples: int) -> float:
    """One-sided Fisher exact p-value of the hypothesis that a benchmark's CoDeC score is no higher
    than that of a reference of known-unseen examples of its kind, scored the same way: the
    benchmark's ``drops`` of ``examples`` against the reference's ``reference_drops`` of
    ``reference_examples`` (the 2 x 2 table of drops and non-drops, ``alternative="greater"``).
    Exact given both margins for independent drops, so it holds its level at any sample size.

    >>> f"{codec_reference_pvalue(47, 48, 27, 48):.1e}", codec_reference_pvalue(20, 48, 27, 48) > 0.9
    ('4.1e-07', True)
    """
    for name, drops_, n in (("", drops, examples), ("reference_", reference_drops, reference_examples)):
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise ValueError(f"{name}examples must be a positive whole number, got {n!r}")
        if isinstance(drops_, bool) or not isinstance(drops_, int) or not 0 <= drops_ <= n:
            raise ValueError(f"{name}drops must be a whole number in [0, {n}], got {drops_!r}")
    table = [[drops, examples - drops], [reference_drops, reference_examples - reference_drops]]
    return float(fisher_exact(table, alternative="greater").pvalue)


def codec_evidence(
    drops: int, examples: int, reference: tuple[int, int] | None = None, null: float = CODEC_NULL_SCORE
) -> Evidence:
    """CoDeC's :class:`Evidence` from ``drops`` of ``examples``: against a reference of known-unseen
    examples ``(drops, examples)`` where one was scored (:func:`codec_reference_pvalue`; no weaker null:
    the reference says what data of its kind scores), else against the calibrated ``null``
    (:func:`codec_calibrated_pvalue`) with the binomial test against 1/2 as the weaker null.

    >>> codec_evidence(30, 40, null=0.9).kind_p_value < 0.01, codec_evidence(47, 48, (27, 48)).kind_p_value
    (True, None)
    """
    if reference is not None:
        return Evidence(codec_reference_pvalue(drops, examples, *reference))
    return Evidence(codec_calibrated_pvalue(drops, examples, null), codec_calibrated_pvalue(drops, examples, 0.5))


def codec_examples_needed(score: float, null: float = CODEC_NULL_SCORE, alpha: float = ALPHA / 2) -> int | None:
    """About how many examples a CoDeC score of ``score`` needs for its binomial test against ``null``
    (:func:`codec_calibrated_pvalue`) to reject at ``alpha`` (default: Holm's first step in a table of
    one task and two tests): the smallest n (to 1%, by bisection over n) with P(X >= round(score n)) <=
    ``alpha`` for X ~ Binomial(n, null). None where ``score`` is not above ``null`` (no number of
    examples then rejects) or where it would take more than 10^7.

    >>> codec_examples_needed(0.99), codec_examples_needed(0.95)
    (290, None)
    """
    if not 0 <= score <= 1:
        raise ValueError(f"score must be in [0, 1], got {score!r}")
    if score <= null:
        return None

    def rejects(n: int) -> bool:
        return codec_calibrated_pvalue(min(n, round(score * n)), n, null) <= alpha

    high = 1
    while not rejects(high):
        high *= 2
        if high > 10**7:
            return None
    low = high // 2
    while high - low > max(1, low // 100):
        middle = (low + high) // 2
        low, high = (low, middle) if rejects(middle) else (middle, high)
    return high


def verdict_of(flags: Mapping[str, bool | None], like_its_kind: bool = False) -> str:
    """The verdict from each test's flag (True: rejects; False: does not; None: did not apply) and
    whether a weaker null (CoDeC against 1/2) rejects (``like_its_kind``).

    >>> verdict_of({"codec": False, "exchangeability": True}), verdict_of({"codec": True, "exchangeability": None})
    ('contaminated', 'contaminated')
    >>> verdict_of({"codec": False, "exchangeability": None}), verdict_of({"codec": False, "exchangeability": False})
    ('no verdict', 'not detected')
    """
    if any(flags.values()):
        return "contaminated"
    if like_its_kind:
        return "inconclusive"
    if not flags or any(flag is None for flag in flags.values()):
        return "no verdict"
    return "not detected"


@dataclass(frozen=True)
class Decision:
    """One task's verdict: per test (the tests of the table, in its order) the raw p-value and its
    Holm-adjusted value over the table (None where it did not apply), its flag, the Holm-adjusted
    p-value against its weaker null (``kind_adjusted``: None where it has none), and the verdict."""

    p_values: dict[str, float | None]
    adjusted: dict[str, float | None]
    flags: dict[str, bool | None]
    kind_adjusted: dict[str, float | None]
    verdict: str

    @property
    def rejecting(self) -> list[str]:
        """The tests that reject, in the table's order."""
        return [test for test, flag in self.flags.items() if flag]

    @property
    def missing(self) -> list[str]:
        """The tests that did not apply, in the table's order."""
        return [test for test, flag in self.flags.items() if flag is None]


def decide_table(tasks: Mapping[str, Mapping[str, Evidence | None]], alpha: float = ALPHA) -> dict[str, Decision]:
    """Every task's :class:`Decision`. ``tasks``: task -> test -> its :class:`Evidence` (None: the test
    did not apply); the table's tests are every test named for any task, in order of first mention.
    Holm's correction runs over every p-value of the table (every test of every task); a second one
    over the weaker nulls' p-values decides "inconclusive". A test not named for a task (a group's
    test without a group-level form) is no part of its verdict: its flag is None, but its absence does
    not make the verdict "no verdict" as a named test that did not apply (None) does.

    >>> found = decide_table({"a": {"codec": codec_evidence(990, 1000), "exchangeability": Evidence(0.6)},
    ...                       "b": {"codec": codec_evidence(20, 40), "exchangeability": Evidence(0.001)}})
    >>> found["a"].verdict, found["a"].rejecting, found["b"].verdict, found["b"].rejecting
    ('contaminated', ['codec'], 'contaminated', ['exchangeability'])
    """
    tests = list(dict.fromkeys(test for found in tasks.values() for test in found))
    p_values: dict[tuple[str, str], float] = {}
    kind: dict[tuple[str, str], float] = {}
    for task, found in tasks.items():
        for test, evidence in found.items():
            if evidence is None:
                continue
            if not isinstance(evidence, Evidence):
                raise TypeError(f"{task}: {test}'s evidence must be an Evidence (or None), got {evidence!r}")
            p_values[task, test] = evidence.p_value
            if evidence.kind_p_value is not None:
                kind[task, test] = evidence.kind_p_value
    adjusted, kind_adjusted = _holm(p_values), _holm(kind)
    decisions = {}
    for task in tasks:
        raw = {test: p_values.get((task, test)) for test in tests}
        adj = {test: adjusted.get((task, test)) for test in tests}
        flags = {test: None if p is None else bool(p <= alpha) for test, p in adj.items()}
        weaker = {test: kind_adjusted.get((task, test)) for test in tests}
        like_its_kind = any(p is not None and p <= alpha for p in weaker.values())
        named = {test: flag for test, flag in flags.items() if test in tasks[task]}
        decisions[task] = Decision(raw, adj, flags, weaker, verdict_of(named, like_its_kind))
    return decisions


def decide_tables(
    tables: Sequence[Mapping[str, Mapping[str, Evidence | None]]], alpha: float = ALPHA
) -> list[dict[str, Decision]]:
    """:func:`decide_table` of each of ``tables`` in turn, each its own Holm family (a run's table, a model's)."""
    return [decide_table(table, alpha) for table in tables]


def _holm(p_values: dict) -> dict:
    """``p_values`` Holm-adjusted as one family (keys kept; none: none)."""
    if not p_values:
        return {}
    return dict(zip(p_values, (float(p) for p in holm_adjusted(list(p_values.values()))), strict=True))


def decide(tests: Mapping[str, Evidence | None], alpha: float = ALPHA) -> Decision:
    """:func:`decide_table` of one task (Holm over its own tests only).

    >>> decide({"codec": codec_evidence(30, 40, null=0.9), "exchangeability": Evidence(0.5)}).verdict
    'inconclusive'
    """
    return decide_table({"task": tests}, alpha)["task"]
