"""Pieces the benchmark scripts share (they run as ``python benchmarks/<script>.py``, so this
directory is on ``sys.path``)."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

from lm_eval.api.instance import Instance

from pdd_tasks.loading.files import read_json, read_jsonl
from pdd_tasks.registry import DEFAULT_METHODS


#: The repository: a recorded command names a path inside it relative to it.
REPO = Path(__file__).resolve().parents[1]


def shown_path(arg: str) -> str:
    """A command's argument as a results file records it: an absolute path relative to the repository
    where it lies inside it, else by its last part (``/tmp/power/mc.json`` -> ``mc.json``): a recorded
    command holds no folder that exists only on the machine that ran it. Any other argument as it is."""
    if not os.path.isabs(arg):
        return arg
    path = Path(arg)
    return str(path.relative_to(REPO)) if path.is_relative_to(REPO) else path.name


def recorded_command(script: str, argv: list[str], leave_out: tuple[str, ...] = ()) -> str:
    """``python benchmarks/<script> ARGS`` as a results file records it: the options of ``leave_out``
    dropped with their values (every argument up to the next option), each path :func:`shown_path`."""
    shown, skip = [], False
    for arg in argv:
        if arg.startswith("--"):
            skip = arg in leave_out
        if not skip:
            shown.append(shown_path(arg))
    return " ".join(["python", f"benchmarks/{script}", *shown])


def cpu_name() -> str:
    """The processor's model name from /proc/cpuinfo, else what ``platform`` knows."""
    try:
        with open("/proc/cpuinfo") as info:
            for line in info:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def machine(*details: str) -> str:
    """One line naming the machine a benchmark ran on: CPU, cores, Python, and ``details``
    (library versions, threads)."""
    return ", ".join([cpu_name(), f"{os.cpu_count()} cores", f"Python {platform.python_version()}", *details])


def lm_eval_run(
    model: Path | str,
    task: str,
    out: Path,
    *,
    metadata: dict | None = None,
    limit: int | None = None,
    batch_size: int = 8,
    log_samples: bool = False,
    env: dict[str, str] | None = None,
    include: Path | str | None = None,
    device: str = "cpu",
) -> tuple[float, dict]:
    """One run of the real ``lm_eval`` command (HF backend, float32, on ``device``) on the pdd tasks (or
    the tasks under ``include``): its wall time in seconds and its results JSON. A failed run stops the
    script with its command line and the end of its stderr (:func:`run_checked`)."""
    from pdd_tasks.paths import tasks_path

    command = [
        str(Path(sys.executable).with_name("lm_eval")),
        *("--model", "hf", "--model_args", f"pretrained={model},dtype=float32", "--device", device),
        *("--include_path", str(include or tasks_path()), "--tasks", task, "--batch_size", str(batch_size)),
        *(["--limit", str(limit)] if limit else []),
        *(["--metadata", json.dumps(metadata)] if metadata else []),
        *("--output_path", str(out)),
        *(["--log_samples"] if log_samples else []),
    ]
    env = dict(os.environ, HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1", TOKENIZERS_PARALLELISM="false", **(env or {}))
    began = time.perf_counter()
    run_checked(command, env=env)
    seconds = time.perf_counter() - began
    return seconds, read_json(sorted(Path(out).rglob("results_*.json"))[-1])


#: The most characters of a failed command's line a message shows (a child's JSON config can be long).
SHOWN_COMMAND_CHARS = 400

#: The last lines of a failed command's stderr a message shows.
SHOWN_STDERR_LINES = 20


def failure_message(command: list[str], returncode: int, stderr: str | None) -> str:
    """What a script says when ``command`` failed: its command line (shell-quoted; one longer than
    :data:`SHOWN_COMMAND_CHARS` cut in its middle), how it ended (its exit status, or the signal that
    killed it), then the last :data:`SHOWN_STDERR_LINES` lines of ``stderr``, or where its stderr was not
    captured (``None``), that its messages are above."""
    line = shlex.join(map(str, command))
    if len(line) > SHOWN_COMMAND_CHARS:
        half = SHOWN_COMMAND_CHARS // 2
        line = f"{line[:half]} ... {line[-half:]}"
    ended = (
        f"was killed by {signal.Signals(-returncode).name}" if returncode < 0 else f"exited with status {returncode}"
    )
    if stderr is None:
        return f"{line}\n  {ended}; its messages are above."
    tail = stderr.rstrip().splitlines()[-SHOWN_STDERR_LINES:]
    if not tail:
        return f"{line}\n  {ended}, writing nothing to stderr."
    return f"{line}\n  {ended}; the end of its stderr:\n" + "\n".join(f"    {text}" for text in tail)


def run_checked(command: list[str], *, capture: bool = True, **kwargs) -> subprocess.CompletedProcess:
    """``subprocess.run(command, **kwargs)``, its stdout and stderr captured as text (``capture``; else
    they go where ``kwargs`` send them). Where the command fails, the script stops (``SystemExit``) with
    :func:`failure_message`: the command line, its exit status and the end of its stderr, one error in
    place of a ``CalledProcessError`` that shows none of it."""
    if capture:
        kwargs |= {"capture_output": True, "text": True}
    process = subprocess.run(command, **kwargs)
    if process.returncode != 0:
        raise SystemExit(failure_message(command, process.returncode, process.stderr if capture else None))
    return process


def child_result(script: str | Path, config: dict) -> dict:
    """``python SCRIPT --child CONFIG`` in a fresh process (its own peak memory, its own imports): the
    JSON object on the last line of its stdout. ``script`` is the calling script's own path (its
    ``__file__``: here that would be this module), ``config`` its ``--child`` argument as JSON. A child
    that fails stops the script with :func:`run_checked`'s message."""
    process = run_checked([sys.executable, str(script), "--child", json.dumps(config)])
    lines = process.stdout.strip().splitlines()
    if not lines:
        raise SystemExit(f"{Path(script).name} --child printed nothing: expected its result as a JSON line.")
    return json.loads(lines[-1])


@contextlib.contextmanager
def busy_loops(count: int):
    """``count`` busy-looping processes running meanwhile (load beside a measured command)."""
    loops = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(count)]
    try:
        yield
    finally:
        for loop in loops:
            loop.terminate()
            loop.wait()


def add_json_option(parser: argparse.ArgumentParser, help: str = "write every number here") -> None:
    """``--json FILE`` and ``--force``: a benchmark replaces an existing file only when told to
    (check it with :func:`refuse_existing_json` before any work)."""
    parser.add_argument("--json", type=Path, default=None, help=f"{help} (an existing file needs --force)")
    parser.add_argument("--force", action="store_true", help="replace --json's file if it exists")


def refuse_existing_json(args: argparse.Namespace) -> None:
    """Stop with a message, before any work, where ``--json`` names an existing file and ``--force`` is
    not given."""
    if args.json is not None and args.json.exists() and not args.force:
        raise SystemExit(f"--json {args.json} exists; choose another file or add --force to replace it.")


def model_directory(text: str) -> Path:
    """An ``argparse`` type: a directory holding a Hugging Face model (its ``config.json``), refused with a
    message before any work where there is none."""
    if not (Path(text) / "config.json").is_file():
        raise argparse.ArgumentTypeError(
            f"no model at {text} (no config.json there); give a Hugging Face model's folder"
        )
    return Path(text)


def shard_count(text: str) -> int:
    """An ``argparse`` type: the exchangeability test's shards, a whole number >= 2 (its t-test needs two)."""
    from pdd_tasks.tools.arg_types import positive_int

    value = positive_int(text)
    if value < 2:
        raise argparse.ArgumentTypeError(f"expected at least 2 shards (the t-test needs two), got {text}")
    return value


def timing_parser(doc: str, texts: int) -> argparse.ArgumentParser:
    """The options of a benchmark that times the pdd path on a task's first texts: --task, --texts
    (default ``texts``), --batch-size and --repeats; ``doc``, the script's docstring, is its help."""
    parser = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--task", default="pdd_wikimia_64")
    parser.add_argument("--texts", type=int, default=texts)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=3)
    return parser


def load_tasks(name: str, metadata: dict | None = None) -> dict:
    """The tasks ``lm_eval --include_path $(lm-eval-pdd tasks-path) --tasks name`` loads (a group: each of
    its tasks), by name; a name that is no task: a message naming the listing command, not lm-eval's traceback."""
    from lm_eval.tasks import TaskManager

    from pdd_tasks.paths import tasks_path

    manager = TaskManager(include_path=tasks_path(), metadata=metadata)
    if not manager.match_tasks([name]):
        raise SystemExit(
            f"--task {name}: no task or group of that name; "
            '`lm_eval ls tasks --include_path "$(lm-eval-pdd tasks-path)"` lists them.'
        )
    return manager.load(name)["tasks"]


def load_task(name: str, metadata: dict | None = None):
    """The one task ``name`` (:func:`load_tasks`); a group's name: a message listing its tasks."""
    tasks = load_tasks(name, metadata)
    if name not in tasks:
        raise SystemExit(f"--task {name} is a group: give one of its tasks ({', '.join(sorted(tasks))}).")
    return tasks[name]


def pdd_and_stock_requests(task, docs: list[dict], task_name: str) -> tuple[list, list[Instance]]:
    """The pdd task's per-token requests for ``docs`` and the same requests as plain stock
    loglikelihood ``Instance``s (what any other harness task would send)."""
    pdd_requests = [
        request
        for doc_id, doc in enumerate(docs)
        for request in task.construct_requests(doc, "", metadata=(task_name, doc_id, 1))
    ]
    stock_requests = [
        Instance("loglikelihood", r.doc, r.arguments, r.idx, metadata=(r.task_name, r.doc_id, 1)) for r in pdd_requests
    ]
    return pdd_requests, stock_requests


def answer_and_score(lm, task, docs: list[dict], pdd_requests: list) -> list:
    """The pdd path as a run takes it: ``lm`` answers the per-token requests, then the task scores
    each document (``process_results``, every method). Returns the answers."""
    answers = lm.loglikelihood(pdd_requests, disable_tqdm=True)
    per_doc = len(answers) // len(docs)
    for i, doc in enumerate(docs):
        task.process_results(doc, answers[i * per_doc : (i + 1) * per_doc])
    return answers


def read_run(out: Path, task: str) -> tuple[dict[str, dict[int, float]], dict]:
    """Per-document scores of every method (``{method: {doc_id: score}}``, from ``--log_samples``)
    and the whole results JSON of the newest ``lm_eval`` run of ``task`` under ``out``."""
    samples = read_jsonl(sorted(out.rglob(f"samples_{task}_*.jsonl"))[-1])
    results = read_json(sorted(out.rglob("results_*.json"))[-1])
    return {m: {s["doc_id"]: s[f"{m}_auc"][0] for s in samples} for m in DEFAULT_METHODS}, results
