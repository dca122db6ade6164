"""The contamination verdict (pdd_metrics.verdict) and how ``lm-eval-pdd table`` words it, on
hand-made pdd_contamination results (the real lm_eval run: tests/tasks/test_contamination_task.py).

The cases marked "measured" are the numbers of the exposure controls (docs/controls-examples.md,
"Each kind of exposure"; ``benchmarks/contamination_controls.py --exposure examples``): the default model tuned on
ARC-shaped files of 48 examples, each example its own sequence."""

from __future__ import annotations

import doctest

import numpy as np
import pytest
from support.results import results_of

import pdd_metrics.verdict
from pdd_metrics.codec import codec_pvalue
from pdd_metrics.multiple_testing import holm_adjusted
from pdd_metrics.verdict import (
    CODEC_NULL_SCORE,
    Evidence,
    codec_calibrated_pvalue,
    codec_evidence,
    codec_examples_needed,
    codec_reference_pvalue,
    decide_table,
    verdict_of,
)
from pdd_tasks.dataset_tests import DATASET_TESTS
from pdd_tasks.tools.report.tables import contamination_checks, contamination_controls


def evidence_of(codec=None, exchangeability=None, reference=None) -> dict:
    """A task's evidence as the results reader builds it: CoDeC's ``(drops, examples)`` (against
    ``reference``'s where given), the exchangeability test's p-value; None: did not apply."""
    return {
        "codec": None if codec is None else codec_evidence(*codec, reference),
        "exchangeability": None if exchangeability is None else Evidence(exchangeability),
    }


def decide(codec=None, exchangeability=None, reference=None):
    return pdd_metrics.verdict.decide(evidence_of(codec, exchangeability, reference))


def detected(decision) -> list[str]:
    return [DATASET_TESTS[test].reading.detects for test in decision.rejecting]


# the table's columns: task, accuracy, then per test (CoDeC, exchangeability) its number, p, Holm p
CODEC, CODEC_P, CODEC_HOLM, EXCHANGEABILITY_P, EXCHANGEABILITY_HOLM, VERDICT, NOT_APPLIED = 2, 3, 4, 6, 7, 8, 9


def test_either_test_calls_it_contaminated_and_a_missing_test_leaves_no_verdict_only_where_none_fires():
    assert verdict_of({"codec": True, "exchangeability": False}) == "contaminated"
    assert verdict_of({"codec": False, "exchangeability": True}) == "contaminated"
    assert verdict_of({"codec": True, "exchangeability": None}) == "contaminated"
    assert verdict_of({"codec": False, "exchangeability": None}) == "no verdict"
    assert verdict_of({"codec": False, "exchangeability": False}) == "not detected"
    assert verdict_of({"codec": False, "exchangeability": False}, like_its_kind=True) == "inconclusive"
    assert verdict_of({}) == "no verdict"


def test_the_line_names_what_each_test_detected():
    codec = decide((1000, 1000), 0.9)
    order = decide((0, 48), 1e-5)
    both = decide((1000, 1000), 1e-5)
    assert detected(codec) == ["seen example by example"]
    assert detected(order) == ["seen in its published order"]
    assert detected(both) == ["seen example by example", "seen in its published order"]
    assert all(d.verdict == "contaminated" for d in (codec, order, both))


def test_holm_runs_over_every_test_of_every_task_of_the_table():
    # one task: 0.02 and 0.6; Holm over 2: 0.04 rejects. The same p-value in a table of 3 tasks: x 6
    alone = decide_table({"a": evidence_of(None, 0.02)})
    assert alone["a"].adjusted["exchangeability"] == pytest.approx(0.02) and alone["a"].verdict == "contaminated"
    table = decide_table(
        {"a": evidence_of((0, 40), 0.02), "b": evidence_of((0, 40), 0.5), "c": evidence_of((0, 40), 0.7)}
    )
    assert table["a"].adjusted["exchangeability"] == pytest.approx(6 * 0.02)
    assert [table[t].verdict for t in "abc"] == ["not detected"] * 3
    with pytest.raises(TypeError, match="must be an Evidence"):
        decide_table({"a": {"codec": (1, 2)}})
    with pytest.raises(ValueError, match="p_value must be in"):
        Evidence(1.5)


def test_codec_is_tested_against_its_calibrated_null_not_one_half():
    assert codec_calibrated_pvalue(30, 40, 0.5) == pytest.approx(codec_pvalue(30, 40))
    assert CODEC_NULL_SCORE > 0.5
    # the false "contaminated": 0.56 of the default 1,000 examples is far above 1/2 ...
    assert codec_pvalue(560, 1000) < 1e-3
    # ... but at or below the null, whatever the number of examples, CoDeC never fires
    at_null = round(CODEC_NULL_SCORE * 1000)
    for drops, n in ((560, 1000), (at_null, 1000), (round(CODEC_NULL_SCORE * 48), 48)):
        decision = decide((drops, n), 0.5)
        assert decision.flags["codec"] is False and decision.verdict != "contaminated"
    # above 1/2, not above the null: seen data of this kind, CoDeC cannot tell which -> inconclusive
    assert decide((560, 1000), 0.5).verdict == "inconclusive"
    with pytest.raises(ValueError, match="null must be in"):
        codec_calibrated_pvalue(3, 4, 1.0)


def test_with_a_reference_codec_is_tested_against_it_and_holds_its_level():
    # the measured cases: the tuned file (47/48) against an unseen file of its shape (40/48) and against
    # issue 33's unseen plain texts (27/48); a file that scores like its reference is not flagged, and
    # not "inconclusive" either (the reference says what its kind scores)
    assert codec_reference_pvalue(47, 48, 27, 48) < 1e-5
    assert decide((47, 48), 0.5, reference=(27, 48)).verdict == "contaminated"
    like_its_kind = decide((900, 1000), 0.5, reference=(905, 1000))
    assert like_its_kind.verdict == "not detected" and like_its_kind.kind_adjusted["codec"] is None
    # its level: two samples of the same unseen data of a kind the model knows (rate 0.85), 1,000 each
    rng = np.random.default_rng(0)
    rejects = [
        codec_reference_pvalue(int(a), 1000, int(b), 1000) <= 0.05 for a, b in rng.binomial(1000, 0.85, (2000, 2))
    ]
    assert np.mean(rejects) <= 0.05
    with pytest.raises(ValueError, match="reference_drops must be"):
        codec_reference_pvalue(3, 4, 5, 4)


# measured (module docstring of pdd_metrics.verdict): CoDeC drops of 48 and the exchangeability p-value,
# ARC-shaped then GSM8K-shaped files
UNTUNED = [(0, 0.207), (1, 0.705), (1, 0.163), (0, 0.979), (0, 0.772)]  # untouched files, untuned model
TUNED_FILE = [(47, 0.345), (47, 0.223), (46, 0.250), (48, 0.976), (47, 0.291), (48, 0.383)]  # 12 steps
UNSEEN_SAME_SHAPE = [(40, 0.903), (39, 0.715), (38, 0.661), (41, 0.825), (41, 0.904), (44, 0.061)]


@pytest.mark.parametrize("drops, p_exchangeability", UNSEEN_SAME_SHAPE)
def test_measured_unseen_files_of_the_kind_tuned_on_are_not_called_contaminated(drops, p_exchangeability):
    # against 1/2 each is p < 1e-4: the false "contaminated" of a rule that lets CoDeC speak against 1/2
    assert codec_pvalue(drops, 48) < 1e-4
    decision = decide((drops, 48), p_exchangeability)
    assert decision.verdict == "inconclusive" and decision.flags == {"codec": False, "exchangeability": False}
    # nor at the default 1,000 examples with the same score, nor with the templated 0.896
    for score in (drops / 48, 0.896):
        assert decide((round(score * 1000), 1000), 0.5).verdict == "inconclusive"


@pytest.mark.parametrize("drops, p_exchangeability", TUNED_FILE)
def test_measured_tuned_files_need_more_examples_than_48_for_codec_alone(drops, p_exchangeability):
    # at 48 examples the file cannot be told from unseen data of its kind under the calibrated null
    assert decide((drops, 48), p_exchangeability).verdict == "inconclusive"


def test_at_1000_examples_codec_alone_detects_a_score_clearly_above_the_null():
    decision = decide((990, 1000), 0.5)
    assert decision.verdict == "contaminated" and detected(decision) == ["seen example by example"]
    # the median tuned file's 0.979 is within the null's noise at 1,000 (p = 0.052): not alone
    assert decide((979, 1000), 0.5).verdict == "inconclusive"


def test_the_examples_a_codec_score_needs_are_the_fewest_that_reject():
    for score in (0.98, 0.99, 1.0):
        n = codec_examples_needed(score)
        assert codec_calibrated_pvalue(round(score * n), n) <= 0.025
        fewer = int(n * 0.9)
        assert codec_calibrated_pvalue(round(score * fewer), fewer) > 0.025
    assert codec_examples_needed(CODEC_NULL_SCORE) is None and codec_examples_needed(0.5) is None


@pytest.mark.parametrize("drops, p_exchangeability", UNTUNED)
def test_measured_untouched_files_are_not_detected(drops, p_exchangeability):
    assert decide((drops, 48), p_exchangeability).verdict == "not detected"


def test_the_measured_exchangeability_false_positive_is_called_contaminated():
    # an untouched GSM8K-shaped file (untuned model, 8 shards x 2 permutations) gave p = 0.0012: the
    # verdict that fires on either test calls it "seen in its published order" (docs/verdict.md)
    decision = decide((0, 48), 0.0012)
    assert decision.verdict == "contaminated" and detected(decision) == ["seen in its published order"]


def test_doctests():
    result = doctest.testmod(pdd_metrics.verdict)
    assert result.attempted > 0 and result.failed == 0


def test_the_table_fires_on_either_test_names_what_it_detected_and_cites_the_evidence_in_one_short_line():
    found = {"arc_easy": (990, 0.6), "gsm8k": (20, 1e-4), "mmlu": (250, None), "hellaswag": (500, 0.4)}
    results = results_of(found)
    checks = contamination_checks(results)
    rows = {row[0]: row for row in checks.rows}
    p_codec = codec_calibrated_pvalue(990, 1000)
    assert rows["arc_easy"][CODEC_P] == f"{p_codec:.3g}"
    # Holm over the 7 p-values of the table (4 CoDeC, 3 exchangeability), in one family
    raw = [codec_calibrated_pvalue(drops, 1000) for drops, _ in found.values()] + [0.6, 1e-4, 0.4]
    adjusted = holm_adjusted(raw)
    assert (rows["arc_easy"][CODEC_HOLM], rows["arc_easy"][EXCHANGEABILITY_HOLM]) == (
        f"{adjusted[0]:.3g}",
        f"{adjusted[4]:.3g}",
    )
    assert rows["gsm8k"][EXCHANGEABILITY_HOLM] == f"{adjusted[5]:.3g}" and adjusted[5] > 1e-4  # x 6 or 7
    assert rows["arc_easy"][VERDICT] == "contaminated" and rows["gsm8k"][VERDICT] == "contaminated"
    assert rows["mmlu"][VERDICT] == "no verdict" and "longer than the context" in rows["mmlu"][NOT_APPLIED]
    assert rows["hellaswag"][VERDICT] == "not detected"
    assert rows["arc_easy"][CODEC].startswith("0.990 [")
    lines = dict(zip(rows, checks.verdicts, strict=True))
    assert lines["arc_easy"].startswith(
        f"arc_easy: contaminated: seen example by example (CoDeC 0.990 [{results['results']['pdd_contamination']['codec_score_ci95_low/arc_easy,none']:.3f}"
    )
    assert f"of 1000, Holm p {adjusted[0]:.2g})" in lines["arc_easy"]
    assert lines["arc_easy"].endswith("[evidence: controls-examples.md#codec-null]")
    assert lines["gsm8k"].startswith("gsm8k: contaminated: seen in its published order (exchangeability p 0.0001")
    assert lines["gsm8k"].endswith("[evidence: controls-ordered.md#exchangeability-power]")
    assert lines["mmlu"].startswith("mmlu: no verdict: exchangeability did not apply (")
    assert lines["hellaswag"].startswith("hellaswag: not detected: CoDeC 0.500")
    # short: no command, no path, no controls' paragraph (issue 42, item 4)
    for line in checks.verdicts:
        assert len(line) <= 210 and "--" not in line and "/tmp" not in line, line
    controls = contamination_controls()
    assert controls is not None, "pdd_tasks/data/contamination_controls.json is shipped with the package"
    assert f"measured with {controls['model']}" in checks.notes[-1]
    assert "docs/verdict.md#the-verdict" in checks.notes[-1]


def test_a_codec_score_like_unseen_data_of_its_kind_reads_inconclusive_and_says_what_would_decide_it():
    # 0.85: far above 1/2 but within what unseen data of a kind the model was tuned on scored
    assert 0.85 < CODEC_NULL_SCORE
    checks = contamination_checks(results_of({"arc_easy": (850, 0.5)}))
    (row,) = checks.rows
    assert row[VERDICT] == "inconclusive"
    assert checks.verdicts[0].startswith("arc_easy: inconclusive: CoDeC 0.850")
    assert "give a reference of known-unseen examples" in checks.verdicts[0]
    # above the null, too few examples to reject: how many it would take
    (line,) = contamination_checks(results_of({"arc_easy": (48, 0.5)}, examples=48)).verdicts
    assert f"needs about {codec_examples_needed(1.0):,} examples" in line, line


def with_reference(results: dict, task: str, drops: int | None, examples: int = 1000) -> dict:
    """``results`` with CoDeC's values on ``task``'s reference (None: the run had one, its values are gone)."""
    values = results["results"]["pdd_contamination"]
    if drops is not None:
        values |= {
            f"reference_codec_score/{task},none": drops / examples,
            f"reference_codec_score_ci95_low/{task},none": 0.0,
            f"reference_codec_score_ci95_high/{task},none": 1.0,
            f"reference_codec_examples/{task},none": examples,
        }
    summary = results["configs"]["pdd_contamination"]["metadata"]["contamination"]
    summary[task]["codec"]["reference"] = {"task": f"{task}_fresh", "scored": examples}
    return results


def test_the_table_tests_a_task_with_a_reference_against_it_and_says_so():
    # 0.85 is "inconclusive" against the null; beside a reference of its kind at 0.60 it is contaminated,
    # beside one at 0.85 it is not detected (the reference says what data of its kind scores)
    above = contamination_checks(with_reference(results_of({"arc_easy": (850, 0.5)}), "arc_easy", 600))
    (row,) = above.rows
    assert row[VERDICT] == "contaminated" and row[CODEC_P].endswith("(vs reference)")
    assert f"{codec_reference_pvalue(850, 1000, 600, 1000):.3g}" in row[CODEC_P]
    assert row[CODEC].endswith(" vs reference 0.600 of 1000")
    assert "vs reference 0.600 of 1000, Holm p" in above.verdicts[0]
    alike = contamination_checks(with_reference(results_of({"arc_easy": (850, 0.5)}), "arc_easy", 850))
    assert alike.rows[0][VERDICT] == "not detected"
    # a run that had a reference whose values are gone: CoDeC left out (named), not read against the null
    gone = contamination_checks(with_reference(results_of({"arc_easy": (990, 0.5)}), "arc_easy", None))
    assert gone.rows[0][CODEC] == "n/a (damaged)"
    assert "reference_codec_examples/arc_easy,none is missing" in gone.rows[0][NOT_APPLIED]
    assert gone.rows[0][VERDICT] == "no verdict"
