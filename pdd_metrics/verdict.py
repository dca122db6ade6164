"""The contamination verdict of a table of benchmarks from their dataset-level tests.

Each test sees its own kind of exposure (issue 33; the measurements: docs/dataset-tests.md,
"Controls"):

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
names what was detected (:data:`DETECTS`).

**CoDeC's null is calibrated, not 1/2.** The paper reads a score above about 0.8 as a red flag and
finds unseen data mostly below 0.5-0.6; a binomial test against 1/2 (the rule before issue 33) does
not hold its level on data the model has seen *the kind of*. Measured with the default model
(SmolLM2-135M-Instruct, float32), each example its own training sequence, 12 optimizer steps
(``benchmarks/contamination_controls.py --exposure examples``; docs/dataset-tests.md, "Each kind of
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
  250 steps; docs/dataset-tests.md, "At CoDeC's default of 1,000 examples"): untouched files 0.060,
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
heavier exposure, not a proof; docs/dataset-tests.md lists what was not measured.

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

Verdicts (:data:`VERDICTS`):

- ``"contaminated"``: some test rejects after Holm's correction over the table;
- ``"inconclusive"``: none does, but CoDeC's score is significantly above 1/2 (seen data of this kind)
  and no reference was given;
- ``"not detected"``: none does and every test applied (not evidence of a clean benchmark: the
  tests' power is limited, docs/dataset-tests.md);
- ``"no verdict"``: none rejects and some test did not apply (too few examples, shards longer than
  the context): the missing test might have.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from scipy.stats import binom, fisher_exact

from .multiple_testing import holm_adjusted


__all__ = [
    "ALPHA",
    "CODEC_NULL_SCORE",
    "DETECTS",
    "REFERENCE",
    "TESTS",
    "VERDICTS",
    "Decision",
    "codec_calibrated_pvalue",
    "codec_reference_pvalue",
    "decide",
    "decide_table",
    "verdict_of",
]

#: The family-wise error rate of the verdict's tests (over every test of every task of a table).
ALPHA = 0.05

#: CoDeC's calibrated null: the upper end of the 95% Wilson interval of the highest CoDeC score
#: measured on unseen data of a kind the model was tuned on (44 of 48: 0.967), rounded up. Its
#: measurement and the argument: module docstring.
CODEC_NULL_SCORE = 0.97

#: The verdict's tests, in the order the table shows them.
TESTS = ("codec", "exchangeability")

#: The input key of a task's reference of known-unseen examples for CoDeC: ``(drops, examples)``.
REFERENCE = "codec_reference"

#: What each test's rejection means: the line names it.
DETECTS = {"codec": "seen example by example", "exchangeability": "seen in its published order"}

VERDICTS = ("contaminated", "inconclusive", "not detected", "no verdict")


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


def verdict_of(flags: Mapping[str, bool | None], like_its_kind: bool = False) -> str:
    """The verdict from each test's flag (True: rejects; False: does not; None: did not apply) and
    whether CoDeC's score is significantly above 1/2 (``like_its_kind``).

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
    """One task's verdict: each test's p-value (CoDeC's against its reference where the task has one,
    else against :data:`CODEC_NULL_SCORE`) and its Holm-adjusted value over the table (None where it
    did not apply), each flag, CoDeC's adjusted p-value against 1/2 (``codec_half_adjusted``; None
    with a reference), the verdict, what was detected, and the reference's ``(drops, examples)``."""

    p_values: dict[str, float | None]
    adjusted: dict[str, float | None]
    flags: dict[str, bool | None]
    codec_half_adjusted: float | None
    verdict: str
    reference: tuple[int, int] | None = None

    @property
    def detected(self) -> list[str]:
        """What the rejecting tests detected (:data:`DETECTS`), in :data:`TESTS` order."""
        return [DETECTS[test] for test in TESTS if self.flags.get(test)]


def decide_table(
    tasks: Mapping[str, Mapping[str, object]],
    alpha: float = ALPHA,
    codec_null: float = CODEC_NULL_SCORE,
) -> dict[str, Decision]:
    """Every task's :class:`Decision`. ``tasks``: task -> ``{"codec": (drops, examples) or None,
    "exchangeability": p-value or None}``, and optionally ``"codec_reference": (drops, examples)`` of
    a reference of known-unseen examples (:data:`REFERENCE`; CoDeC is then tested against it,
    :func:`codec_reference_pvalue`). Holm's correction runs over every p-value of the table (both
    tests of every task); a second one over the CoDeC tests against 1/2 of the tasks without a
    reference decides "inconclusive".

    >>> found = decide_table({"a": {"codec": (990, 1000), "exchangeability": 0.6}, "b": {"codec": (20, 40), "exchangeability": 0.001}})
    >>> found["a"].verdict, found["a"].detected, found["b"].verdict, found["b"].detected
    ('contaminated', ['seen example by example'], 'contaminated', ['seen in its published order'])
    """
    p_values: dict[tuple[str, str], float] = {}
    half: dict[str, float] = {}
    for task, tests in tasks.items():
        unknown = set(tests) - {*TESTS, REFERENCE}
        if unknown:
            raise ValueError(f"{task}: unknown test(s) {sorted(unknown)}; the verdict's tests are {TESTS}")
        if tests.get("codec") is not None:
            drops, examples = tests["codec"]
            if tests.get(REFERENCE) is not None:
                p_values[task, "codec"] = codec_reference_pvalue(drops, examples, *tests[REFERENCE])
            else:
                p_values[task, "codec"] = codec_calibrated_pvalue(drops, examples, codec_null)
                half[task] = codec_calibrated_pvalue(drops, examples, 0.5)
        if tests.get("exchangeability") is not None:
            p_values[task, "exchangeability"] = float(tests["exchangeability"])
    adjusted, half_adjusted = _holm(p_values), _holm(half)
    decisions = {}
    for task in tasks:
        raw = {test: p_values.get((task, test)) for test in TESTS}
        adj = {test: adjusted.get((task, test)) for test in TESTS}
        flags = {test: None if p is None else bool(p <= alpha) for test, p in adj.items()}
        kind = half_adjusted.get(task)
        like_its_kind = kind is not None and kind <= alpha
        reference = tuple(tasks[task][REFERENCE]) if raw["codec"] is not None and tasks[task].get(REFERENCE) else None
        decisions[task] = Decision(raw, adj, flags, kind, verdict_of(flags, like_its_kind), reference)
    return decisions


def _holm(p_values: dict) -> dict:
    """``p_values`` Holm-adjusted as one family (keys kept; none: none)."""
    if not p_values:
        return {}
    return dict(zip(p_values, (float(p) for p in holm_adjusted(list(p_values.values()))), strict=True))


def decide(tests: Mapping[str, object], alpha: float = ALPHA, codec_null: float = CODEC_NULL_SCORE) -> Decision:
    """:func:`decide_table` of one task (Holm over its own tests only).

    >>> decide({"codec": (30, 40), "exchangeability": 0.5}, codec_null=0.9).verdict  # 0.75: above 1/2, not 0.9
    'inconclusive'
    """
    return decide_table({"task": tests}, alpha, codec_null)["task"]
