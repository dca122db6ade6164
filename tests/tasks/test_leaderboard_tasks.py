"""Every task of the two Open LLM Leaderboards through ``pdd_contamination``, end to end, offline.

lm-eval's own YAMLs (``process_docs``, few-shot settings, templates, groups) with only the data local,
written in each dataset's schema (:mod:`support.leaderboard_tasks`, shadowing the stock leaves by
name), through the real ``lm_eval`` command: ``--tasks leaderboard,<v1 tasks>,pdd_contamination`` with
the suite's tiny model. v2's MATH and IFEval need lm-eval's ``math`` and ``ifeval`` extras."""

from __future__ import annotations

import pytest
from support.harness import REPO, cpu_float32, harness_args, read_results, run_lm_eval
from support.leaderboard_tasks import V1, V2, leaderboard_tasks, stock_leaves
from support.models import build_tiny_model


pytest.importorskip("math_verify", reason="leaderboard_math_hard needs lm-eval[math] (pip install -e '.[test]')")
pytest.importorskip("langdetect", reason="leaderboard_ifeval needs lm-eval[ifeval] (pip install -e '.[test]')")

ROWS = 6  # CoDeC needs 5 examples at least; MATH's files hold a 7th, Level 2, which its process_docs drops
SMALL = {"codec": {"max_examples": ROWS}, "exchangeability": {"num_shards": 2}}


@pytest.fixture(scope="module")
def tasks_dir(tmp_path_factory):
    directory = leaderboard_tasks(tmp_path_factory.mktemp("leaderboards"), rows=ROWS)
    contamination = REPO / "task_configs" / "contamination" / "pdd_contamination.yaml"
    (directory / "pdd_contamination.yaml").write_text(f"include: {contamination}\n")
    return directory


@pytest.fixture(scope="module")
def tiny_1024(tmp_path_factory):
    """The suite's tiny GPT-2 with a window of 1,024 tokens: TruthfulQA's six-shot prompt (about 310 tokens
    an example) and GSM8K's worked answers fit a shard of three examples (at 256, the check reports both
    tests "not applicable" there for the window, with the reason)."""
    return build_tiny_model(tmp_path_factory.mktemp("tiny-1024"), n_positions=1024)


def leaf(manager, name: str):
    (task,) = manager.load([name])["tasks"].values()
    return task


#: no gold target (doc_to_target 0 of a generate_until task): the prompt alone, no " 0" appended;
#: the context is a choice (partial scoring): the gold choice's context, then the continuation
@pytest.mark.parametrize("name", ["leaderboard_ifeval", "winogrande"])
def test_what_the_check_renders_of_a_task_without_a_plain_target(tasks_dir, name):
    from lm_eval.tasks import TaskManager

    from pdd_tasks.loading.examples import examples_of_task, has_gold_target

    task = leaf(TaskManager(include_path=str(tasks_dir)), name)
    doc = task.eval_docs[0]
    examples = examples_of_task(task, name)
    assert len(examples) == ROWS
    if name == "leaderboard_ifeval":
        assert not has_gold_target(task)
        assert examples[0] == doc["prompt"] and not examples[0].endswith(" 0")
    else:
        assert has_gold_target(task)
        gold = doc["option1"] if doc["answer"] == "1" else doc["option2"]
        assert examples[0] == doc["sentence"].replace("_", gold)


def test_math_hard_keeps_level_5_and_truthfulqa_scores_the_first_true_answer(tasks_dir):
    from lm_eval.tasks import TaskManager

    from pdd_tasks.loading.examples import examples_of_task

    manager = TaskManager(include_path=str(tasks_dir))
    math = leaf(manager, "leaderboard_math_algebra_hard")
    assert len(math.eval_docs) == ROWS  # of ROWS + 1 rows: its process_docs left the Level 2 one out
    assert examples_of_task(math, "math")[0].endswith(f"Solution: {math.eval_docs[0]['answer']}")
    truthful = leaf(manager, "truthfulqa_mc2")
    assert examples_of_task(truthful, "truthfulqa_mc2")[0].endswith("\nA: " + truthful.eval_docs[0]["mc2_targets"]["choices"][0])  # fmt: skip


def test_where_a_test_does_not_fit_the_window_the_reason_is_recorded(tiny_model, tasks_dir):
    """The suite's tiny model (256 tokens): each of TruthfulQA's examples (its six-question prompt and
    an answer) is longer than the window, so CoDeC has none left and says so, naming the window;
    GSM8K's shards of three worked answers do not fit either. Built without a model run."""
    from lm_eval.tasks._yaml_loader import load_yaml

    from pdd_tasks.tasks.dataset_level import ContaminationTask

    config = load_yaml(REPO / "task_configs" / "contamination" / "pdd_contamination.yaml", resolve_func=True)
    metadata = {"source_tasks": ["truthfulqa_mc2", "gsm8k"], "source_include_path": str(tasks_dir), "pretrained": str(tiny_model), **SMALL}  # fmt: skip
    summary = ContaminationTask(config={**config, "metadata": metadata}).config.metadata["contamination"]
    codec = summary["truthfulqa_mc2"]["codec"]["not_applicable"]
    assert f"0 example(s) (of {ROWS}: {ROWS} longer than the model's context window of 256 tokens left out;" in codec
    assert "more than the model's context window of 256" in summary["gsm8k"]["exchangeability"]["not_applicable"]
    assert summary["gsm8k"]["codec"]["scored"] == ROWS


def test_both_leaderboards_are_checked_leaf_by_leaf(tiny_1024, tasks_dir, tmp_path):
    """``lm_eval --tasks leaderboard,arc_challenge,...,mmlu,...,pdd_contamination``: all 101 leaves (v2's
    39, v1's 62) evaluated and checked, each by both tests, none skipped; the groups' tree recorded."""
    args = harness_args(
        cpu_float32(tiny_1024),
        ",".join([*V2, *V1, "pdd_contamination"]),
        tmp_path / "out",
        include=tasks_dir,
        device="cpu",
        batch_size=32,
        metadata=SMALL,
        log_samples=False,
    )
    # the generation tasks (MATH, IFEval, GSM8K) generate a few tokens, not up to 1,280
    run_lm_eval([*args, "--gen_kwargs", "max_gen_toks=4"], cwd=tmp_path, process=True)
    results = read_results(tmp_path / "out")
    leaves = stock_leaves()
    assert len(leaves) == 101
    values = results["results"]["pdd_contamination"]
    metadata = results["configs"]["pdd_contamination"]["metadata"]
    summary = metadata["contamination"]
    assert sorted(summary) == sorted(leaves)
    for name in leaves:
        entry = summary[name]
        assert "not_loaded" not in entry, (name, entry)
        assert entry["examples"] == ROWS, (name, entry)
        assert entry["codec"]["scored"] == ROWS, (name, entry)
        assert entry["exchangeability"].get("shards") == 2, (name, entry)
        assert 0 <= values[f"codec_score/{name},none"] <= 1
        assert 0 <= values[f"exchangeability_pvalue/{name},none"] <= 1
        assert name in results["results"], name  # the eval itself ran beside the check
    groups = metadata["contamination_groups"]
    assert groups["leaderboard"] == [
        "leaderboard_mmlu_pro", "leaderboard_bbh", "leaderboard_gpqa", "leaderboard_math_hard", "leaderboard_ifeval", "leaderboard_musr"
    ]  # fmt: skip
    assert len(groups["leaderboard_bbh"]) == 24 and len(groups["leaderboard_math_hard"]) == 7
    assert sorted(groups["mmlu"]) == ["mmlu_humanities", "mmlu_other", "mmlu_social_sciences", "mmlu_stem"]
    assert summary["leaderboard_bbh_navigate"]["group"] == "leaderboard_bbh"
    assert summary["mmlu_anatomy"]["group"] == "mmlu_stem" and "group" not in summary["gsm8k"]
