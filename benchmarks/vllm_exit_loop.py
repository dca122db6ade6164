"""How often a vLLM process dies at exit (issue 32, item 8): the same command N times, each exit status counted.

    .venv/bin/python benchmarks/vllm_exit_loop.py --runs 20 [--command bare|lm_eval|tier] [--stock] [--exact] [--load 2]
        [--parallel 1] [--model DIR] [--json out.json] [--until-failure]

The vLLM tier (``tests/backends/test_vllm_engine.py``) once died in about ten runs: every vLLM process of one
pytest session printed its results, then died at exit with SIGABRT ("terminate called without an
active exception"). This script runs, ``--runs`` times, the smallest commands that go through the
same teardown, with the tests' environment (``.venv-vllm``, vLLM's CPU engine, ``enforce_eager``,
offline, this checkout first on the path):

- ``bare``: ``vllm.LLM`` on the tiny GPT-2 of the tests, one scored prompt, results printed, then the
  interpreter exits (the layout of ``test_vllm_engine.py``'s worker script); ``pdd_tasks.lm_eval_patches.apply()``
  is called after the engine is made, as there (``--stock``: not called, vLLM's own exit only);
- ``lm_eval``: ``.venv-vllm/bin/lm_eval --model vllm`` on the same model, ``pdd_wikimia_32 --limit 4``
  (``--stock``: the stock task of the tests instead, so that the plugin never loads; ``--exact``: the
  engine and task settings of ``vllm_repeat.py``: ``max_logprobs=-1``, the worker extension, ``exact_mu_sigma``).

Prints a line per run (exit status, the signal if one killed it, whether the results were written
first, whether "terminate called" is in its stderr, wall time, and, for ``bare`` and ``lm_eval``, the
steps of vLLM's exit its log shows, in order: ``client`` for the client's shutdown in the main thread,
``engines`` for the engine processes' SIGTERM, ``monitor`` for the liveness monitor taking their end for
a crash, the path that aborts: docs/vllm-exit.md, "An abort at exit") and the counts. ``--load K`` keeps K
busy-looping processes running meanwhile (the failing session ran beside other test runs on 2 cores);
``--parallel P`` runs P commands at a time. Each run gets ``PYTHONFAULTHANDLER=1`` and a core-size
limit of 0 (``--cores``: unlimited, so that a core can be read with gdb); the stderr of every run
that did not exit 0 is kept under ``--keep`` (default: a temporary folder, named at the end).

``--model`` defaults to a tiny GPT-2 built as the tests' ``tiny_model`` (``tests/support/models.py``) (WikiMIA BPE).
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import resource
import signal
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from _common import add_json_option, busy_loops, refuse_existing_json
from vllm_repeat import ENGINE as REPEAT_ENGINE


REPO = Path(__file__).resolve().parent.parent
VENV = REPO / ".venv-vllm"

#: The tests' settings of the CPU engine (tests/backends/test_vllm_engine.py: VLLM_CPU_ENV) and of every process.
ENV = {
    "VLLM_TARGET_DEVICE": "cpu",
    "VLLM_CPU_KVCACHE_SPACE": "1",
    "HF_HUB_OFFLINE": "1",
    "HF_DATASETS_OFFLINE": "1",
    "TOKENIZERS_PARALLELISM": "false",
    "PYTHONFAULTHANDLER": "1",
}

#: The printout's word for each exit step (tests/support/vllm.py: EXIT_STEPS).
STEP_WORDS = {"client shutdown": "client", "engine processes stopped": "engines", "monitor took over": "monitor"}

#: ``bare``: one engine, one scored prompt, the result printed, then exit (argv: model, "stock" or "").
BARE_SCRIPT = """
import sys
from vllm import LLM, SamplingParams
from vllm.inputs import TokensPrompt

if __name__ == "__main__":
    llm = LLM(model=sys.argv[1], dtype="float32", enforce_eager=True, max_model_len=256)
    if sys.argv[2] != "stock":
        from pdd_tasks import lm_eval_patches
        lm_eval_patches.apply()
        print("APPLIED", lm_eval_patches.applied(), flush=True)
    params = SamplingParams(temperature=0, max_tokens=1, prompt_logprobs=1, detokenize=False)
    output = llm.generate([TokensPrompt(prompt_token_ids=[0, 17, 402, 9, 33, 250, 7])], params, use_tqdm=False)
    print("RESULT", len(output[0].prompt_logprobs), flush=True)
"""

#: ``lm_eval --stock``: a stock multiple-choice task on a local file (tests/support/standard_tasks.py's STOCK_TASK).
STOCK_TASK = """task: local_choice
dataset_path: json
dataset_kwargs:
  data_files:
    test: {data}
output_type: multiple_choice
test_split: test
doc_to_text: "{{{{question}}}}"
doc_to_choice: "{{{{choices}}}}"
doc_to_target: answer
metric_list:
  - metric: acc
metadata:
  version: 1.0
"""


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--command", choices=("bare", "lm_eval", "tier"), default="bare")
    parser.add_argument("--stock", action="store_true", help="vLLM's own exit: the plugin not applied / not loaded")
    parser.add_argument("--exact", action="store_true", help="lm_eval: vllm_repeat.py's engine and task settings")
    parser.add_argument("--load", type=int, default=0, help="busy-looping processes meanwhile")
    parser.add_argument("--parallel", type=int, default=1, help="commands at a time")
    parser.add_argument("--model", type=Path, default=None, help="model directory (default: the tests' tiny GPT-2)")
    parser.add_argument("--cores", action="store_true", help="allow core dumps (ulimit -c unlimited) in each run")
    parser.add_argument("--keep", type=Path, default=None, help="folder for the stderr of failed runs")
    add_json_option(parser, "write every run's record here")
    parser.add_argument("--until-failure", action="store_true", help="stop at the first run that fails")
    args = parser.parse_args()
    refuse_existing_json(args)
    return args


def exit_steps(log: str) -> list[str]:
    """The steps of vLLM's exit in ``log`` (tests/support/vllm.py: exit_steps, the tier's check)."""
    sys.path.insert(0, str(REPO / "tests"))
    from support.vllm import exit_steps as steps

    return steps(log)


def tiny_model(directory: Path) -> Path:
    """The tests' tiny GPT-2 (tests/support/models.py: build_tiny_model), built once in ``directory``."""
    if not (directory / "config.json").exists():
        sys.path.insert(0, str(REPO / "tests"))
        from support.models import build_tiny_model

        build_tiny_model(directory)
    return directory


def frequency_table(model: Path, path: Path) -> Path:
    """DC-PDD's frequency table for ``model``'s tokenizer (tests/support/models.py: build_table_for), built once."""
    if not path.exists():
        sys.path.insert(0, str(REPO / "tests"))
        from support.models import build_table_for

        build_table_for(model, path)
    return path


def command_for(args: argparse.Namespace, model: Path, work: Path) -> tuple[list[str], str]:
    """The command of one run (in ``work``) and the line of its stdout that says it wrote its results."""
    if args.command == "tier":
        python = REPO / ".venv" / "bin" / "python"
        return [
            str(python),
            "-m",
            "pytest",
            "-q",
            "-m",
            "vllm_engine",
            "-p",
            "no:cacheprovider",
            str(REPO / "tests"),
        ], ""
    if args.command == "bare":
        return [str(VENV / "bin" / "python"), "-c", BARE_SCRIPT, str(model), "stock" if args.stock else ""], "RESULT"
    out = work / "out"
    model_args = f"pretrained={model},dtype=float32," + (REPEAT_ENGINE if args.exact else "enforce_eager=True")
    if args.stock:
        tasks_dir = work / "tasks"
        tasks_dir.mkdir(exist_ok=True)
        rows = [
            {"question": f"Question {n}: what is {n} plus {n}?", "choices": [f" {2 * n}", " the end."], "answer": 0}
            for n in range(4)
        ]
        data = tasks_dir / "choice.jsonl"
        data.write_text("".join(json.dumps(row) + "\n" for row in rows))
        (tasks_dir / "local_choice.yaml").write_text(STOCK_TASK.format(data=data))
        include, task = str(tasks_dir), "local_choice"
        metadata = []
    else:
        include, task = str(REPO / "task_configs"), "pdd_wikimia_32"
        table = frequency_table(model, work.parent / "tiny-table.npz")
        metadata = [
            "--metadata",
            json.dumps({"freq_table": str(table)} | ({"exact_mu_sigma": True} if args.exact else {})),
        ]
    command = [
        str(VENV / "bin" / "lm_eval"),
        *("--model", "vllm", "--model_args", model_args, "--include_path", include, "--tasks", task),
        *("--limit", "4", "--batch_size", "auto", "--output_path", str(out), *metadata),
    ]
    return command, "|"  # lm_eval prints its results table after writing the results file


def one_run(number: int, args: argparse.Namespace, model: Path, root: Path) -> dict:
    work = root / f"run{number:03d}"
    work.mkdir(parents=True, exist_ok=True)
    command, written = command_for(args, model, work)
    env = dict(os.environ, **ENV, PYTHONPATH=str(REPO))
    env.pop("VIRTUAL_ENV", None)

    def limits():
        if args.cores:
            resource.setrlimit(resource.RLIMIT_CORE, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))

    if args.command == "tier":  # pytest in the checkout's own environment, as .ci/test runs it
        env = dict(os.environ, HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1", TOKENIZERS_PARALLELISM="false")
    began = time.monotonic()
    finished = subprocess.run(
        command, cwd=work, env=env, capture_output=True, text=True, timeout=1800, preexec_fn=limits
    )
    seconds = time.monotonic() - began
    results = (
        (args.command == "tier" and finished.returncode == 0)
        or any(line.startswith(written) for line in finished.stdout.splitlines())
        or (args.command == "lm_eval" and any((work / "out").rglob("results_*.json")))
    )
    record = {
        "run": number,
        "returncode": finished.returncode,
        "signal": signal.Signals(-finished.returncode).name if finished.returncode < 0 else None,
        "results_written": results,
        "terminate_called": "terminate called" in finished.stderr,
        # bare: whether patch vllm-engine-exit was in effect (the script prints the applied patches)
        "engine_exit_patch": "vllm-engine-exit" in finished.stdout if args.command == "bare" else None,
        "exit_steps": None if args.command == "tier" else exit_steps(finished.stdout + "\n" + finished.stderr),
        "seconds": round(seconds, 1),
    }
    if args.command == "tier":  # pytest's last line: "16 passed, 1 skipped in 284.50s (0:04:44)"
        record["summary"] = (finished.stdout.strip().splitlines() or [""])[-1]
    if finished.returncode != 0:
        (work / "stderr.txt").write_text(finished.stderr)
        (work / "stdout.txt").write_text(finished.stdout)
        record["kept"] = str(work)
    return record


def run_line(record: dict) -> str:
    """One run's line of the printout."""
    patch = {True: "yes", False: "no", None: "-"}[record["engine_exit_patch"]]
    return (
        f"run {record['run']:3d}: exit {record['returncode']:4d} {record['signal'] or '':8s} "
        f"results {'yes' if record['results_written'] else 'no ':3s} "
        f"terminate-called {'yes' if record['terminate_called'] else 'no ':3s} "
        f"vllm-engine-exit {patch:3s} {record['seconds']:6.1f} s"
        + (f"  exit: {' > '.join(STEP_WORDS[step] for step in record['exit_steps'])}" if record["exit_steps"] else "")
        + (f"  [{record['summary']}]" if "summary" in record else "")
    )


def main() -> None:
    args = parse_args()
    if not (VENV / "bin" / "python").exists():
        raise SystemExit(f"{VENV} not found: build vLLM's environment first (.ci/install-vllm).")
    root = args.keep or Path(tempfile.mkdtemp(prefix="vllm-exit-loop-"))
    root.mkdir(parents=True, exist_ok=True)
    model = args.model or (REPO if args.command == "tier" else tiny_model(root / "tiny-gpt2"))
    if args.command == "lm_eval" and not args.stock:
        frequency_table(model, root / "tiny-table.npz")  # once, before the runs (command_for names it)
    label = f"{args.command}{' --stock' if args.stock else ''}, load {args.load}, parallel {args.parallel}"
    records = []
    with busy_loops(args.load), ThreadPoolExecutor(args.parallel) as pool:
        numbers = iter(range(1, args.runs + 1))
        # submitted in waves of --parallel, so that --until-failure stops before the next wave
        while wave := [pool.submit(one_run, n, args, model, root) for n in itertools.islice(numbers, args.parallel)]:
            for record in (future.result() for future in wave):
                records.append(record)
                print(run_line(record), flush=True)
            if args.json:  # after every wave: a loop stopped midway keeps what it measured
                args.json.write_text(json.dumps({"command": label, "runs": records}, indent=1))
            if args.until_failure and any(r["returncode"] != 0 for r in records):
                break
    failed = [r for r in records if r["returncode"] != 0]
    aborted = [r for r in records if r["signal"] == "SIGABRT"]
    monitor = [r for r in records if "monitor took over" in (r["exit_steps"] or [])]
    print(
        f"\n{label}: {len(records)} runs, {len(records) - len(failed)} exit 0, {len(aborted)} SIGABRT, "
        f"{len(failed) - len(aborted)} other failures; {sum(r['results_written'] for r in records)} wrote results"
        + ("" if args.command == "tier" else f"; the monitor thread took over the exit in {len(monitor)}")
    )
    if failed:
        print(f"stderr of the failed runs: {root}/run*/stderr.txt")
    if args.json:
        args.json.write_text(json.dumps({"command": label, "runs": records}, indent=1))


if __name__ == "__main__":
    main()
