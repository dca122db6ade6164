"""pdd_exchangeability through the real ``lm_eval`` command line with tiny GPT-2 models.

A tiny model trained on the shards of a file in its canonical order must give a small p-value on
that file and not on a shuffled copy; a source_task is read from a small YAML task shipped in
tests/fixtures/exchangeability_source; bad settings fail with a message that names the fix.
"""

from __future__ import annotations

import json
import random

import pytest
from support.dataset_tests import build_task
from support.harness import (
    REPO,
    cpu_float32,
    harness_args,
    read_results,
    read_samples,
    run_lm_eval,
    run_lm_eval_pdd,
    tasks_path,
    wikimia_rows,
)
from support.models import build_tiny_model, train_on

from pdd_metrics.exchangeability import shard_bounds


SHARDS, PERMUTATIONS = 8, 10
SOURCE_DIR = REPO / "tests" / "fixtures" / "exchangeability_source"


def short_examples(n: int = 48) -> list[str]:
    return [" ".join(row["input"].split()[:8]) for row in wikimia_rows(32)[:n]]


def write_jsonl(path, texts):
    path.write_text("".join(json.dumps({"text": text}) + "\n" for text in texts))
    return path


def run_exchangeability(model_dir, out, metadata, check=True, cwd=None):
    out.parent.mkdir(parents=True, exist_ok=True)
    metadata = {"num_shards": SHARDS, "permutations": PERMUTATIONS, **metadata}
    args = harness_args(
        cpu_float32(model_dir), "pdd_exchangeability", out, device="cpu", batch_size=16, metadata=metadata
    )
    return run_lm_eval(args, cwd=cwd or out.parent, check=check)


def metrics(out) -> dict:
    results = read_results(out)["results"]["pdd_exchangeability"]
    return {key.split(",")[0]: value for key, value in results.items() if key.startswith("exchangeability_")}


@pytest.fixture(scope="module")
def ordered_model(tmp_path_factory):
    """A tiny GPT-2 trained on each shard of the file in its canonical order (the tiny model
    memorises by position, so each training text is one shard, scored from the start token)."""
    directory = build_tiny_model(tmp_path_factory.mktemp("ordered-gpt2"))
    examples = short_examples()
    train_on(directory, ["\n".join(examples[a:b]) for a, b in shard_bounds(len(examples), SHARDS)], steps=150)
    return directory


def test_canonical_order_seen_in_training_is_detected(ordered_model, tmp_path):
    data = write_jsonl(tmp_path / "canonical.jsonl", short_examples())
    run_exchangeability(ordered_model, tmp_path / "out", {"data_files": str(data)})
    result = metrics(tmp_path / "out")
    assert result["exchangeability_pvalue"] < 0.01
    assert result["exchangeability_mean_difference"] > 0
    assert (result["exchangeability_shards"], result["exchangeability_permutations"]) == (SHARDS, PERMUTATIONS)
    assert result["exchangeability_examples"] == 48
    samples = read_samples(tmp_path / "out", "pdd_exchangeability")
    assert len(samples) == SHARDS
    assert all(len(sample["resps"]) == 1 + PERMUTATIONS for sample in samples)


def test_an_order_the_model_never_saw_is_not_flagged(ordered_model, tmp_path):
    shuffled = short_examples()
    random.Random(1).shuffle(shuffled)
    data = write_jsonl(tmp_path / "shuffled.jsonl", shuffled)
    run_exchangeability(ordered_model, tmp_path / "out", {"data_files": str(data)})
    assert metrics(tmp_path / "out")["exchangeability_pvalue"] > 0.05


def test_source_task_documents_in_task_order(tiny_model, tmp_path):
    run_exchangeability(
        tiny_model,
        tmp_path / "out",
        {"source_task": "pdd_test_quiz", "source_include_path": str(SOURCE_DIR), "num_shards": 3},
        cwd=REPO,  # the fixture task's data_files path is relative to the repository root
    )
    result = metrics(tmp_path / "out")
    assert (result["exchangeability_shards"], result["exchangeability_examples"]) == (3, 12)
    assert 0 <= result["exchangeability_pvalue"] <= 1
    samples = sorted(read_samples(tmp_path / "out", "pdd_exchangeability"), key=lambda s: s["doc"]["shard"])
    examples = [example for sample in samples for example in sample["doc"]["examples"]]
    assert examples[0] == "Question: What colour is a clear daytime sky?\nAnswer: blue"
    assert examples[11] == "Question: Which season follows winter?\nAnswer: spring"


def test_template_over_several_fields(tiny_model, tmp_path):
    rows = [json.loads(line) for line in (SOURCE_DIR / "quiz.jsonl").read_text().splitlines()]
    data = tmp_path / "quiz.jsonl"
    data.write_text("".join(json.dumps(row) + "\n" for row in rows))
    template = "Q: {{question}} A: {{choices[answer]}}"
    run_exchangeability(tiny_model, tmp_path / "out", {"data_files": str(data), "template": template, "num_shards": 2})
    samples = sorted(read_samples(tmp_path / "out", "pdd_exchangeability"), key=lambda s: s["doc"]["shard"])
    assert samples[0]["doc"]["examples"][1] == "Q: How many legs does a spider have? A: eight"


def test_too_few_examples_for_the_shards_is_a_clear_error(tiny_model, tmp_path):
    data = write_jsonl(tmp_path / "few.jsonl", short_examples(10))
    process = run_exchangeability(tiny_model, tmp_path / "out", {"data_files": str(data)}, check=False)
    assert process.returncode != 0
    assert "10 examples are too few for 8 shards" in process.stderr
    assert '"num_shards": 5' in process.stderr


def test_a_shard_longer_than_the_context_window_is_refused_before_scoring(tiny_model, tmp_path):
    long_examples = [row["input"] for row in wikimia_rows(128)[:16]]  # 8 per shard: far over 256 tokens
    data = write_jsonl(tmp_path / "long.jsonl", long_examples)
    process = run_exchangeability(tiny_model, tmp_path / "out", {"data_files": str(data), "num_shards": 2}, check=False)
    assert process.returncode != 0
    assert "more than the model's context window of 256" in process.stderr
    assert "Running loglikelihood requests" not in process.stderr


def test_make_ordered_writes_the_control_and_refuses_to_overwrite(tiny_model, tmp_path):
    data = write_jsonl(tmp_path / "bench.jsonl", short_examples(12))
    output = tmp_path / "ordered"
    command = ["make-ordered", "--model", str(tiny_model)]
    command += ["--data", str(data), "--examples", "10", "--block-examples", "5", "--epochs", "1", "--no-progress"]
    made = run_lm_eval_pdd([*command, "--output", str(output)])
    assert made.returncode == 0, made.stderr[-2000:]
    assert made.stdout.strip() == str(output)
    canonical = [json.loads(line)["text"] for line in (output / "canonical.jsonl").read_text().splitlines()]
    shuffled = [json.loads(line)["text"] for line in (output / "shuffled.jsonl").read_text().splitlines()]
    assert canonical == short_examples(10) and sorted(shuffled) == sorted(canonical) and shuffled != canonical
    manifest = json.loads((output / "manifest.json").read_text())
    assert (manifest["examples"], manifest["blocks"], manifest["training"]["steps"]) == (10, 2, 1)
    assert (output / "model" / "config.json").is_file()
    again = run_lm_eval_pdd([*command, "--output", str(output)])
    assert again.returncode == 1 and "pass --force to replace" in again.stderr


def test_the_task_is_indexed():
    from lm_eval.tasks import TaskManager

    assert "pdd_exchangeability" in TaskManager(include_path=tasks_path()).all_subtasks


@pytest.mark.parametrize(
    "metadata, message",
    [
        ({}, "exactly one source of examples"),
        ({"data_files": "a.jsonl", "source_task": "arc_easy"}, "exactly one source of examples"),
        ({"data_files": "a.jsonl", "num_shards": 1}, "num_shards=1: expected a whole number >= 2"),
        ({"data_files": "a.jsonl", "permutations": 0}, "permutations=0"),
        ({"data_files": "a.jsonl", "separator": 3}, "separator=3"),
    ],
)
def test_bad_settings_are_refused(metadata, message):
    from pdd_tasks.errors import UserError

    with pytest.raises(UserError, match=message):
        build_task("exchangeability", metadata)


def test_a_pdd_task_as_source_task_is_refused(tiny_model, tmp_path):
    process = run_exchangeability(
        tiny_model,
        tmp_path / "out",
        {"source_task": "pdd_wikimia_32", "source_include_path": tasks_path()},
        check=False,
    )
    assert process.returncode == 1 and "Traceback" not in process.stderr, process.stderr[-3000:]
    for fragment in ("ExampleSourceError", "source_task 'pdd_wikimia_32' is a pdd task", '"source_task": "arc_easy"', "data_files"):  # fmt: skip
        assert fragment in process.stderr, process.stderr[-3000:]


def test_unknown_source_task_names_the_include_path_setting():
    from pdd_tasks.loading.examples import ExampleSourceError, examples_from_task

    with pytest.raises(ExampleSourceError, match="source_include_path"):
        examples_from_task("pdd_no_such_task", str(SOURCE_DIR))
