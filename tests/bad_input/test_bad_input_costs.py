"""Runaway costs of the membership tasks (issue 32, item 2): the request count is checked against
``max_requests`` before any request is built, naming the count and the setting that lowers it."""

from __future__ import annotations

import json

from support.harness import WIKIMIA32, cpu_float32, harness_args, run_lm_eval


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
