"""Runaway costs (issue 32, item 2; issue 43, items 1 and 2): the request count of a membership task
or a dataset-level test is checked against ``max_requests`` before any request is built, naming the
count and the setting that lowers it; a count no machine holds is refused whatever ``max_requests``
says; a fine-tuning command says how many steps it plans and refuses an absurd number."""

from __future__ import annotations

import json
import time

import pytest
from support.dataset_tests import build_task
from support.harness import REPO, WIKIMIA32, cpu_float32, harness_args, run_lm_eval, run_lm_eval_pdd
from support.standard_tasks import standard_tasks

from pdd_tasks.dataset_tests import TooCostly
from pdd_tasks.registry import REQUEST_CEILING, ScoringSettings, request_ceiling
from pdd_tasks.tasks.base import TooManyRequests, check_request_count


def test_a_run_asking_for_too_many_requests_is_refused_before_scoring(tiny_model, tiny_table, tmp_path):
    rows = [json.loads(line) for line in WIKIMIA32.read_text().splitlines()[:6]]
    data = tmp_path / "texts.jsonl"
    data.write_text("".join(json.dumps({"text": row["input"], "label": row["label"]}) + "\n" for row in rows))
    metadata = {
        "data_files": str(data),
        "freq_table": str(tiny_table),
        "samia": True,
        "samia_samples": 40,
        "max_requests": 100,
    }
    args = harness_args(cpu_float32(tiny_model), "pdd_custom", tmp_path / "out", device="cpu", metadata=metadata)
    process = run_lm_eval(args, cwd=tmp_path, check=False)
    assert process.returncode == 1 and "Traceback" not in process.stderr, process.stderr[-3000:]
    assert "TooManyRequests" in process.stderr
    assert "6 texts x 1 (the text) + 1 (lowercase) + 40 (samia) requests each = 252 requests" in process.stderr
    assert "more than max_requests=100" in process.stderr and "lower the per-text count of samia" in process.stderr
    assert "Scoring texts" not in process.stderr and not (tmp_path / "out").exists()


def test_pdd_custom_refuses_a_benchmark_data_key_it_would_ignore(tiny_model, tiny_table, tmp_path):
    """Issue 32's minor flaw: max_words was ignored with a warning and kept in the results JSON as if applied."""
    rows = [json.loads(line) for line in WIKIMIA32.read_text().splitlines()[:4]]
    data = tmp_path / "texts.jsonl"
    data.write_text("".join(json.dumps({"text": row["input"], "label": row["label"]}) + "\n" for row in rows))
    metadata = {"data_files": str(data), "freq_table": str(tiny_table), "max_words": 5}
    args = harness_args(cpu_float32(tiny_model), "pdd_custom", tmp_path / "out", device="cpu", metadata=metadata)
    process = run_lm_eval(args, cwd=tmp_path, check=False)
    assert process.returncode == 1 and "Traceback" not in process.stderr, process.stderr[-3000:]
    assert (
        "pdd_custom: metadata max_words=5 is a data key of the benchmark tasks and does not apply here"
        in process.stderr
    )
    assert not (tmp_path / "out").exists()


# -- issue 43, item 1: a raised max_requests does not let a count through that no machine holds ----------


def test_the_ceiling_is_the_smaller_of_a_fixed_count_and_what_memory_holds():
    assert request_ceiling(memory=2**50)[0] == REQUEST_CEILING
    small, why = request_ceiling(memory=2**30)
    assert small < REQUEST_CEILING and "1.0 GiB of memory" in why
    assert 10**5 < request_ceiling()[0] <= REQUEST_CEILING  # room for every default run on this machine


def test_a_raised_max_requests_does_not_let_a_runaway_permutation_count_through(tmp_path):
    tasks = standard_tasks(tmp_path / "tasks")
    (tasks / "pdd_contamination.yaml").write_text(
        f"include: {REPO / 'task_configs/contamination/pdd_contamination.yaml'}\n"
    )
    metadata = {
        "source_tasks": ["arc_easy_local"],
        "source_include_path": str(tasks),
        # as the issue wrote them: 1e9 and 1e12, read from JSON as floats (item 7)
        "exchangeability": {"num_shards": 10, "permutations": 1e9, "max_requests": 1e12},
    }
    started = time.monotonic()
    with pytest.raises(TooCostly) as refused:
        build_task("contamination", metadata)
    message = str(refused.value)
    assert "10,000,000,010 requests (num_shards 10 x (permutations 1,000,000,000 + 1))" in message
    assert "whatever max_requests says" in message and '"permutations": 100' in message
    assert "raise max_requests" not in message and "max_requests=" not in message
    assert time.monotonic() - started < 60  # refused before anything is built


def test_a_raised_max_requests_does_not_let_a_runaway_augmentation_count_through():
    settings = ScoringSettings.from_metadata({"pac": True, "pac_augmentations": 10**9, "max_requests": 10**12})
    with pytest.raises(TooManyRequests) as refused:
        check_request_count("pdd_custom", 6, settings)
    message = str(refused.value)
    assert "6 texts x 1 (the text) + 1 (lowercase) + 1,000,000,000 (pac) requests each = 6,000,000,012" in message
    assert "whatever max_requests says" in message and "lower pac_augmentations=1,000,000,000" in message
    assert "raise max_requests" not in message and '"max_requests"' not in message


def test_the_proposed_max_requests_is_never_past_the_ceiling():
    settings = ScoringSettings.from_metadata({"samia": True, "samia_samples": 40, "max_requests": 100})
    with pytest.raises(TooManyRequests, match=r"--metadata '\{\"max_requests\": 252\}'"):
        check_request_count("pdd_custom", 6, settings)  # within the ceiling: raising the cap is proposed
    with pytest.raises(TooManyRequests) as refused:
        check_request_count("pdd_custom", REQUEST_CEILING, settings)  # past it: only lowering is
    assert "raise max_requests" not in str(refused.value) and "lower samia_samples=40" in str(refused.value)


# -- issue 43, item 2: fine-tuning commands plan their steps and refuse absurd ones -----------------------


@pytest.mark.parametrize("command", [["make-ordered"], ["make-controlled", "--pool", "hub"]])
def test_an_absurd_epoch_count_is_refused_before_anything_starts(tiny_model, tmp_path, command):
    started = time.monotonic()
    process = run_lm_eval_pdd(
        [*command, "--model", tiny_model, "--epochs", "100000000", "--output", tmp_path / "out", "--no-progress"]
    )
    assert process.returncode == 2, process.stderr[-2000:]
    assert "argument --epochs: expected at most 1,000 epochs" in process.stderr and "Traceback" not in process.stderr
    assert not (tmp_path / "out").exists() and time.monotonic() - started < 30


def test_a_fine_tuning_past_the_step_ceiling_is_refused_before_the_model_loads(tiny_model, tmp_path):
    data = tmp_path / "bench.jsonl"
    data.write_text("".join(json.dumps({"text": f"example number {i}"}) + "\n" for i in range(1001)))
    process = run_lm_eval_pdd(
        ["make-ordered", "--model", tiny_model, "--data", data, "--examples", "1001", "--exposure", "examples",
         "--epochs", "1000", "--batch-size", "1", "--output", tmp_path / "out", "--no-progress"]
    )  # fmt: skip
    assert process.returncode == 1 and "Traceback" not in process.stderr, process.stderr[-2000:]
    assert (
        "1,001 training texts x 1,000 epochs at --batch-size 1 = 1,001,000 optimizer steps, more than 1,000,000"
        in process.stderr
    )
    assert "lower --epochs" in process.stderr and "fine-tuning:" not in process.stderr
    assert not (tmp_path / "out").exists()


def test_a_fine_tuning_says_its_planned_steps_and_an_estimate_before_it_ends(tiny_model, tmp_path):
    data = tmp_path / "bench.jsonl"
    data.write_text("".join(json.dumps({"text": f"example number {i}"}) + "\n" for i in range(10)))
    process = run_lm_eval_pdd(
        ["make-ordered", "--model", tiny_model, "--data", data, "--examples", "10", "--exposure", "examples",
         "--epochs", "2", "--batch-size", "3", "--output", tmp_path / "out", "--no-progress"]
    )  # fmt: skip
    assert process.returncode == 0, process.stderr[-2000:]
    planned = "fine-tuning: 10 texts x 2 epochs at batch size 3 = 8 optimizer steps"
    assert planned in process.stderr and "for 8 steps" in process.stderr
    assert process.stderr.index(planned) < process.stderr.index("for 8 steps") < process.stderr.index("tuned ")
