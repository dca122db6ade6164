"""The contamination verdict (pdd_metrics.verdict) and how ``lm-eval-pdd table`` words it, on
hand-made pdd_contamination results (the real lm_eval run: tests/tasks/test_contamination_task.py).

The cases marked "measured" are the numbers of the exposure controls (docs/dataset-tests.md,
"Controls"; ``benchmarks/contamination_controls.py --exposure examples``): the default model tuned on
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
    DETECTS,
    codec_calibrated_pvalue,
    codec_reference_pvalue,
    decide,
    decide_table,
    verdict_of,
)
from pdd_tasks.tools.report.tables import command_of, contamination_checks, contamination_controls


def test_either_test_calls_it_contaminated_and_a_missing_test_leaves_no_verdict_only_where_none_fires():
    assert verdict_of({"codec": True, "exchangeability": False}) == "contaminated"
    assert verdict_of({"codec": False, "exchangeability": True}) == "contaminated"
    assert verdict_of({"codec": True, "exchangeability": None}) == "contaminated"
    assert verdict_of({"codec": False, "exchangeability": None}) == "no verdict"
    assert verdict_of({"codec": False, "exchangeability": False}) == "not detected"
    assert verdict_of({"codec": False, "exchangeability": False}, like_its_kind=True) == "inconclusive"
    assert verdict_of({}) == "no verdict"


def test_the_line_names_what_each_test_detected():
    codec = decide({"codec": (1000, 1000), "exchangeability": 0.9})
    order = decide({"codec": (0, 48), "exchangeability": 1e-5})
    both = decide({"codec": (1000, 1000), "exchangeability": 1e-5})
    assert codec.detected == [DETECTS["codec"]] == ["seen example by example"]
    assert order.detected == [DETECTS["exchangeability"]] == ["seen in its published order"]
    assert both.detected == ["seen example by example", "seen in its published order"]
    assert all(d.verdict == "contaminated" for d in (codec, order, both))


def test_holm_runs_over_every_test_of_every_task_of_the_table():
    # one task: 0.02 and 0.6; Holm over 2: 0.04 rejects. The same p-value in a table of 3 tasks: x 6
    alone = decide_table({"a": {"codec": None, "exchangeability": 0.02}})
    assert alone["a"].adjusted["exchangeability"] == pytest.approx(0.02) and alone["a"].verdict == "contaminated"
    table = decide_table(
        {
            "a": {"codec": (0, 40), "exchangeability": 0.02},
            "b": {"codec": (0, 40), "exchangeability": 0.5},
            "c": {"codec": (0, 40), "exchangeability": 0.7},
        }
    )
    assert table["a"].adjusted["exchangeability"] == pytest.approx(6 * 0.02)
    assert [table[t].verdict for t in "abc"] == ["not detected"] * 3
    with pytest.raises(ValueError, match="unknown test"):
        decide_table({"a": {"codex": (1, 2)}})


def test_codec_is_tested_against_its_calibrated_null_not_one_half():
    assert codec_calibrated_pvalue(30, 40, 0.5) == pytest.approx(codec_pvalue(30, 40))
    assert CODEC_NULL_SCORE > 0.5
    # the false "contaminated": 0.56 of the default 1,000 examples is far above 1/2 ...
    assert codec_pvalue(560, 1000) < 1e-3
    # ... but at or below the null, whatever the number of examples, CoDeC never fires
    at_null = round(CODEC_NULL_SCORE * 1000)
    for drops, n in ((560, 1000), (at_null, 1000), (round(CODEC_NULL_SCORE * 48), 48)):
        decision = decide({"codec": (drops, n), "exchangeability": 0.5})
        assert decision.flags["codec"] is False and decision.verdict != "contaminated"
    # above 1/2, not above the null: seen data of this kind, CoDeC cannot tell which -> inconclusive
    assert decide({"codec": (560, 1000), "exchangeability": 0.5}).verdict == "inconclusive"
    with pytest.raises(ValueError, match="null must be in"):
        codec_calibrated_pvalue(3, 4, 1.0)


def test_with_a_reference_codec_is_tested_against_it_and_holds_its_level():
    # the measured cases: the tuned file (47/48) against an unseen file of its shape (40/48) and against
    # issue 33's unseen plain texts (27/48); a file that scores like its reference is not flagged, and
    # not "inconclusive" either (the reference says what its kind scores)
    assert codec_reference_pvalue(47, 48, 27, 48) < 1e-5
    assert decide({"codec": (47, 48), "codec_reference": (27, 48), "exchangeability": 0.5}).verdict == "contaminated"
    like_its_kind = decide({"codec": (900, 1000), "codec_reference": (905, 1000), "exchangeability": 0.5})
    assert like_its_kind.verdict == "not detected" and like_its_kind.codec_half_adjusted is None
    assert like_its_kind.reference == (905, 1000)
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
    decision = decide({"codec": (drops, 48), "exchangeability": p_exchangeability})
    assert decision.verdict == "inconclusive" and decision.flags == {"codec": False, "exchangeability": False}
    # nor at the default 1,000 examples with the same score, nor with the templated 0.896
    for score in (drops / 48, 0.896):
        assert decide({"codec": (round(score * 1000), 1000), "exchangeability": 0.5}).verdict == "inconclusive"


@pytest.mark.parametrize("drops, p_exchangeability", TUNED_FILE)
def test_measured_tuned_files_need_more_examples_than_48_for_codec_alone(drops, p_exchangeability):
    # at 48 examples the file cannot be told from unseen data of its kind under the calibrated null
    assert decide({"codec": (drops, 48), "exchangeability": p_exchangeability}).verdict == "inconclusive"


def test_at_1000_examples_codec_alone_detects_a_score_clearly_above_the_null():
    decision = decide({"codec": (990, 1000), "exchangeability": 0.5})
    assert decision.verdict == "contaminated" and decision.detected == ["seen example by example"]
    # the median tuned file's 0.979 is within the null's noise at 1,000 (p = 0.052): not alone
    assert decide({"codec": (979, 1000), "exchangeability": 0.5}).verdict == "inconclusive"


@pytest.mark.parametrize("drops, p_exchangeability", UNTUNED)
def test_measured_untouched_files_are_not_detected(drops, p_exchangeability):
    assert decide({"codec": (drops, 48), "exchangeability": p_exchangeability}).verdict == "not detected"


def test_the_measured_exchangeability_false_positive_is_called_contaminated():
    # an untouched GSM8K-shaped file (untuned model, 8 shards x 2 permutations) gave p = 0.0012: the
    # verdict that fires on either test calls it "seen in its published order" (docs/dataset-tests.md)
    decision = decide({"codec": (0, 48), "exchangeability": 0.0012})
    assert decision.verdict == "contaminated" and decision.detected == ["seen in its published order"]


def test_doctests():
    result = doctest.testmod(pdd_metrics.verdict)
    assert result.attempted > 0 and result.failed == 0


def test_the_table_fires_on_either_test_names_what_it_detected_and_cites_the_controls():
    found = {"arc_easy": (990, 0.6), "gsm8k": (20, 1e-4), "mmlu": (250, None), "hellaswag": (500, 0.4)}
    results = results_of(found)
    checks = contamination_checks(results)
    rows = {row[0]: row for row in checks.rows}
    p_codec = codec_calibrated_pvalue(990, 1000)
    assert rows["arc_easy"][3] == f"{p_codec:.3g}"
    # Holm over the 7 p-values of the table (4 CoDeC, 3 exchangeability), in one family
    raw = [codec_calibrated_pvalue(drops, 1000) for drops, _ in found.values()] + [0.6, 1e-4, 0.4]
    adjusted = holm_adjusted(raw)
    assert rows["arc_easy"][5] == f"{adjusted[0]:.3g}, {adjusted[4]:.3g}"
    assert rows["gsm8k"][5] == f"{adjusted[1]:.3g}, {adjusted[5]:.3g}" and adjusted[5] > 1e-4  # x 6 or 7
    assert rows["arc_easy"][6] == "contaminated" and rows["gsm8k"][6] == "contaminated"
    assert rows["mmlu"][6] == "no verdict" and "longer than the context" in rows["mmlu"][7]
    assert rows["hellaswag"][6] == "not detected"
    lines = dict(zip(rows, checks.verdicts, strict=True))
    assert lines["arc_easy"].startswith("**arc_easy: contaminated: seen example by example (CoDeC rejects at 0.05")
    assert lines["gsm8k"].startswith("**gsm8k: contaminated: seen in its published order (exchangeability rejects")
    assert "no verdict: it needs both CoDeC and the exchangeability test" in lines["mmlu"]
    assert "exchangeability did not apply" in lines["mmlu"]
    # the measured level and power of each test, for the task's shape where the run has it
    controls = contamination_controls()
    assert controls is not None, "pdd_tasks/data/contamination_controls.json is shipped with the package"
    level = controls["shapes"]["multiple_choice"]["level"]
    files = level["files"]
    called = (
        f"exchangeability test called {round(level['exchangeability'] * files)}/{files} untouched files contaminated"
    )
    assert called in lines["arc_easy"]
    assert command_of(controls, "multiple_choice") in lines["arc_easy"] and "free-answer" not in lines["arc_easy"]
    assert "multiple-choice" in lines["gsm8k"] and "free-answer" in lines["gsm8k"]  # shape unknown: both
    steps = [
        str(entry["optimizer_steps"])
        for _, entry in sorted(controls["shapes"]["multiple_choice"]["power"].items(), key=lambda kv: int(kv[0]))
    ]
    assert f"({'/'.join(steps)} optimizer steps)" in lines["arc_easy"]
    exposures = controls["exposure_controls"]
    command = exposures["shapes"]["multiple_choice"]["command"]
    assert "--shapes multiple_choice" in command and command in lines["arc_easy"]
    assert exposures["shapes"]["free_answer"]["command"] not in lines["arc_easy"]
    assert "seen example by example (multiple-choice" in lines["arc_easy"]
    default_size = controls["exposure_controls_default_size"]  # CoDeC's default 1,000 examples
    assert default_size["sizes"]["examples"] == 1000
    assert default_size["shapes"]["multiple_choice"]["command"] in lines["arc_easy"]
    assert "files of 1,000 examples): CoDeC against its calibrated null" in lines["arc_easy"]
    assert f"calibrated null ({CODEC_NULL_SCORE:g})" in lines["arc_easy"]
    level = controls["exchangeability_level"]
    assert f"the exchangeability test's level on {level['files']} untouched files" in lines["arc_easy"]
    low, high = min(level["rejects_at_alpha"]["50x1"]), max(level["rejects_at_alpha"]["50x1"])
    assert f"50x1 {low:.3f}-{high:.3f}" in lines["arc_easy"]
    assert f"null {CODEC_NULL_SCORE:g}" in checks.header[3] and "not against 1/2" in checks.notes[0]


def test_a_codec_score_like_unseen_data_of_its_kind_reads_inconclusive_in_the_table():
    # 0.85: far above 1/2 but within what unseen data of a kind the model was tuned on scored
    assert 0.85 < CODEC_NULL_SCORE
    checks = contamination_checks(results_of({"arc_easy": (850, 0.5)}))
    (row,) = checks.rows
    assert row[6] == "inconclusive"
    assert checks.verdicts[0].startswith("**arc_easy: inconclusive: CoDeC's score is above 1/2")
    assert "CoDeC cannot tell which" in checks.verdicts[0]


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
    assert row[6] == "contaminated" and row[3].endswith("(vs reference)")
    assert f"{codec_reference_pvalue(850, 1000, 600, 1000):.3g}" in row[3]
    assert "; reference 0.600 [0.000, 1.000] (1000)" in row[2]
    assert "CoDeC against its reference of known-unseen examples (which scored 0.600 of 1000)" in above.verdicts[0]
    alike = contamination_checks(with_reference(results_of({"arc_easy": (850, 0.5)}), "arc_easy", 850))
    assert alike.rows[0][6] == "not detected"
    # a run that had a reference whose values are gone: CoDeC left out (named), not read against the null
    gone = contamination_checks(with_reference(results_of({"arc_easy": (990, 0.5)}), "arc_easy", None))
    assert gone.rows[0][2] == "n/a (damaged)" and "reference_codec_examples/arc_easy,none is missing" in gone.rows[0][7]
    assert gone.rows[0][6] == "no verdict"
