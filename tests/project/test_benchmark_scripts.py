"""Smoke runs of every benchmark script at toy size, so that none rots (issue 31, item 4): each runs its
real code path on the CPU and must print its table; the numbers are not checked here.

Most run in this process (:func:`run_here`): the script's ``__main__`` with its command line, and the
``lm_eval`` commands it starts run as :mod:`in_process` runs them (a new process costs ~15 s of imports
and lm-eval's task index, the toy run a second or two). The vLLM scripts run in ``.venv-vllm``
(``vllm_engine``)."""

from __future__ import annotations

import argparse
import contextlib
import gzip
import json
import os
import runpy
import subprocess
import sys
from pathlib import Path

import pytest
from support import in_process
from support.harness import OFFLINE, REPO, cpu_float32, harness_args, run_lm_eval, vllm_venv_or_skip, wikimia_rows


BENCHMARKS = REPO / "benchmarks"


def lm_eval_here(
    command, *, env=None, cwd=None, check=False, stdout=None, stderr=None, **_
) -> subprocess.CompletedProcess:
    """``subprocess.run`` of the ``lm_eval`` console script, run in this process: ``env``'s changes
    applied for the run, its output written where ``stdout`` / ``stderr`` name a file, ``check`` honoured."""
    changed = {key: value for key, value in (env or {}).items() if os.environ.get(key) != value}
    saved = {key: os.environ.get(key) for key in changed}
    os.environ.update(changed)
    try:
        finished = in_process.run_in_process(
            in_process.lm_eval_main, ["lm_eval", *command[1:]], Path(cwd or os.getcwd())
        )
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    for stream, text in ((stdout, finished.stdout), (stderr, finished.stderr)):
        if hasattr(stream, "write"):
            stream.write(text)
    if finished.returncode:  # as a failed process's stderr would show through
        sys.stderr.write(finished.stderr[-3000:])
    if check and finished.returncode:
        raise subprocess.CalledProcessError(finished.returncode, command, finished.stdout, finished.stderr)
    return subprocess.CompletedProcess(command, finished.returncode, finished.stdout, finished.stderr)


@contextlib.contextmanager
def lm_eval_commands_here():
    """Every ``subprocess.run`` of this environment's ``lm_eval`` console script runs :func:`lm_eval_here`
    meanwhile (another environment's, e.g. ``.venv-vllm``'s, stays a process)."""
    real = subprocess.run
    here = Path(sys.executable).with_name("lm_eval").absolute()

    def run(command, *args, **kwargs):
        if isinstance(command, (list, tuple)) and Path(command[0]).absolute() == here:
            return lm_eval_here(command, *args, **kwargs)
        return real(command, *args, **kwargs)

    subprocess.run = run
    try:
        yield
    finally:
        subprocess.run = real


def run_here(name: str, *args, cwd: Path = REPO) -> subprocess.CompletedProcess:
    """``python benchmarks/<name> args`` in this process: the script as ``__main__``, ``benchmarks/``
    first on ``sys.path`` (as for a script), its ``lm_eval`` commands in this process too."""
    script = BENCHMARKS / name

    def main():
        sys.path.insert(0, str(BENCHMARKS))
        try:
            with lm_eval_commands_here():
                runpy.run_path(str(script), run_name="__main__")
        finally:
            sys.path.remove(str(BENCHMARKS))

    return in_process.run_in_process(main, [str(script), *map(str, args)], cwd, user_errors_as_messages=False)


def test_gpu_check_runs_on_the_cpu_at_toy_size(tmp_path):
    out = tmp_path / "gpu_check.json"
    process = run_here(
        "gpu_check.py", "--device", "cpu", "--layers", "1", "--hidden", "32", "--texts", "2", "--agreement-texts", "1",
        "--repeats", "1", "--batch-size", "2", "--json", str(out),
    )  # fmt: skip
    assert process.returncode == 0, process.stderr[-3000:]
    assert "| pdd capture + scoring |" in process.stdout and "- dcpdd: largest per-text difference 0" in process.stdout
    result = json.loads(out.read_text())
    assert result["capture"]["texts"] == 2 and result["capture"]["tokens"] > 0 and result["agreement"]["texts"] == 1
    assert set(result["capture"]["seconds"]) == {"stock", "capture", "pdd"}
    # back on the CPU machine: the same text scored here against the file's scores (CPU = CPU: 0)
    compared = tmp_path / "compared.json"
    process = run_here("gpu_check.py", "--compare-with", str(out), "--json", str(compared))
    assert process.returncode == 0, process.stderr[-3000:]
    differences = json.loads(compared.read_text())["compared"]["cpu"]
    assert {m: d["largest_difference"] for m, d in differences.items()} == dict.fromkeys(differences, 0.0)


def test_benchmark_options_refuse_unknown_values_naming_the_choices():
    process = run_here("gpu_check.py", "--parts", "capture,bogus")
    assert process.returncode == 2
    assert "--parts: expected capture and/or agreement (comma-separated), got 'capture,bogus'" in process.stderr
    process = run_here("vllm_repeat.py", "--settings", "default", "bogus")
    assert process.returncode == 2
    assert "--settings: unknown setting 'bogus'; choose from default, nobind," in process.stderr
    process = run_here("gpu_check.py", "--compare-with", str(REPO / "no-such-file.json"))
    assert process.returncode == 1
    assert "no-such-file.json: no per-text scores of part 2 there" in process.stderr
    assert "give the --json of a run with --parts agreement" in process.stderr
    process = run_here("cpu_efficiency.py", "--task", "pdd_no_such_task")
    assert process.returncode == 1 and "Traceback" not in process.stderr
    assert "--task pdd_no_such_task: no task or group of that name; `lm_eval ls tasks --include_path" in process.stderr
    process = run_here("capture_overhead.py", "--task", "pdd_wikimia")
    assert process.returncode == 1 and "Traceback" not in process.stderr
    assert "--task pdd_wikimia is a group: give one of its tasks (pdd_wikimia_128, " in process.stderr


@pytest.mark.parametrize(
    "script, args, message",
    [
        ("example_board.py", ["--ordered-epochs", "0"], "argument --ordered-epochs: expected a whole number >= 1, got 0"),
        ("example_board.py", ["--ordered-epochs", "5000"], "argument --ordered-epochs: expected at most 1,000 epochs (the controls use 1 to 3), got 5000"),
        ("example_board.py", ["--epochs", "-1"], "argument --epochs: expected a whole number >= 1, got -1"),
        ("example_board.py", ["--model", "nowhere"], "argument --model: no model at nowhere (no config.json there); give a Hugging Face model's folder"),
        ("example_board.py", ["--third", "."], "argument --third: no model at . (no config.json there); give a Hugging Face model's folder"),
        ("example_board.py", ["--shards", "1"], "argument --shards: expected at least 2 shards (the t-test needs two), got 1"),
        ("example_board.py", ["--tuned-rows", "0"], "argument --tuned-rows: expected a whole number >= 1, got 0"),
        ("leaderboard_tasks.py", ["--check-only", "--model_args", "models/x"], "--model_args: expected pretrained=<model>[,<more>] (lm_eval's hf arguments), got 'models/x'"),
        ("leaderboard_tasks.py", ["--check-only", "--model_args", "pretrained=x", "--rows", "0"], "argument --rows: expected a whole number >= 1, got 0"),
        ("contamination_controls.py", ["--tune-on", "all"], "--tune-on all tunes the exposure controls' model: add --exposure (ordered, shuffled or examples)"),
        ("contamination_controls.py", ["--tune-on", "all", "--exposure", "examples", "--unseen-files", "0"], "--tune-on all tunes on the file and its --unseen-files files together: give --unseen-files 1 or more"),
        ("contamination_controls.py", ["--epochs", "1", "0"], "argument --epochs: expected a whole number >= 1, got 0"),
        ("group_level.py", ["--replicates", "0"], "argument --replicates: expected a whole number >= 1, got 0"),
        ("group_level.py", ["--shards", "1"], "argument --shards: expected at least 2 shards (the t-test needs two), got 1"),
        ("group_level.py", ["--alpha", "1.5"], "argument --alpha: expected a level between 0 and 1 (e.g. 0.05), got 1.5"),
        ("group_level.py", ["--shift", "inf"], "argument --shift: expected a finite number, got 'inf'"),
        ("group_level.py", ["--seed", "-1"], "argument --seed: expected a seed from 0 to 4294967295, got -1"),
        ("group_level.py", ["--controls-only"], "--controls-only reads only the --controls runs: give --controls FILE ..., or leave it out"),
    ],
)  # fmt: skip
def test_benchmark_options_out_of_range_are_refused_in_one_line_before_any_work(script, args, message, tmp_path):
    """Argparse's refusal (status 2, its last line the option, the value and what is expected), in place of
    a traceback or an hours-long run that fails at its end; nothing written."""
    process = run_here(script, *args, cwd=tmp_path)
    assert process.returncode == 2 and "Traceback" not in process.stderr, process.stderr[-3000:]
    assert process.stderr.strip().splitlines()[-1] == f"{script}: error: {message}"
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    "document, message",
    [
        (None, "no such file"),
        ("[1, 2", "not JSON (Expecting ',' delimiter: line 1 column 6 (char 5))"),
        ('{"runs": {"multiple_choice": {"level": {}, "tuned": {}}}}', "no exposure controls' runs in it"),
    ],
    ids=["missing", "not-json", "a-level-run"],
)
def test_group_level_names_a_controls_file_that_is_no_exposure_run_before_simulating(document, message, tmp_path):
    controls = tmp_path / "controls.json"
    if document is not None:
        controls.write_text(document)
    process = run_here("group_level.py", "--controls", controls, cwd=tmp_path)
    assert process.returncode == 1 and "Traceback" not in process.stderr, process.stderr[-3000:]
    fix = "give the --json of a `contamination_controls.py --exposure` run."
    assert process.stderr.strip().splitlines()[-1] == f"--controls {controls}: {message}; {fix}"
    assert process.stdout == ""  # no simulated row printed first


JSON_WRITERS = [
    "capture_chunks.py", "contamination_controls.py", "cpu_efficiency.py", "example_board.py", "exchangeability_level.py",
    "gpu_check.py", "scoring_cost.py", "table_sensitivity.py", "vllm_exit_loop.py", "vllm_repeat.py",
]  # fmt: skip


@pytest.mark.parametrize("script", JSON_WRITERS)
def test_benchmarks_replace_an_existing_json_only_with_force(script, tmp_path):
    """A benchmark's --json naming a file that exists stops it before any work (the file untouched)."""
    existing = tmp_path / "kept.json"
    existing.write_text('{"kept": true}\n')
    process = run_here(script, "--json", existing)
    assert process.returncode == 1, process.stderr[-3000:]
    assert f"--json {existing} exists; choose another file or add --force to replace it." in process.stderr
    assert "Traceback" not in process.stderr and existing.read_text() == '{"kept": true}\n'


def test_request_memory_measures_the_bytes_each_built_request_holds():
    process = run_here("request_memory.py", "--requests", "2000")
    assert process.returncode == 0, process.stderr[-3000:]
    assert "| pdd_exchangeability | 2,000 |" in process.stdout and "| pdd_custom (PAC) |" in process.stdout
    assert "BYTES_PER_REQUEST = 400" in process.stdout


def test_prefix_sharing_counts_wikimia_without_a_model():
    process = run_here("prefix_sharing.py", "--limit", "3", "--wikimia24", str(REPO / "no-such-folder"))
    assert process.returncode == 0, process.stderr[-3000:]
    # the shipped WikiMIA's four splits in one run: 1,650 texts, 3,300 passes without sharing, 1,552 with
    assert "| pdd_wikimia | all four, one run | 1650 | 3,300 / 1,552 | 351,305 / 211,066 | 1.66x |" in process.stdout


def test_dataset_inference_fpr_runs_on_synthetic_scores():
    process = run_here("dataset_inference_fpr.py", "--synthetic", "0.5", "--seeds", "5", "--size", "20")
    assert process.returncode == 0, process.stderr[-3000:]
    assert "| dataset inference |" in process.stdout


def test_exchangeability_level_runs_and_resamples_at_toy_size(tmp_path):
    package = tmp_path / "controls.json"
    package.write_text("{}")
    args = ["--workdir", str(tmp_path / "work"), "--files", "1", "--examples", "24", "--shards", "6", "--orders", "4"]
    process = run_here(
        "exchangeability_level.py", *args, "--cells", "4x1", "6x3", "--replicates", "50", "--package-data", str(package)
    )
    assert process.returncode == 0, process.stderr[-3000:]
    assert "| 4x1 | " in process.stdout and "| 6x3 | " in process.stdout
    level = json.loads(package.read_text())["exchangeability_level"]
    assert level["files"] == 1 and set(level["rejects_at_alpha"]) == {"4x1", "6x3"}
    # --reuse: other cells from the same run, no model run
    again = run_here("exchangeability_level.py", *args, "--cells", "2x2", "--replicates", "50", "--reuse")
    assert again.returncode == 0 and "| 2x2 | " in again.stdout, again.stderr[-3000:]


def test_contamination_cost_counts_the_check_beside_the_eval():
    process = run_here("contamination_cost.py", "--examples", "40", "--settings", "4x1", "2x3")
    assert process.returncode == 0, process.stderr[-3000:]
    assert "| the eval itself (arc_easy, 0-shot), stock lm-eval | 160 | " in process.stdout
    assert "| exchangeability 4 x 1 | 8 | " in process.stdout and "| exchangeability 2 x 3 | 8 | " in process.stdout
    rows = {
        line.split(" | ")[0]: line.split(" | ")[1:] for line in process.stdout.splitlines() if line.startswith("| ")
    }
    eval_tokens, eval_forwarded = (int(x.replace(",", "")) for x in rows["| the eval itself (arc_easy, 0-shot), stock lm-eval"][1:3])  # fmt: skip
    # lm-eval forwards a question with one-token choices once; the check forwards every request
    assert 0 < eval_forwarded < eval_tokens
    shard_tokens, shard_forwarded = rows["| exchangeability 4 x 1"][1:3]
    assert shard_tokens == shard_forwarded
    # in the eval's run: CoDeC's no-context requests and the eval's gold answers ride on longer passes (HF and
    # vLLM); every common prefix forwarded once would forward less still
    stock, apart, shared, every_prefix = (int(cell.split(" (")[0].replace(",", "")) for cell in rows["| 4x1"])
    assert 0 < every_prefix < shared < apart and shared < stock
    stock, apart, shared = (int(cell.split(" (")[0].replace(",", "")) for cell in rows["| 4x1 on vLLM"])
    assert 0 < shared < apart < stock


def test_contamination_cost_times_the_eval_and_the_check():
    process = run_here("contamination_cost.py", "--examples", "8", "--settings", "2x1", "--time", "1")
    assert process.returncode == 0, process.stderr[-3000:]
    assert "median of 1: the eval alone " in process.stdout
    assert "; eval + check, shared " in process.stdout and "; eval + check, not shared " in process.stdout


def test_check_cost_by_task_counts_each_eval_and_the_check_beside_it(tmp_path):
    """Per leaf of the leaderboards' local copies: the eval's tokens (a generate_until eval between the gold
    answers' length and max_gen_toks), the check's under shared passes, a group's row the sum of its leaves;
    --output writes the table under the command."""
    out = tmp_path / "cost.txt"
    process = run_here("check_cost_by_task.py", "--tasks", "gsm8k,leaderboard_gpqa", "--limit-examples", "6", "--output", out)  # fmt: skip
    assert process.returncode == 0, process.stderr[-3000:]
    cells = {
        line.split(" | ")[0][2:]: line.split(" | ")[1:] for line in process.stdout.splitlines() if line.startswith("| ")
    }
    numbers = lambda text: [int(x.replace(",", "")) for x in text.split(" (")[0].split("-")]  # noqa: E731
    output, shots, examples, eval_tokens, check_tokens, _ = cells["gsm8k"]
    assert (output, shots, examples) == ("generate_until", "5", "6")
    low, high = numbers(eval_tokens)
    assert 0 < low < high and high - low < 6 * 256  # max_gen_toks 256 a question, less the gold answer
    assert numbers(check_tokens)[0] > 0
    leaves = [cells[f"leaderboard_gpqa_{kind}"] for kind in ("diamond", "extended", "main")]
    group = cells["**leaderboard_gpqa** (sum of 3)"]
    for column in (3, 4):
        assert numbers(group[column]) == [sum(numbers(leaf[column])[0] for leaf in leaves)]
    assert all(0 < numbers(leaf[4])[0] for leaf in leaves) and "**all** (sum of 4)" in cells
    written = out.read_text()
    assert written.startswith("# python benchmarks/check_cost_by_task.py --tasks gsm8k,leaderboard_gpqa --limit-examples 6 --output cost.txt (tokens only, no model), ")  # fmt: skip
    assert written.split("\n", 1)[1] == process.stdout
    again = run_here("check_cost_by_task.py", "--limit-examples", "6", "--output", out)
    assert again.returncode == 1 and f"--output {out} exists; choose another file or add --force" in again.stderr


# ------------------------------------------------------------------ scripts that read a run's samples


@pytest.fixture(scope="module")
def wikimia_run(tiny_model, tiny_table, tmp_path_factory) -> Path:
    """A ``--log_samples`` run of ``pdd_wikimia_32``'s first 12 texts (7 members, 5 non-members) on the tiny GPT-2."""
    out = tmp_path_factory.mktemp("wikimia-run")
    table = {"freq_table": str(tiny_table)}
    run_lm_eval(harness_args(cpu_float32(tiny_model), "pdd_wikimia_32", out, metadata=table, limit=12), cwd=out)
    return out


def test_compare_runs_compares_the_scores_of_two_runs(wikimia_run):
    process = run_here("compare_runs.py", wikimia_run, wikimia_run)
    assert process.returncode == 0, process.stderr[-3000:]
    assert "| loss | 12 | 0 | 1.00000 |" in process.stdout and "| dcpdd | 12 | 0 |" in process.stdout


def test_stderr_cost_times_the_aggregations_of_a_run(wikimia_run):
    process = run_here("stderr_cost.py", wikimia_run, "--repeats", "1")
    assert process.returncode == 0, process.stderr[-3000:]
    assert "pdd_wikimia_32: 12 texts" in process.stdout and "| standard errors, " in process.stdout
    assert "| blind baseline: classifier fit (once) |" in process.stdout


def test_ptdi_fdr_resamples_a_run(wikimia_run):
    samples = next(wikimia_run.rglob("samples_pdd_wikimia_32_*.jsonl"))
    args = ["--members", "2", "--non-members", "2", "--references", "3", "--seeds", "3"]
    process = run_here("ptdi_fdr.py", samples, *args)
    assert process.returncode == 0, process.stderr[-3000:]
    assert "(7 members, 5 non-members)" in process.stdout and "| loss | " in process.stdout


# ------------------------------------------------------------------ timings on the default model


def test_capture_overhead_times_both_paths():
    process = run_here("capture_overhead.py", *"--task pdd_wikimia_32 --texts 2 --repeats 1 --batch-size 2".split())
    assert process.returncode == 0, process.stderr[-3000:]
    assert "2 texts = 4 requests" in process.stdout
    assert "| stock HF loglikelihood | " in process.stdout and "| pdd capture + scoring | " in process.stdout


def test_cpu_efficiency_counts_the_work_and_times_its_parts(tmp_path):
    out = tmp_path / "efficiency.json"
    args = "--task pdd_wikimia_32 --texts 2 --batch-size 2 --profile 1 --json".split()
    process = run_here("cpu_efficiency.py", *args, out)
    assert process.returncode == 0, process.stderr[-3000:]
    assert "| model calls | " in process.stdout and "| peak: torch.mm square 2048 | " in process.stdout
    assert "| matrix product: LM head | " in process.stdout and "| matrix product: MLP gate and up | " in process.stdout
    result = json.loads(out.read_text())
    # 2 texts and their lowercased copies, one batch of 2 each way; every real token is among the positions
    assert (result["texts"], result["requests"], result["batches"]) == (2, 4, 2)
    assert 0 < result["real tokens"] <= result["positions forwarded"]
    assert 0.25 < result["gflop per position (matrix products)"] < 0.3  # SmolLM2-135M: 2 x 134.5M weights
    assert set(result["seconds"]) == {"model calls", "rest of the answering", "scoring", "total"}
    # one of the 2 batches profiled: every op's share adds up to the whole; the products carry their rate
    ops = {row["op"]: row for row in result["profile"]["ops"]}
    assert result["profile"]["batches"] == 1 and abs(sum(r["share"] for r in ops.values()) - 1) < 1e-6
    assert ops["matrix product: LM head"]["gflop/s"] > 0 and "attention (SDPA kernel)" in ops


def test_capture_chunks_times_each_chunk_size_and_compares_the_values(tmp_path):
    out = tmp_path / "chunks.json"
    args = "--task pdd_wikimia_32 --texts 2 --batch-size 2 --rounds 1 --chunk-elements 1048576 49152 --json"
    process = run_here("capture_chunks.py", *args.split(), out)
    assert process.returncode == 0, process.stderr[-3000:]
    assert "\n| 1,048,576 | 4 | " in process.stdout and "\n| 49,152 | 0.1875 | " in process.stdout
    result = json.loads(out.read_text())
    assert result["requests"] == 4 and set(result["seconds (every round)"]) == {"1048576", "49152"}
    # one position a chunk against 21: the same values to float32 rounding
    assert max(result["largest difference from the first setting"]["49152"].values()) < 1e-4


@pytest.mark.parametrize("bad", ["--rounds 0", "--texts 0", "--chunk-elements 1048576 0"])
def test_capture_chunks_refuses_a_setting_below_one(bad):
    process = run_here("capture_chunks.py", *bad.split())
    assert process.returncode == 2
    assert "--rounds, --texts and every --chunk-elements must be at least 1" in process.stderr


def test_reference_loop_times_the_authors_loop_beside_the_pdd_path():
    process = run_here("reference_loop.py", *"--task pdd_wikimia_32 --texts 2 --repeats 1 --batch-size 2".split())
    assert process.returncode == 0, process.stderr[-3000:]
    assert "| reference loop (batch 1, float32) | " in process.stdout
    assert "| pdd path (batch 2, float32) | " in process.stdout


def test_topk_approximation_compares_top_k_with_exact():
    process = run_here("topk_approximation.py", "--texts", "4", "--k", "1", "5", "--batch-size", "4")
    assert process.returncode == 0, process.stderr[-3000:]
    assert "task pdd_wikimia_32: 4 texts" in process.stdout
    assert "\n| 1 | " in process.stdout and "\n| 5 | " in process.stdout


def test_samia_cost_samples_batched_and_one_at_a_time(tiny_model):
    args = ["--model", tiny_model, "--texts", "1", "--samples", "2", "--max-tokens", "4", "--batch-size", "2"]
    process = run_here("samia_cost.py", *args)
    assert process.returncode == 0, process.stderr[-3000:]
    assert "1 texts x 2 continuations of up to 4 tokens (2 in all)" in process.stdout
    assert "batched: " in process.stdout and "drawn identically by both: " in process.stdout


# ------------------------------------------------------------------ frequency tables and memory


@pytest.fixture(scope="module")
def small_corpus(tmp_path_factory) -> Path:
    """A Pile-shaped ``.jsonl.gz`` (``text``, ``domain``): 40 WikiMIA texts, every other one "github"."""
    path = tmp_path_factory.mktemp("corpus") / "corpus.jsonl.gz"
    texts = [row["input"] for row in wikimia_rows(64)[:40]]
    rows = [{"text": text, "domain": ("github", "wikipedia")[i % 2]} for i, text in enumerate(texts)]
    with gzip.open(path, "wt", encoding="utf-8") as handle:
        handle.writelines(json.dumps(row) + "\n" for row in rows)
    return path


def test_table_build_throughput_times_the_builds(small_corpus):
    args = ["--pile", small_corpus, *"--docs 20 --repeats 1 --batch-size 8".split()]
    process = run_here("table_build_throughput.py", *args)
    assert process.returncode == 0, process.stderr[-3000:]
    assert "Texts: 20 documents of corpus.jsonl.gz" in process.stdout
    assert "| (d) build-table engine from .jsonl.gz | " in process.stdout
    assert "| (e) build_table on one core (parallel=False) | " in process.stdout


def test_table_sensitivity_scores_with_every_table(tiny_model, small_corpus, tmp_path):
    controlled = tmp_path / "controlled"
    controlled.mkdir()
    (controlled / "model").symlink_to(tiny_model)
    rows = [{"text": row["input"], "label": row["label"]} for row in wikimia_rows(32)[:8]]
    (controlled / "data.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    out = tmp_path / "sensitivity.json"
    args = ["--skip-wikimia", "--controlled-dir", controlled, "--pile", small_corpus, "--cache-dir", tmp_path / "cache"]
    # the word-list estimates left out: each tokenizes some 330,000 words (~17 s)
    process = run_here("table_sensitivity.py", *args, "--tables", "pile-10%", "pile-github", "uniform", "--json", out)
    assert process.returncode == 0, process.stderr[-3000:]
    assert "| pile-all | " in process.stdout and "| uniform | " in process.stdout
    result = json.loads(out.read_text())["runs"]["controlled (controlled)"]
    assert result["texts"] == 8 and set(result["rows"]) == {"pile-all", "pile-10%", "pile-github", "uniform"}


def test_memory_growth_measures_both_paths_in_fresh_processes(tiny_model):
    args = ["--model", tiny_model, *"--lengths 16 --texts 2 --batch-sizes 2 --threads 1".split()]
    process = run_here("memory_growth.py", *args)
    assert process.returncode == 0, process.stderr[-3000:]
    assert "| 1,024 | 16 | 2 | " in process.stdout


def test_scoring_cost_times_cells_in_fresh_processes_and_fits_lines(tiny_model, tiny_table, tmp_path):
    out, png = tmp_path / "cost.json", tmp_path / "cost.png"
    args = "--texts 2 4 --words 8 --wikimia 32 --wikimia-texts 3 --dtype float32 --batch-size 2 --json".split()
    process = run_here("scoring_cost.py", "--model", tiny_model, "--freq-table", tiny_table, *args, out, "--plot", png)
    assert process.returncode == 0, process.stderr[-3000:]
    assert "| wikimia | 3 | 32 | " in process.stdout and "| synthetic | 4 | 8 | " in process.stdout
    result = json.loads(out.read_text())
    cells = {(c["kind"], c["texts"]): c for c in result["cells"]}
    assert set(cells) == {("wikimia", 3), ("synthetic", 2), ("synthetic", 4)}
    # each text and its lowercased copy; 8 words are at least 8 tokens; memory after loading is below the peak
    assert cells["synthetic", 4]["requests"] == 8 and cells["synthetic", 4]["tokens"] >= 2 * 4 * 8
    assert all(0 < c["resident after loading MiB"] <= c["peak MiB"] for c in cells.values())
    assert set(result["fits"]["per length (synthetic)"]) == {"8"}
    assert png.read_bytes().startswith(b"\x89PNG")


def test_scoring_cost_synthetic_texts_have_the_words_asked_and_both_labels():
    sys.path.insert(0, str(BENCHMARKS))
    try:
        from scoring_cost import line_fit, synthetic_docs
    finally:
        sys.path.remove(str(BENCHMARKS))
    docs = synthetic_docs(6, 17, seed=1)
    assert [len(d["text"].split()) for d in docs] == [17] * 6 and {d["label"] for d in docs} == {0, 1}
    assert docs == synthetic_docs(6, 17, seed=1) and docs != synthetic_docs(6, 17, seed=2)
    assert line_fit([1, 2, 3], [5, 7, 9]) == {"intercept": 3.0, "slope": 2.0}


@pytest.fixture
def common(monkeypatch):
    """``benchmarks/_common.py`` as the scripts import it (``benchmarks/`` on ``sys.path``)."""
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    import _common

    return _common


def test_child_result_runs_the_calling_script_in_a_fresh_process(common, tmp_path):
    """The script named (the caller's ``__file__``), not ``_common.py``: run as ``_common.py --child``, the
    child printed nothing and both scripts' smoke runs failed."""
    script = tmp_path / "cell.py"
    script.write_text("import json, sys\nprint('loading')\nprint(json.dumps({'argv': sys.argv[1:2], **json.loads(sys.argv[2])}))\n")  # fmt: skip
    assert common.child_result(script, {"texts": 2}) == {"argv": ["--child"], "texts": 2}


def test_a_failed_command_stops_the_script_with_its_command_line_and_the_end_of_its_stderr(common, tmp_path):
    script = tmp_path / "cell.py"
    script.write_text("import sys\nprint('loading', file=sys.stderr)\nsys.exit('no model at /nowhere: give --model DIR')\n")  # fmt: skip
    with pytest.raises(SystemExit) as stopped:
        common.child_result(script, {"model": "/nowhere"})
    assert str(stopped.value) == (
        f'{sys.executable} {script} --child \'{{"model": "/nowhere"}}\'\n'
        "  exited with status 1; the end of its stderr:\n    loading\n    no model at /nowhere: give --model DIR"
    )
    with pytest.raises(SystemExit, match=r"exited with status 3; its messages are above\.$"):
        common.run_checked([sys.executable, "-c", "raise SystemExit(3)"], capture=False)


# ------------------------------------------------------------------ backends: the completions server, hf


def test_completions_throughput_counts_one_prompt_per_text():
    pytest.importorskip("llama_cpp", reason="llama-cpp-python (test extra) is not installed")
    args = ["--texts", "1", "--repeats", "1", "--threads", "1", "--n-ctx", "512"]
    process = run_here("completions_throughput.py", *args)
    assert process.returncode == 0, process.stderr[-3000:]
    assert "| stock loglikelihood (logprobs=1) | " in process.stdout
    assert "| pdd capture (logprobs=20) + scoring | " in process.stdout
    assert "One prompt per text on both paths (2 texts)" in process.stdout


def test_completions_agreement_compares_the_server_with_hf():
    pytest.importorskip("llama_cpp", reason="llama-cpp-python (test extra) is not installed")
    process = run_here("completions_agreement.py", "--limit", "2")
    assert process.returncode == 0, process.stderr[-3000:]
    assert "pdd_wikimia_32, first 2 docs: local-completions (Q4_1 GGUF via llama.cpp, top-20)" in process.stdout
    assert "\n| loss | " in process.stdout and "\n| dcpdd | " in process.stdout


def test_backend_tables_runs_each_backend(tmp_path):
    pytest.importorskip("llama_cpp", reason="llama-cpp-python (test extra) is not installed")
    args = ["--limit", "2", "--backends", "hf,local-completions", "--keep", tmp_path]
    process = run_here("backend_tables.py", *args)
    assert process.returncode == 0, process.stderr[-3000:]
    assert "Task pdd_wikimia_32, 2 documents" in process.stdout
    assert "\n| Loss | " in process.stdout
    assert "Per-document scores, local-completions vs hf (2 documents):" in process.stdout


# ------------------------------------------------------------------ what a method costs beside a run


def test_neighbor_cost_times_generation_and_the_runs(bert_mlm, tmp_path):
    process = run_here("neighbor_cost.py", "--mlm", bert_mlm, "--limit", "2", "--count", "2", "--keep", tmp_path)
    assert process.returncode == 0, process.stderr[-3000:]
    assert "neighbour generation: load " in process.stdout and "| + Neighbor (n=2) | 4 | " in process.stdout


def test_small_ref_cost_runs_without_with_and_from_the_cache(tmp_path):
    process = run_here("small_ref_cost.py", tmp_path, "--limit", "2", "--batch-size", "2")
    assert process.returncode == 0, process.stderr[-3000:]
    assert "| target only | " in process.stdout and "| with Small-Ref (empty cache) | " in process.stdout
    assert "| 2 / 0 | " in process.stdout and "| 0 / 2 | " in process.stdout  # scored, then from the cache


# ------------------------------------------------------------------ the contamination tests' controls


def test_exchangeability_controls_tunes_and_tests(tiny_model, tmp_path):
    args = [
        "--model",
        tiny_model,
        "--workdir",
        tmp_path,
        *"--examples 8 --epochs 1 --shards 4 --permutations 1".split(),
    ]
    process = run_here("exchangeability_controls.py", *args)
    assert process.returncode == 0, process.stderr[-3000:]
    for model, file, epochs in (("tuned", "canonical", 1), ("tuned", "shuffled", 1), ("untuned", "canonical", 0)):
        assert f"| {model} | {file}.jsonl | 8 | {epochs} | 4 x 1 | " in process.stdout


def run_controls_on_templated_rows(tiny_model, tmp_path, sizes: str) -> tuple[subprocess.CompletedProcess, dict]:
    """``contamination_controls.py`` with the tiny model on templated multiple-choice rows at ``sizes``:
    the finished run (asserted to have succeeded) and the summary of its ``--json``."""
    out = tmp_path / "controls.json"
    args = ["--model", tiny_model, "--workdir", tmp_path / "work", "--shapes", "multiple_choice", "--rows", "templated"]
    process = run_here("contamination_controls.py", *args, *sizes.split(), "--json", out)
    assert process.returncode == 0, process.stderr[-3000:]
    return process, json.loads(out.read_text())["summary"]


def test_contamination_controls_tunes_and_tests_one_shape(tiny_model, tmp_path):
    package = tmp_path / "package.json"  # the packaged controls, with keys that other runs wrote
    package.write_text(
        json.dumps({"exchangeability_level": {"kept": 1}, "exposure_controls": {"kept": 2}, "shapes": {}})
    )
    sizes = f"--examples 8 --epochs 1 --level-seeds 1 --shards 4 --permutations 1 --no-ptdi --package-data {package}"
    process, summary = run_controls_on_templated_rows(tiny_model, tmp_path, sizes)
    assert "| arc_easy-shaped (8) | untuned, 1 untouched file | " in process.stdout
    assert "| arc_easy-shaped (8) | tuned 1 epoch (" in process.stdout
    shape = summary["shapes"]["multiple_choice"]
    assert shape["level"]["files"] == 1 and set(shape["power"]) == {"1"}
    packaged = json.loads(package.read_text())
    assert packaged["exchangeability_level"] == {"kept": 1} and packaged["exposure_controls"] == {"kept": 2}
    assert packaged["shapes"] == summary["shapes"]


def test_contamination_controls_table_from_and_merge_name_a_missing_file(tmp_path):
    process = run_here("contamination_controls.py", "--table-from", tmp_path / "absent.json")
    assert process.returncode != 0
    assert f"--table-from: no such file: {tmp_path / 'absent.json'} (the --json of an earlier run)." in process.stderr
    assert "Traceback" not in process.stderr
    process = run_here("contamination_controls.py", "--merge", tmp_path / "absent.json")
    assert process.returncode == 1 and "Traceback" not in process.stderr
    assert "--merge adds the shapes of a run to the file --json names: give --json FILE" in process.stderr
    (tmp_path / "earlier.json").write_text("{}")
    process = run_here(
        "contamination_controls.py", "--merge", tmp_path / "absent.json", "--json", tmp_path / "earlier.json"
    )
    assert process.returncode == 1 and "Traceback" not in process.stderr
    assert f"--merge: no such file: {tmp_path / 'absent.json'} (the --json of an earlier run)." in process.stderr


def test_contamination_controls_unseen_files_share_no_sentence_with_the_file(monkeypatch):
    """An ARC-shaped row blanks one word of a sentence; an unseen file must not hold a sentence of the
    file tuned on with another word blanked (before 28 November 1-4 of 48 rows did)."""
    monkeypatch.syspath_prepend(str(BENCHMARKS))  # the script's own imports (_common), as when run
    controls = runpy.run_path(str(BENCHMARKS / "contamination_controls.py"))
    words = "alpha bravo charlie delta echoes foxtrot golfer hotel india juliet kilos limas".split()
    sentences = [
        f"Sentence {i} names {words[i % 12]} and {words[(i * 5) % 12]} beside {words[(i * 7) % 12]}" for i in range(40)
    ]
    make = lambda n, seed: controls["cloze_rows"](sentences, n, seed)  # noqa: E731
    file = controls["texts_of"]("multiple_choice", make, 10, 101)
    unseen = controls["texts_of"]("multiple_choice", make, 10, 3000, exclude=file.sources)
    assert len(file.texts) == len(unseen.texts) == 10 and file.sources.isdisjoint(unseen.sources)
    filled = {  # each row is its own sentence with one word blanked
        question.split('"')[1].replace("____", answer)
        for question, answer in (text.split("\nAnswer: ") for text in unseen.texts)
    }
    assert filled == unseen.sources and filled <= set(sentences)


def test_contamination_controls_reuses_a_copied_workdir_but_not_a_model_tuned_otherwise(monkeypatch, tmp_path):
    """A tuned model left in --workdir is reused when it was tuned as this run would tune it, also from a
    workdir copied elsewhere (its model of fewer epochs then has another path), and refused otherwise."""
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    controls = runpy.run_path(str(BENCHMARKS / "contamination_controls.py"))
    data = tmp_path / "copy" / "file.jsonl"
    data.parent.mkdir()
    data.write_text('{"text": "b"}\n{"text": "a"}\n')
    tuned = tmp_path / "copy" / "tuned-e2"  # tuned from tuned-e1 of the workdir it was copied from
    tuned.mkdir()
    (tuned / "canonical.jsonl").write_text('{"text": "a"}\n{"text": "b"}\n')
    manifest = {"base_model": str(tmp_path / "first" / "tuned-e1" / "model"), "exposure": "blocks",
                "settings": {"seed": 0, "learning_rate": 1e-4, "batch_size": 1, "epochs": 1}}  # fmt: skip
    (tuned / "manifest.json").write_text(json.dumps(manifest))
    args = argparse.Namespace(learning_rate=1e-4, train_batch=1)
    check = controls["_check_reused"]
    check(tuned, tmp_path / "copy" / "tuned-e1" / "model", data, 1, 0, args, "blocks")  # reused: no exception
    with pytest.raises(SystemExit, match=r"tuned otherwise \(the model tuned from, seed: not this run's\)"):
        check(tuned, tmp_path / "copy" / "tuned-e3" / "model", data, 1, 1, args, "blocks")
    with pytest.raises(SystemExit, match=r"\(the exposure: not this run's\)"):
        check(tuned, tmp_path / "copy" / "tuned-e1" / "model", data, 1, 0, args, "examples")


def test_contamination_controls_exposure_with_codec_alone(tiny_model, tmp_path):
    sizes = "--exposure examples --examples 8 --epochs 1 --tuning-seeds 1 --train-batch 4 --tests codec"
    process, summary = run_controls_on_templated_rows(tiny_model, tmp_path, sizes)
    assert "| arc_easy-shaped (8), examples | untuned | untouched files | " in process.stdout
    assert "| not run | not run | " in process.stdout
    assert summary["sizes"]["tests"] == ["codec"] and summary["model"].startswith(f"{tiny_model} (--model)")
    cells = summary["shapes"]["multiple_choice"]["tuned"]["1"]["unseen"]
    assert cells["files"] == 1 and cells["exchangeability_pvalues"] is None and len(cells["codec_scores"]) == 1
    (p_value,) = summary["shapes"]["multiple_choice"]["tuned"]["1"]["file_against_unseen_pvalues"]
    assert 0 <= p_value <= 1 and "against its tuning's unseen file as a reference (one-sided Fisher" in process.stdout


def test_contamination_controls_tune_on_all_tunes_on_every_file_and_its_group_is_read(tiny_model, tmp_path):
    """``--tune-on all``: one model tuned on the file and its --unseen-files files together (the files
    --tune-on one leaves unseen), an epoch each example once; each file tested, none unseen; and
    ``group_level.py --controls`` reads them as the group "all 3 tuned"."""
    sizes = "--exposure examples --examples 8 --epochs 1 --tuning-seeds 1 --train-batch 4 --unseen-files 2 "
    sizes += "--shards 4 --permutations 1 --tune-on all"
    process, summary = run_controls_on_templated_rows(tiny_model, tmp_path, sizes)
    assert "| the other files tuned on | " in process.stdout and "unseen files of the shape" not in process.stdout
    tuned = summary["shapes"]["multiple_choice"]["tuned"]["1"]
    assert summary["sizes"]["tune_on"] == "all" and summary["shapes"]["multiple_choice"]["tune_on"] == "all"
    assert "unseen" not in tuned and tuned["also_tuned"]["files"] == 2 and tuned["file_against_unseen_pvalues"] == []
    assert tuned["optimizer_steps"] == [6]  # 3 files of 8, 4 examples a step: 2 a file, as --tune-on one's file
    work = tmp_path / "work" / "multiple_choice-examples-s0-all"
    rows = lambda path: [json.loads(line)["text"] for line in path.read_text().splitlines()]  # noqa: E731
    files = rows(work / "file.jsonl") + rows(work / "unseen-0.jsonl") + rows(work / "unseen-1.jsonl")
    assert len(set(files)) == 24 and sorted(rows(work / "tuned-e1" / "canonical.jsonl")) == sorted(files)
    out = tmp_path / "groups.json"
    process = run_here("group_level.py", "--controls-only", "--controls", tmp_path / "controls.json", "--json", out)
    assert process.returncode == 0, process.stderr[-3000:]
    untouched, group = json.loads(out.read_text())["measured_groups"]
    assert untouched["group"].startswith("none of 3 tuned, untouched")
    assert group["group"] == "all 3 tuned (multiple_choice, seed 0, 1 epoch(s), the tuned model)"
    assert group["pooled_codec_examples"] == 24 and len(group["file_verdicts"]) == 3


def test_example_board_tunes_a_copy_checks_three_models_and_draws_their_board(tiny_model, tmp_path):
    """The docs' example board at toy size: copies tuned on arc_challenge's rows example by example and in
    their order, one on gsm8k's (no --third), the check of all four on the local copies, the report's board
    and its heat map."""
    work, image, out = tmp_path / "board", tmp_path / "board.png", tmp_path / "board.json"
    process = run_here(
        "example_board.py", "--workdir", work, "--model", tiny_model, "--rows", "6", "--tuned-rows", "8",
        "--epochs", "1", "--shards", "2", "--source-tasks", "arc_challenge,leaderboard_gpqa",
        "--image", image, "--json", out, cwd=tmp_path,
    )  # fmt: skip
    assert process.returncode == 0, process.stderr[-3000:]
    found = json.loads(out.read_text())
    name = Path(tiny_model).name
    models = [name, f"{name}-tuned-arc_challenge", f"{name}-tuned-gsm8k", f"{name}-ordered-arc_challenge"]
    assert sorted(model.rsplit("/", 1)[-1] for model in found["verdict_counts"]) == sorted(models)
    for counts in found["verdict_counts"].values():  # arc_challenge, the 3 GPQA leaves and their group
        assert sum(counts.values()) == 5, counts
    assert len(found["tuned_task"]) == 4 and all(found["tuned_task"].values())
    assert image.read_bytes().startswith(b"\x89PNG") and str(tmp_path) not in found["command"]


def test_example_board_names_a_failed_lm_eval_pdd_command_and_its_stderr(monkeypatch):
    """A failed ``lm-eval-pdd`` subcommand: its command line and the end of its stderr, not a
    CalledProcessError that shows neither."""
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    board = runpy.run_path(str(BENCHMARKS / "example_board.py"))
    with pytest.raises(SystemExit) as stopped:
        board["lm_eval_pdd"]("report", "--out")
    message = str(stopped.value)
    assert f"{Path(sys.executable).with_name('lm-eval-pdd')} report --out\n  exited with status 2; the end" in message
    assert message.endswith("error: argument --out: expected one argument")


def test_group_level_reads_the_shipped_controls_runs_as_its_results_record(monkeypatch):
    """``group_level.py``'s groups of the shipped controls' runs (one tuned of 4; all 4 tuned) are the
    measured groups its results file records."""
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    group_level = runpy.run_path(str(BENCHMARKS / "group_level.py"))
    recorded = json.loads((BENCHMARKS / "results" / "group_level_controls.json").read_text())
    runs = [REPO / path for path in recorded["command"].split("--controls ")[1].split(" --")[0].split()]
    assert [path.name for path in runs] == ["group_level_controls_run.json", "group_level_controls_all_tuned_run.json"]
    groups = [group_level["shipped_untouched_group"]()] + [g for r in runs for g in group_level["controls_groups"](r)]
    assert groups == recorded["measured_groups"]
    assert [g["group"].split(" (")[0] for g in groups] == [
        "none of 3 tuned, untouched", "one of 4 tuned", "none of 3 tuned, the kind seen", "all 4 tuned"
    ]  # fmt: skip


def test_gemma_model_refuses_a_folder_with_files_and_a_missing_gguf(tmp_path):
    (tmp_path / "kept.txt").write_text("a user's file")
    process = run_here("gemma_model.py", "--output", tmp_path, "--gguf", tmp_path / "kept.txt")
    assert process.returncode != 0 and "is not empty; choose another folder or add --force" in process.stderr
    assert (tmp_path / "kept.txt").read_text() == "a user's file"
    process = run_here("gemma_model.py", "--output", tmp_path / "new", "--gguf", tmp_path / "absent.gguf")
    assert process.returncode != 0 and "absent.gguf: no such file." in process.stderr


# ------------------------------------------------------------------ vLLM (its environment, .venv-vllm)


@pytest.mark.vllm_engine
def test_vllm_cost_times_each_capture(tiny_model, tiny_table):
    venv = vllm_venv_or_skip()
    env = {**os.environ, **OFFLINE, "PYTHONPATH": str(REPO), "VLLM_TARGET_DEVICE": "cpu", "VLLM_CPU_KVCACHE_SPACE": "1"}
    env.pop("VIRTUAL_ENV", None)
    args = ["--model", tiny_model, "--freq-table", tiny_table, "--texts", "1", "--repeats", "1", "--no-lists"]
    process = subprocess.run(
        [str(venv / "bin" / "python"), str(BENCHMARKS / "vllm_cost.py"), *map(str, args)],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert process.returncode == 0, process.stderr[-3000:]
    assert ": 1 texts of pdd_wikimia_32 (2 requests), |V| = 1024" in process.stdout
    for name in ("vllm top-20", "vllm exact, on the worker", "vllm exact, arrays", "hf"):
        assert f"\n| {name} | " in process.stdout


@pytest.mark.vllm_engine
def test_vllm_repeat_two_runs_agree_with_each_other_and_with_hf(tmp_path):
    """The default model (a model where a drift shows: issue 34 measured Min-K% moving by 2.6e-4 against HF
    in one run), 8 texts, two vLLM runs: bit-identical, and within 5e-5 of HF (measured: 2.4e-05 at most
    over 40 texts, docs/backends-evidence.md "Repeated runs")."""
    vllm_venv_or_skip()
    out = tmp_path / "repeat.json"
    process = run_here("vllm_repeat.py", "--texts", "8", "--settings", "default", "default", "--json", out)
    assert process.returncode == 0, process.stderr[-3000:]
    first, second = json.loads(out.read_text())["runs"]
    assert set(first["against_hf"]) >= {"loss", "min_k", "min_k_pp", "gap_k", "dcpdd"}
    assert second["against_run_1"] == dict.fromkeys(first["against_hf"], 0.0)
    assert max(first["against_hf"].values()) < 5e-5, first["against_hf"]


@pytest.mark.vllm_engine
def test_vllm_exit_loop_counts_one_bare_run(tiny_model, tmp_path):
    vllm_venv_or_skip()
    out = tmp_path / "runs.json"
    args = ["--runs", "1", "--model", tiny_model, "--keep", tmp_path / "keep", "--json", out]
    process = run_here("vllm_exit_loop.py", *args)
    assert process.returncode == 0, process.stderr[-3000:]
    assert "bare, load 0, parallel 1: 1 runs, " in process.stdout
    (run,) = json.loads(out.read_text())["runs"]  # whether this run died at exit is what the script counts
    assert run["results_written"] and run["engine_exit_patch"], run
    # the exit the patch makes (docs/vllm-exit.md, "An abort at exit"), read from the run's log
    assert run["exit_steps"] == ["client shutdown", "engine processes stopped"], run
    assert "the monitor thread took over the exit in 0" in process.stdout


def test_a_recorded_command_holds_no_folder_of_the_machine_that_ran_it(monkeypatch):
    # results files and the package's contamination_controls.json record their commands through it
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    from _common import recorded_command

    argv = ["--words", "20", "--json", "/tmp/power2/mc.json", "--workdir", "/tmp/xl", "--shapes", "a", "b"]
    argv += ["--package-data", str(REPO / "pdd_tasks" / "data" / "contamination_controls.json")]
    assert recorded_command("contamination_controls.py", argv, leave_out=("--workdir", "--shapes")) == (
        "python benchmarks/contamination_controls.py --words 20 --json mc.json "
        "--package-data pdd_tasks/data/contamination_controls.json"
    )
    shipped = json.dumps(json.loads((REPO / "pdd_tasks" / "data" / "contamination_controls.json").read_text()))
    assert "/tmp/" not in shipped and str(REPO.parent) not in shipped
