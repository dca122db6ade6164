"""pdd_contamination's sources: groups and tags expanded to their leaf tasks (nested groups kept in the
results), the run's own tasks where ``source_tasks`` is not given (through the real ``lm_eval`` command
line), and the messages for an unknown name, a leaf that cannot load and a run with nothing to check.

The tasks: lm-eval's stock ``arc_easy`` and ``gsm8k`` on local files (:mod:`support.standard_tasks`),
two more ARC-shaped copies under the tag ``local_arcs``, a group of two ARC-shaped tasks inside a group
with the GSM8K-shaped one, and a group with a task whose data file is missing."""

from __future__ import annotations

import pytest
from support.harness import REPO, cpu_float32, harness_args, read_results, run_lm_eval
from support.standard_tasks import arc_rows, standard_tasks, write_jsonl

from pdd_tasks import lm_eval_patches
from pdd_tasks.errors import UserError


CONFIGS = REPO / "task_configs"

#: An ARC-shaped copy of arc_easy_local on its own test file (``{data}``), tagged ``local_arcs``.
ARC_COPY = """include: arc_easy_local.yaml
task: {name}
tag: [local_arcs]
dataset_kwargs:
  data_files:
    train: {train}
    validation: {validation}
    test: {data}
"""

GROUPS = {
    "local_arc_group.yaml": "group: local_arc_group\ntask: [arc_easy_local, arc_second_local]\n",
    "local_bench.yaml": "group: local_bench\ntask: [local_arc_group, gsm8k_local]\n",
    "local_with_broken.yaml": "group: local_with_broken\ntask: [arc_easy_local, arc_broken_local]\n",
}

#: Small settings: CoDeC on 24 examples a task, the exchangeability test on 12 shards, 1 permutation.
SMALL = {"exchangeability": {"num_shards": 12}}


@pytest.fixture(scope="module")
def tasks_dir(tmp_path_factory):
    directory = standard_tasks(tmp_path_factory.mktemp("contamination-groups"))
    data = directory / "data"
    train, validation = data / "arc_easy_train.jsonl", data / "arc_easy_validation.jsonl"
    for name, seed in (("arc_second_local", 11), ("arc_third_local", 12)):
        test = write_jsonl(data / f"{name}.jsonl", arc_rows(24, seed=seed))
        (directory / f"{name}.yaml").write_text(
            ARC_COPY.format(name=name, train=train, validation=validation, data=test)
        )
    broken = ARC_COPY.format(name="arc_broken_local", train=train, validation=validation, data=data / "missing.jsonl")
    (directory / "arc_broken_local.yaml").write_text(broken.replace("tag: [local_arcs]", "tag: []"))
    for name, text in GROUPS.items():
        (directory / name).write_text(text)
    (directory / "pdd_contamination.yaml").write_text(f"include: {CONFIGS / 'contamination/pdd_contamination.yaml'}\n")
    return directory


def build(metadata: dict):
    from lm_eval.tasks._yaml_loader import load_yaml

    from pdd_tasks.tasks.dataset_level import ContaminationTask

    config = load_yaml(CONFIGS / "contamination" / "pdd_contamination.yaml", resolve_func=True)
    return ContaminationTask(config={**config, "metadata": metadata})


def documents_of(task) -> set[tuple[str, str]]:
    return {(doc["test"], doc["source_task"]) for doc in task.documents}


def test_a_nested_group_is_tested_leaf_by_leaf_and_its_tree_recorded(tasks_dir):
    task = build({"source_tasks": ["local_bench"], "source_include_path": str(tasks_dir), **SMALL})
    metadata = task.config.metadata
    assert metadata["contamination_groups"] == {
        "local_bench": ["local_arc_group", "gsm8k_local"],
        "local_arc_group": ["arc_easy_local", "arc_second_local"],
    }
    summary = metadata["contamination"]
    assert list(summary) == ["arc_easy_local", "arc_second_local", "gsm8k_local"]
    assert [summary[leaf]["group"] for leaf in summary] == ["local_arc_group", "local_arc_group", "local_bench"]
    assert all(summary[leaf]["codec"]["scored"] == 24 for leaf in summary)
    built = documents_of(task)
    assert ("codec", "arc_second_local") in built and ("exchangeability", "arc_easy_local") in built
    assert "codec_score/arc_second_local" in {metric["metric"] for metric in task.config.metric_list}


def test_a_tag_is_tested_task_by_task_beside_a_task_named_alone(tasks_dir):
    metadata = {
        "source_tasks": ["local_arcs", "gsm8k_local"],
        "source_include_path": str(tasks_dir),
        "tests": ["codec"],
    }
    task = build(metadata)
    assert task.config.metadata["contamination_groups"] == {"local_arcs": ["arc_second_local", "arc_third_local"]}
    summary = task.config.metadata["contamination"]
    assert list(summary) == ["arc_second_local", "arc_third_local", "gsm8k_local"]
    assert summary["arc_third_local"]["group"] == "local_arcs" and "group" not in summary["gsm8k_local"]
    assert documents_of(task) == {("codec", name) for name in summary}


def test_a_leaf_that_cannot_load_is_reported_and_the_others_checked(tasks_dir, caplog):
    metadata = {"source_tasks": ["local_with_broken"], "source_include_path": str(tasks_dir), "tests": ["codec"]}
    task = build(metadata)
    summary = task.config.metadata["contamination"]
    assert summary["arc_easy_local"]["codec"]["scored"] == 24
    broken = summary["arc_broken_local"]
    assert "source_task 'arc_broken_local': its documents could not be read" in broken["not_loaded"]
    assert broken["codec"]["not_applicable"].startswith("the task could not be loaded: ")
    assert broken["group"] == "local_with_broken"
    assert documents_of(task) == {("codec", "arc_easy_local")}
    assert "arc_broken_local is not tested" in caplog.text
    # alone, nothing is left to check: an error that says why
    with pytest.raises(UserError, match="no task of \\['arc_broken_local'\\] could be loaded: source_task 'arc_broken"):
        build({"source_tasks": ["arc_broken_local"], "source_include_path": str(tasks_dir)})


@pytest.mark.parametrize(
    "name, message",
    [
        ("local_bnech", "names 'local_bnech', which is neither an lm-eval task, a group nor a tag; did you mean 'local_bench'?"),
        ("no_such_thing_at_all", "neither an lm-eval task, a group nor a tag; `lm_eval ls tasks` lists them"),
        ("pdd_contamination", "is a pdd task"),
    ],
)  # fmt: skip
def test_an_unknown_name_names_itself_and_the_fix(tasks_dir, name, message):
    with pytest.raises(UserError, match=message.replace("?", "\\?").replace("[", "\\[")):
        build({"source_tasks": [name], "source_include_path": str(tasks_dir)})


def test_without_source_tasks_the_run_s_tasks_are_seen_before_evaluation(tasks_dir):
    """What lm-eval's evaluate gets (TaskManager.load's result, or get_task_dict's legacy nested dict) is
    what pdd_contamination tests; its own task, and a reference, are not tested."""
    from lm_eval.tasks import TaskManager, get_task_dict

    manager = TaskManager(include_path=str(tasks_dir), metadata={"tests": ["codec"]})
    loaded = manager.load(["local_arc_group", "gsm8k_local", "pdd_contamination"])
    contamination = loaded["tasks"]["pdd_contamination"]
    assert contamination.pending and "contamination" not in contamination.config.metadata
    lm_eval_patches.show_run_tasks(loaded)
    assert not contamination.pending
    assert documents_of(contamination) == {("codec", "arc_easy_local"), ("codec", "arc_second_local"), ("codec", "gsm8k_local")}  # fmt: skip
    assert contamination.config.metadata["contamination_groups"] == {
        "local_arc_group": ["arc_easy_local", "arc_second_local"]
    }
    assert len(contamination.eval_docs) == 3 * 24
    assert contamination._aggregation_list["codec_score/gsm8k_local"].__name__ == "codec_score"

    metadata = {"tests": ["codec"], "references": {"arc_easy_local": "arc_third_local"}}
    nested = get_task_dict(["arc_easy_local", "arc_third_local", "pdd_contamination"], TaskManager(include_path=str(tasks_dir), metadata=metadata))  # fmt: skip
    lm_eval_patches.show_run_tasks(nested)
    summary = nested["pdd_contamination"].config.metadata["contamination"]
    assert list(summary) == ["arc_easy_local"] and summary["arc_easy_local"]["codec"]["reference"]["task"] == "arc_third_local"  # fmt: skip


def test_lm_eval_checks_the_other_tasks_of_its_run(tiny_model, tasks_dir, tmp_path):
    """``lm_eval --tasks <group>,<task>,pdd_contamination`` is the whole command (ARC-shaped tasks: the
    tiny model's window is too short for GSM8K's generation): a new process of lm-eval's
    own console script, where pdd_tasks is first imported while the run's tasks are being built."""
    args = harness_args(
        cpu_float32(tiny_model),
        "local_arc_group,arc_third_local,pdd_contamination",
        tmp_path / "out",
        include=tasks_dir,
        device="cpu",
        batch_size=32,
        metadata={"tests": ["codec"]},
        log_samples=False,
    )
    run_lm_eval(args, cwd=tmp_path, process=True)
    results = read_results(tmp_path / "out")
    values = results["results"]["pdd_contamination"]
    for leaf in ("arc_easy_local", "arc_second_local", "arc_third_local"):
        assert values[f"codec_examples/{leaf},none"] == 24
        assert 0 <= values[f"codec_score/{leaf},none"] <= 1
    assert 0 <= results["results"]["arc_second_local"]["acc,none"] <= 1  # the evals themselves, unchanged
    metadata = results["configs"]["pdd_contamination"]["metadata"]
    assert metadata["contamination_groups"] == {"local_arc_group": ["arc_easy_local", "arc_second_local"]}
    assert metadata["contamination"]["arc_second_local"]["group"] == "local_arc_group"
    assert "group" not in metadata["contamination"]["arc_third_local"]


def test_a_run_with_nothing_to_check_says_what_to_add(tiny_model, tasks_dir, tmp_path):
    args = harness_args(cpu_float32(tiny_model), "pdd_contamination", tmp_path / "out", include=tasks_dir)
    process = run_lm_eval(args, cwd=tmp_path, check=False)
    assert process.returncode == 1
    assert "no task to check: source_tasks is not given and the run has no other task" in process.stderr
    assert "lm_eval --tasks arc_easy,gsm8k,pdd_contamination" in process.stderr
    assert "Traceback" not in process.stderr
