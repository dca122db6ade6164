"""pdd_contamination: CoDeC and the exchangeability test on several stock-shaped tasks, in the same
``lm_eval`` run as one of them, through the real command line with a tiny GPT-2."""

from __future__ import annotations

import json
import logging

import pytest
from support.harness import REPO, cpu_float32, harness_args, read_results, read_samples, run_lm_eval
from support.standard_tasks import standard_tasks

from pdd_tasks.tools.cli import main
from pdd_tasks.tools.report.tables import print_method_table


CONFIGS = REPO / "task_configs"
SOURCES = ["arc_easy_local", "gsm8k_local"]


@pytest.fixture(scope="module")
def tasks_dir(tmp_path_factory):
    """The local stock-shaped tasks, and pdd_contamination's and pdd_codec's YAMLs included beside
    them (the command line takes one --include_path)."""
    directory = standard_tasks(tmp_path_factory.mktemp("contamination-tasks"))
    for name in ("contamination/pdd_contamination.yaml", "codec/pdd_codec.yaml"):
        (directory / name.split("/")[1]).write_text(f"include: {CONFIGS / name}\n")
    return directory


def test_both_tests_on_each_task_beside_a_standard_eval(tiny_model, tasks_dir, tmp_path):
    metadata = {
        "source_tasks": SOURCES,
        "source_include_path": str(tasks_dir),
        "exchangeability": {"num_shards": 12, "permutations": 3},
    }
    args = harness_args(
        cpu_float32(tiny_model),
        "arc_easy_local,pdd_contamination",
        tmp_path / "out",
        include=tasks_dir,
        device="cpu",
        batch_size=16,
        metadata=metadata,
    )
    run_lm_eval(args, cwd=tmp_path)
    results = read_results(tmp_path / "out")
    assert 0 <= results["results"]["arc_easy_local"]["acc,none"] <= 1
    values = results["results"]["pdd_contamination"]
    for source in SOURCES:
        assert values[f"codec_examples/{source},none"] == 24
        assert 0 <= values[f"codec_score/{source},none"] <= 1
        assert f"codec_score/{source}_stderr,none" in values
    assert values["exchangeability_shards/arc_easy_local,none"] == 12
    assert 0 <= values["exchangeability_pvalue/arc_easy_local,none"] <= 1
    # two GSM8K-shaped examples are longer than the tiny model's 256 tokens: that test is left out
    # for that task, before scoring, and the results JSON says why
    summary = results["configs"]["pdd_contamination"]["metadata"]["contamination"]
    assert summary["arc_easy_local"]["exchangeability"]["longest_shard_tokens"] <= 256
    assert "more than the model's context window of 256" in summary["gsm8k_local"]["exchangeability"]["not_applicable"]
    assert not any(key.startswith("exchangeability_pvalue/gsm8k_local") for key in values)
    # `lm-eval-pdd table`: the standard task's accuracy beside both tests, Holm across the p-values
    # (one here: unchanged), and why the exchangeability test did not apply to the GSM8K-shaped task
    table = print_method_table(tmp_path / "out")
    rows = {line.split(" | ")[0].strip("| "): line for line in table.splitlines() if line.startswith("| ")}
    accuracy = results["results"]["arc_easy_local"]["acc,none"]
    arc_p = values["exchangeability_pvalue/arc_easy_local,none"]
    assert f"| acc {accuracy:.3f} ± " in rows["arc_easy_local"]
    assert f"| p {arc_p:.2g} over 12 shards | {arc_p:.3g} | " in rows["arc_easy_local"]
    assert f"{values['codec_score/gsm8k_local,none']:.3f} [" in rows["gsm8k_local"]
    assert "| - (not in this run) |" in rows["gsm8k_local"]
    assert "exchangeability: " in rows["gsm8k_local"] and "context window" in rows["gsm8k_local"]
    # the verdict needs both tests: none for the GSM8K-shaped task, whose exchangeability test did not
    # apply; one short line a task, citing the evidence by its docs anchor
    assert "| no verdict |" in rows["gsm8k_local"]
    assert "- gsm8k_local: no verdict: exchangeability did not apply (" in table
    arc_line = next(line for line in table.splitlines() if line.startswith("- arc_easy_local: "))
    assert len(arc_line) <= 212 and "[evidence: controls-" in arc_line

    # `lm-eval-pdd report`: the same rows and verdicts in the HTML page, from a run without any
    # labelled pdd task
    assert main(["report", str(tmp_path / "out"), "--out", str(tmp_path / "report")]) == 0
    page = (tmp_path / "report" / "report.html").read_text()
    assert "<h2>Contamination checks (pdd_contamination)" in page
    assert f"<td>arc_easy_local</td><td>acc {accuracy:.3f} ± " in page
    assert "<b>gsm8k_local: no verdict</b>: exchangeability did not apply (" in page
    # its contamination leaderboard: one model, this run's verdicts (the same Holm family) and numbers
    board = json.loads((tmp_path / "report" / "contamination.json").read_text())
    assert board["models"] == [tiny_model.name] and board["benchmarks"] == SOURCES
    verdicts = {task: rows[task].split(" | ")[8] for task in SOURCES}
    assert board["matrix"] == {tiny_model.name: verdicts} and verdicts["gsm8k_local"] == "no verdict"
    arc, gsm8k = board["rows"]
    assert (arc["exchangeability_p"], arc["accuracy"], arc["codec_examples"]) == (arc_p, accuracy, 24)
    assert arc["codec_score"] == values["codec_score/arc_easy_local,none"]
    assert gsm8k["exchangeability_p"] is None and "context window" in gsm8k["not_applied"]

    samples = read_samples(tmp_path / "out", "pdd_contamination")
    assert len(samples) == 2 * 24 + 12
    assert {(sample["doc"]["test"], sample["doc"]["source_task"]) for sample in samples} == {
        ("codec", "arc_easy_local"), ("codec", "gsm8k_local"), ("exchangeability", "arc_easy_local")
    }  # fmt: skip

    # the same CoDeC documents and answers as pdd_codec's own run on that task
    args = harness_args(
        cpu_float32(tiny_model),
        "pdd_codec",
        tmp_path / "codec",
        include=tasks_dir,
        device="cpu",
        batch_size=16,
        metadata={"source_task": "gsm8k_local", "source_include_path": str(tasks_dir)},
    )
    run_lm_eval(args, cwd=tmp_path)
    alone = read_results(tmp_path / "codec")["results"]["pdd_codec"]
    assert alone["codec_score,none"] == pytest.approx(values["codec_score/gsm8k_local,none"])
    assert alone["codec_mean_delta,none"] == pytest.approx(values["codec_mean_delta/gsm8k_local,none"], abs=1e-4)


def build(metadata: dict):
    """The task as the harness builds it from its YAML, with ``metadata``."""
    from lm_eval.tasks._yaml_loader import load_yaml

    from pdd_tasks.tasks.dataset_level import ContaminationTask

    config = load_yaml(CONFIGS / "contamination" / "pdd_contamination.yaml", resolve_func=True)
    return ContaminationTask(config={**config, "metadata": metadata})


def test_the_planned_line_counts_the_tokens_of_the_requests_where_the_model_is_known(tiny_model, tasks_dir, caplog):
    """With the run's model known, the line logged before scoring gives the tokens of the requests the task
    builds (each request's text after the start token, as the model's tokenizer encodes it), references
    included; without it, the requests alone."""
    from transformers import AutoTokenizer

    metadata = {
        "source_tasks": ["arc_easy_local"],
        "source_include_path": str(tasks_dir),
        "references": {"arc_easy_local": "gsm8k_local"},
        "exchangeability": {"num_shards": 12, "permutations": 2},  # 2 examples a shard: within the 256 tokens
    }
    with caplog.at_level(logging.INFO, logger="pdd_tasks"):
        task = build({**metadata, "pretrained": str(tiny_model)})
    task.build_all_requests(limit=None, rank=0, world_size=1)
    tokenizer = AutoTokenizer.from_pretrained(tiny_model)
    tokens = sum(len(tokenizer("".join(request.args)).input_ids) + 1 for request in task.instances)
    each = "codec on arc_easy_local: 48, codec reference on arc_easy_local: 48, exchangeability on arc_easy_local: 36"
    assert f"pdd_contamination: 132 requests planned, about {tokens:,} tokens ({each})." in caplog.text
    assert tokens > 132 * 10 and len({request.doc["source_task"] for request in task.instances}) == 1
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="pdd_tasks"):
        build(metadata)  # no model named: the requests alone
    assert f"pdd_contamination: 132 requests planned ({each})." in caplog.text


def test_a_test_that_cannot_apply_is_left_out_with_the_reason(tasks_dir):
    metadata = {"source_tasks": SOURCES, "source_include_path": str(tasks_dir), "exchangeability": {"num_shards": 20}}
    task = build(metadata)
    summary = task.config.metadata["contamination"]
    for source in SOURCES:
        assert "24 examples are too few for 20 shards" in summary[source]["exchangeability"]["not_applicable"]
        assert summary[source]["codec"]["scored"] == 24
    assert {doc["test"] for doc in task.documents} == {"codec"}
    assert not any(metric["metric"].startswith("exchangeability") for metric in task.config.metric_list)


def test_shards_longer_than_the_context_window_are_left_out_before_scoring(tiny_model, tasks_dir):
    metadata = {
        "source_tasks": ["gsm8k_local"],
        "source_include_path": str(tasks_dir),
        "exchangeability": {"num_shards": 2},
        "pretrained": str(tiny_model),  # as the command line merges --model_args into the metadata
    }
    summary = build(metadata).config.metadata["contamination"]["gsm8k_local"]
    assert "more than the model's context window of 256" in summary["exchangeability"]["not_applicable"]
    assert summary["codec"]["scored"] == 24


@pytest.mark.parametrize(
    "metadata, message",
    [
        ({"source_tasks": 3}, "source_tasks=3: expected the lm-eval tasks, groups or tags to test"),
        ({"source_tasks": []}, "source_tasks=\\[\\]"),
        ({"source_tasks": ["a", "a"]}, "names a task twice"),
        ({"source_tasks": ["a"], "tests": ["codec", "ppl"]}, "tests=\\['codec', 'ppl'\\]"),
        ({"source_tasks": ["a"], "codec": 3}, "codec=3: expected the settings of pdd_codec"),
    ],
)
def test_bad_settings_are_refused(metadata, message):
    from pdd_tasks.errors import UserError as ContaminationError

    with pytest.raises(ContaminationError, match=message):
        build(metadata)


def test_limit_is_refused(tiny_model, tasks_dir, tmp_path):
    metadata = {"source_tasks": ["arc_easy_local"], "source_include_path": str(tasks_dir)}
    args = harness_args(
        cpu_float32(tiny_model), "pdd_contamination", tmp_path / "out", include=tasks_dir, metadata=metadata, limit=5
    )
    process = run_lm_eval([*args], cwd=tmp_path, check=False)
    assert process.returncode == 1 and "ContaminationError" in process.stderr and "--limit" in process.stderr


def test_the_task_is_indexed():
    from lm_eval.tasks import TaskManager

    assert "pdd_contamination" in TaskManager(include_path=str(CONFIGS)).all_subtasks
