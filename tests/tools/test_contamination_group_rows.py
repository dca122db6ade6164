"""A verdict per group (issue 42 item 2): ``lm-eval-pdd table``'s contamination table and the report's board get
one row (column) per group of the run, its tests formed from its leaves' results (CoDeC pooled, the exchangeability
p-values combined by Fisher's method), its p-values in the table's Holm family.

The runs are hand-made results JSONs holding ``contamination_groups`` as ``pdd_contamination`` records it (the real
run: tests/tasks/test_contamination_groups.py; the builder: tests/support/results.py ``results_of``)."""

from __future__ import annotations

import dataclasses
import json

import pytest
from support.results import results_of

from pdd_metrics.combine import fisher_combined_pvalue
from pdd_metrics.multiple_testing import holm_adjusted
from pdd_metrics.verdict import codec_calibrated_pvalue
from pdd_tasks.tools.report.contamination_board import contamination_board, contamination_columns
from pdd_tasks.tools.report.tables import contamination_checks
from pdd_tasks.tools.results.contamination import contamination_values
from pdd_tasks.tools.results.runs import find_runs


#: Three BBH-like leaves of 250 examples: no leaf rejects after Holm, their group does (exchangeability, by
#: Fisher's combination); gsm8k stands alone, its exchangeability test not applied. Task: (drops, p).
LEAVES = {"bbh_a": (243, 0.03), "bbh_b": (244, 0.04), "bbh_c": (244, 0.05), "gsm8k": (20, None)}
GROUPS = {"bbh": ["bbh_a", "bbh_b", "bbh_c"]}


def results(groups=GROUPS, leaves=LEAVES) -> dict:
    return results_of(leaves, examples=250, groups=groups)


def test_a_group_row_pools_its_leaves_and_joins_holm_s_family():
    checks = contamination_checks(results())
    rows = {row[0]: row for row in checks.rows}
    assert list(rows) == ["bbh_a", "bbh_b", "bbh_c", "gsm8k", "bbh (group of 3)"]
    group = rows["bbh (group of 3)"]
    codec, codec_p, codec_holm, exchangeability, exchangeability_p, exchangeability_holm, verdict = group[2:9]
    assert codec.startswith(f"{731 / 750:.3f} [") and codec.endswith("of 750")  # 243 + 244 + 244 of 750
    assert float(codec_p) == pytest.approx(codec_calibrated_pvalue(731, 750), rel=1e-2)
    fisher = fisher_combined_pvalue([0.03, 0.04, 0.05])
    assert exchangeability == f"Fisher p {fisher:.2g} of 3 leaves, 30 shards"
    # Holm over the table: 4 CoDeC + 3 exchangeability p-values of the leaves, and the group's 2
    leaf_codec = [codec_calibrated_pvalue(drops, 250) for drops, _ in LEAVES.values()]
    family = [*leaf_codec, 0.03, 0.04, 0.05, codec_calibrated_pvalue(731, 750), fisher]
    assert float(exchangeability_holm) == pytest.approx(holm_adjusted(family)[-1], rel=1e-2)
    assert "9 p-value(s)" in checks.notes[-2]
    assert "Fisher's combination" in checks.notes[-1] and "join Holm's family" in checks.notes[-1]
    assert verdict == "contaminated" and all(rows[leaf][8] != "contaminated" for leaf in GROUPS["bbh"])
    line = checks.verdicts[-1]
    assert line.startswith("bbh (group of 3): contaminated: seen in its published order (exchangeability Fisher p")
    assert line.endswith("[evidence: controls.md#group-verdict]") and len(line) <= 200


def test_without_groups_the_table_is_as_before():
    with_groups, without = contamination_checks(results()), contamination_checks(results(groups=None))
    assert [row[0] for row in without.rows] == ["bbh_a", "bbh_b", "bbh_c", "gsm8k"]
    assert "7 p-value(s)" in without.notes[-1]
    assert with_groups.rows[0][:3] == without.rows[0][:3]  # a leaf's own numbers do not move


def test_nested_groups_pool_every_leaf_below_and_a_test_on_one_leaf_gives_no_group_test():
    groups = {"suite": ["bbh", "maths"], "bbh": ["bbh_a", "bbh_b", "bbh_c"], "maths": ["gsm8k"]}
    read = contamination_values(results(groups=groups))
    assert read.groups == {"suite": ["bbh_a", "bbh_b", "bbh_c", "gsm8k"], "bbh": GROUPS["bbh"], "maths": ["gsm8k"]}
    assert read.readings["suite", "codec"][0]["codec_examples"] == 1000
    assert read.readings["suite", "exchangeability"][0]["leaves"] == 3  # gsm8k's did not apply
    assert read.found["maths"] == {"codec": None, "exchangeability": None}
    assert read.not_applicable("maths")["codec"] == "applied to 1 of its 1 leaves (a group's test needs 2)"
    assert (read.parent("bbh_a"), read.parent("bbh"), read.parent("suite")) == ("bbh", "suite", None)


def test_a_damaged_groups_record_is_read_as_far_as_it_goes():
    groups = {"bbh": ["bbh_a", "bbh_b", 3, "nowhere"], "loop": ["loop"], "bad": "bbh_a"}
    read = contamination_values(results(groups=groups))
    assert read.groups == {"bbh": ["bbh_a", "bbh_b"]}


def write_run(root, model: str, date: str, results: dict):
    results["config"] = {"model": "hf", "model_args": f"pretrained={model},dtype=float32"}
    file = root / model.replace("/", "__") / f"results_{date}.json"
    file.parent.mkdir(parents=True, exist_ok=True)
    file.write_text(json.dumps(results))
    return file


def test_the_board_has_a_column_per_group_marked_with_its_leaves(tmp_path):
    write_run(tmp_path, "org/a", "2026-01-01T00-00-00.000000", results())
    write_run(tmp_path, "org/b", "2026-01-01T00-00-00.000000", results(groups=None, leaves={"bbh_a": (10, 0.5)}))
    board = contamination_board(find_runs([tmp_path]))
    assert board.benchmarks == ["bbh_a", "bbh_b", "bbh_c", "gsm8k", "bbh"]
    assert board.groups == GROUPS and board.is_group("bbh") and not board.is_group("bbh_a")
    group = board.cell("org/a", "bbh")
    assert (group["leaves"], group["group"], group["verdict"]) == (3, None, "contaminated")
    assert board.cell("org/a", "bbh_a")["group"] == "bbh" and board.cell("org/a", "bbh_a")["leaves"] is None
    assert board.cell("org/b", "bbh") is None
    # the group's p-values are in model a's family of 9, as in its run's own table
    assert group["exchangeability_p_holm"] == pytest.approx(
        float(contamination_checks(results()).rows[-1][7]), rel=1e-2
    )
    assert "org/a 9" in board.notes[0]
    assert any("Fisher's combination" in note for note in board.notes)
    assert "| bbh (group of 3) |" in board.markdown()
    document = board.to_json()
    assert document["groups"] == GROUPS and document["matrix"]["org/a"]["bbh"] == "contaminated"
    assert set(group) == set(contamination_columns())


def test_a_test_without_a_group_reading_gives_a_group_no_test_and_no_missing_verdict():
    """Generic over the registry: a test registered without ``Reading.group`` (here CoDeC's entry again, under
    another name and with no group form) is no part of a group's verdict; the others decide it."""
    from pdd_tasks.dataset_tests import DATASET_TESTS
    from pdd_tasks.dataset_tests.codec import CODEC

    plain = dataclasses.replace(
        CODEC, name="plain", reading=dataclasses.replace(CODEC.reading, label="plain", group=None)
    )
    with DATASET_TESTS.added(plain.name, plain):
        data = results()  # the copy reads CoDeC's keys (its reading's result_keys): it ran on every leaf
        read = contamination_values(data)
        assert "plain" not in read.found["bbh"] and read.found["bbh_a"]["plain"] is not None
        assert read.not_applicable("bbh")["plain"] == "no group-level test"
        checks = contamination_checks(data)
        group = next(row for row in checks.rows if row[0] == "bbh (group of 3)")
        assert group[-2] == "contaminated" and group[8:11] == ["-", "-", "-"]
        assert "plain: no group-level test" in group[-1]
