"""The blind baseline: a classifier on the texts alone, out-of-fold, and its command."""

from __future__ import annotations

import json
import random
import subprocess

import numpy as np
import pytest

from pdd_metrics import roc_auc
from pdd_metrics.blind import blind_scores
from pdd_tasks import lm_eval_patches
from pdd_tasks.tasks import aggregations
from pdd_tasks.tasks.base import metric_list
from pdd_tasks.tools.cli import main


WORDS = "the a of in was were is and to on at by with for from city river team season year war album".split()


def texts_from(vocabulary: list[str], n: int, rng: random.Random) -> list[str]:
    return [" ".join(rng.choice(vocabulary) for _ in range(12)) for _ in range(n)]


def test_high_auc_where_the_classes_differ_by_vocabulary():
    rng = random.Random(0)
    members = texts_from(WORDS + ["1998", "stadium", "founded"], 60, rng)
    non_members = texts_from(WORDS + ["2024", "streaming", "pandemic"], 60, rng)
    labels = [1] * 60 + [0] * 60
    assert roc_auc(blind_scores(members + non_members, labels), labels) > 0.95


def test_about_one_half_where_the_labels_are_random():
    rng = random.Random(1)
    texts = texts_from(WORDS, 400, rng)
    labels = [rng.randint(0, 1) for _ in texts]
    assert abs(roc_auc(blind_scores(texts, labels), labels) - 0.5) < 0.1


def test_scores_do_not_depend_on_the_order_of_the_texts():
    rng = random.Random(2)
    texts = texts_from(WORDS + ["2024"], 40, rng) + texts_from(WORDS, 40, rng)
    labels = [1] * 40 + [0] * 40
    order = list(range(80))
    rng.shuffle(order)
    shuffled = blind_scores([texts[i] for i in order], [labels[i] for i in order])
    np.testing.assert_allclose(shuffled, blind_scores(texts, labels)[order])


def test_too_few_texts_of_a_class_is_an_error_that_says_so():
    with pytest.raises(ValueError, match="at least 2 members and 2 non-members"):
        blind_scores(["a b", "c d", "e f"], [1, 0, 0])


def test_the_blind_metrics_take_text_label_items_and_have_stderrs():
    rng = random.Random(3)
    texts = texts_from(WORDS + ["2024"], 30, rng) + texts_from(WORDS, 30, rng)
    items = [(text, int(i < 30)) for i, text in enumerate(texts)]
    auc = aggregations.BLIND_AGGREGATIONS["auc"](items)
    assert auc == roc_auc(blind_scores(texts, [label for _, label in items]), [label for _, label in items])
    assert 0 < aggregations.BLIND_AGGREGATIONS["auc"].stderr(items, 100) < 0.2
    names = [entry["metric"] for entry in metric_list(("loss",))]
    assert names[-4:] == ["blind_auc", "blind_tpr@fpr<5%", "blind_tpr@fpr<1%", "blind_tpr@fpr<0.1%"]


def lm_eval_pdd(capsys, *args: str) -> subprocess.CompletedProcess:
    """The ``lm-eval-pdd`` command line, in this process (an exception would fail the test)."""
    returncode = main(list(args))
    captured = capsys.readouterr()
    return subprocess.CompletedProcess(args, returncode, captured.out, captured.err)


def test_blind_command_on_a_labelled_custom_file_needs_no_model(tmp_path, capsys):
    rng = random.Random(4)
    rows = [{"text": f"{t} in 1998", "label": 1} for t in texts_from(WORDS, 25, rng)]
    rows += [{"text": f"{t} in 2024", "label": 0} for t in texts_from(WORDS, 25, rng)]
    data = tmp_path / "texts.jsonl"
    data.write_text("".join(json.dumps(row) + "\n" for row in rows))
    process = lm_eval_pdd(capsys, "blind", "pdd_custom", "--metadata", json.dumps({"data_files": str(data)}), "--json")
    assert process.returncode == 0, process.stderr
    (result,) = json.loads(process.stdout)
    assert result["task"] == "pdd_custom" and (result["n_members"], result["n_non_members"]) == (25, 25)
    assert result["auc"] > 0.9 and result["auc_ci95"][0] <= result["auc"] <= result["auc_ci95"][1]
    table = lm_eval_pdd(capsys, "blind", "pdd_custom", "--metadata", json.dumps({"data_files": str(data)}))
    assert "| pdd_custom | 25 | 25 |" in table.stdout and "no evidence of membership" in table.stdout


def test_blind_command_errors_name_the_fix(tmp_path, capsys):
    unlabelled = tmp_path / "u.jsonl"
    unlabelled.write_text('{"text": "a b c"}\n{"text": "d e f"}\n')
    process = lm_eval_pdd(capsys, "blind", "pdd_custom", "--metadata", json.dumps({"data_files": str(unlabelled)}))
    assert process.returncode == 1 and "Traceback" not in process.stderr
    assert "no labels" in process.stderr
    process = lm_eval_pdd(capsys, "blind", "pdd_nonexistent")
    assert process.returncode == 1 and "Traceback" not in process.stderr and "tasks-path" in process.stderr
    process = lm_eval_pdd(capsys, "blind", "pdd_custom", "--metadata", "{not json")
    assert process.returncode == 2 and "not a JSON object" in process.stderr


def test_blind_metrics_are_nan_not_a_failed_run_with_one_text_of_a_class():
    from lm_eval import evaluator_utils

    items = [("a b", 1), ("c d", 1), ("e f", 0)]
    aggregate = aggregations.BLIND_AGGREGATIONS["auc"]
    assert np.isnan(aggregate(items))
    lm_eval_patches.apply()
    assert evaluator_utils.stderr_for_metric(aggregate, 100)(items) == "N/A"
