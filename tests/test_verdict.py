"""The contamination verdict (pdd_metrics.verdict) and how ``lm-eval-pdd table`` words it, on
hand-made pdd_contamination results (the real lm_eval run: tests/test_contamination_task.py)."""

from __future__ import annotations

import doctest

import pytest

import pdd_metrics.verdict
from pdd_metrics.codec import codec_pvalue
from pdd_metrics.verdict import decide, verdict_of
from pdd_tasks.tools.report import command_of, contamination_checks, contamination_controls


def test_every_verdict_from_the_flags():
    assert verdict_of({"codec": True, "exchangeability": True}) == "contaminated"
    assert verdict_of({"codec": False, "exchangeability": True}) == "inconclusive"
    assert verdict_of({"codec": False, "exchangeability": False}) == "not detected"
    assert verdict_of({"codec": True, "exchangeability": None}) == "no verdict"
    assert verdict_of({"codec": True}) == "no verdict"  # one test alone never decides


def test_holm_across_the_tests_decides_each_flag():
    assert decide({"codec": 0.001, "exchangeability": 0.03}).flags == {"codec": True, "exchangeability": True}
    # 0.03 and 0.04 each below 0.05, but Holm's 2 x 0.03 = 0.06: neither rejects
    decision = decide({"codec": 0.03, "exchangeability": 0.04})
    assert decision.verdict == "not detected" and decision.adjusted["codec"] == pytest.approx(0.06)
    decision = decide({"codec": 0.2, "exchangeability": None})
    assert decision.adjusted == {"codec": 0.2, "exchangeability": None} and decision.verdict == "no verdict"


def test_doctests():
    result = doctest.testmod(pdd_metrics.verdict)
    assert result.attempted > 0 and result.failed == 0


def results_of(tasks: dict) -> dict:
    """A results JSON of ``arc_easy`` (multiple choice) and the given source tasks' pdd_contamination
    metrics: task -> (CoDeC drops of 40, exchangeability p-value or None)."""
    values, summary = {}, {}
    for task, (drops, p_value) in tasks.items():
        values |= {
            f"codec_score/{task},none": drops / 40,
            f"codec_score_ci95_low/{task},none": 0.0,
            f"codec_score_ci95_high/{task},none": 1.0,
            f"codec_examples/{task},none": 40,
        }
        summary[task] = {"examples": 40, "codec": {"scored": 40}, "exchangeability": {"shards": 10}}
        if p_value is None:
            summary[task]["exchangeability"] = {"not_applicable": "2 shards are longer than the context"}
        else:
            values |= {f"exchangeability_pvalue/{task},none": p_value, f"exchangeability_shards/{task},none": 10}
    return {
        "results": {"arc_easy": {"acc,none": 0.5, "acc_stderr,none": 0.05}, "pdd_contamination": values},
        "configs": {
            "arc_easy": {"output_type": "multiple_choice"},
            "pdd_contamination": {"metadata": {"contamination": summary}},
        },
    }


def test_the_table_gives_each_task_a_verdict_that_needs_both_tests_and_cites_the_controls():
    results = results_of({"arc_easy": (38, 0.001), "gsm8k": (38, 0.6), "mmlu": (10, None)})
    checks = contamination_checks(results)
    rows = {row[0]: row for row in checks.rows}
    # Holm over the 5 p-values of the table: arc_easy's two reject, gsm8k's CoDeC alone does
    assert rows["arc_easy"][3] == f"{codec_pvalue(38, 40):.3g}"
    assert rows["arc_easy"][6] == "contaminated" and rows["gsm8k"][6] == "inconclusive"
    assert rows["mmlu"][6] == "no verdict" and "longer than the context" in rows["mmlu"][7]
    # sorted: the two CoDeC p-values (x 5, x 4), arc_easy's exchangeability p (x 3), ...
    assert rows["arc_easy"][5] == f"{5 * codec_pvalue(38, 40):.3g}, {3 * 0.001:.3g}"
    lines = dict(zip(rows, checks.verdicts, strict=True))
    assert lines["arc_easy"].startswith("**arc_easy: evidence of contamination: both tests reject")
    assert "one test alone is no verdict" in lines["gsm8k"]
    assert "CoDeC rejects at 0.05 after Holm's correction, exchangeability does not" in lines["gsm8k"]
    # the measured level and power of the rule, for the task's shape where the run has it
    controls = contamination_controls()
    assert controls is not None, "pdd_tasks/data/contamination_controls.json is shipped with the package"
    level = controls["shapes"]["multiple_choice"]["level"]
    files = level["files"]
    assert f"called {round(level['both'] * files)}/{files} untouched files contaminated" in lines["arc_easy"]
    assert command_of(controls, "multiple_choice") in lines["arc_easy"] and "free-answer" not in lines["arc_easy"]
    assert "multiple-choice" in lines["gsm8k"] and "free-answer" in lines["gsm8k"]  # shape unknown: both
    assert "No verdict" not in checks.markdown()
    # the power behind each line: the optimizer steps of each tuned model, and CoDeC's level on varied data
    steps = [
        str(entry["optimizer_steps"])
        for _, entry in sorted(controls["shapes"]["multiple_choice"]["power"].items(), key=lambda kv: int(kv[0]))
    ]
    assert f"({'/'.join(steps)} optimizer steps) the rule detected" in lines["arc_easy"]
    diverse = controls["diverse_level"]
    assert f"on {diverse['files']} untouched files of varied content" in lines["arc_easy"]
