"""The example contamination board of the docs: four models checked on the Open LLM Leaderboards' local copies.

Builds the offline copies of every leaf of both leaderboards (lm-eval's own YAMLs, ``--rows`` local rows a leaf in
each dataset's schema: ``tests/support/leaderboard_tasks.py``; the tuned task ``--tuned-task`` with
``--tuned-rows``), then:

1. tunes two copies of the default model on the tuned task's examples as the check renders them (``lm-eval-pdd
   make-ordered``): one example by example (``--exposure examples``: each example its own training text,
   ``--epochs`` passes), one on the task's file in its order (``--exposure ordered``: blocks of 8 consecutive
   examples, ``--ordered-epochs`` passes), a model that has seen the benchmark each way;
2. runs ``lm_eval --tasks pdd_contamination`` with ``source_tasks`` v2's ``leaderboard`` group, ``arc_challenge``
   and ``gsm8k`` (the check alone: the evals' own scores are not what the board shows; ``--source-tasks`` for
   more) for the default model, the two tuned copies and ``--third`` (a model directory: Gemma-3-270M from
   ``benchmarks/gemma_model.py``; without it, a third copy, tuned on ``gsm8k`` example by example);
3. writes ``lm-eval-pdd report`` over the four runs and copies its heat map (``contamination.png``) to
   ``--image``, and prints each model's verdict counts and the tuned task's row.

The models are named by their folders under ``WORKDIR/models`` (the board shows those names).

    python benchmarks/gemma_model.py --output work/example_board/models/gemma-3-270m
    python benchmarks/example_board.py --workdir work/example_board --third work/example_board/models/gemma-3-270m \
        --image docs/img/example-board.png --json benchmarks/results/example_board.json
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import shutil
import sys
import time
from pathlib import Path

from _common import (
    add_json_option,
    machine,
    model_directory,
    recorded_command,
    refuse_existing_json,
    run_checked,
    shard_count,
)


REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))

from support.leaderboard_tasks import FAMILIES, V2, leaderboard_tasks  # noqa: E402

from pdd_tasks.tools.arg_types import epochs, positive_int  # noqa: E402


#: The board's benchmarks: v2's ``leaderboard`` group (its groups ``leaderboard_bbh`` 24, ``_gpqa`` 3, ``_math_hard`` 7,
#: ``_musr`` 3 fold to their leaves), and two v1 tasks, ARC-Challenge (the one tuned on) and GSM8K.
SOURCE_TASKS = ",".join([*V2, "arc_challenge", "gsm8k"])


def lm_eval_pdd(*args: str) -> str:
    """What ``lm-eval-pdd ARGS`` prints on stdout; a failure stops the script with its command line and the
    end of its stderr (:func:`_common.run_checked`)."""
    return run_checked([str(Path(sys.executable).with_name("lm-eval-pdd")), *args]).stdout.strip()


def tuning_file(include: Path, task: str, path: Path) -> Path:
    """The examples of ``task`` as the check renders them, one ``{"text": ...}`` a line."""
    import contextlib

    from lm_eval.tasks import TaskManager

    from pdd_tasks.loading.examples import examples_of_task

    with contextlib.redirect_stdout(sys.stderr):
        (built,) = TaskManager(include_path=str(include)).load([task])["tasks"].values()
    path.write_text("".join(json.dumps({"text": text}) + "\n" for text in examples_of_task(built, task)))
    return path


def tuned_copy(base: Path, include: Path, task: str, rows: int, epochs: int, models: Path, exposure: str = "examples") -> Path:  # fmt: skip
    """The base model tuned on ``task``'s examples (``make-ordered --exposure``: ``examples``, each example its own
    training text; ``ordered``, blocks of 8 consecutive examples in the task's order): ``make-ordered`` writes into
    ``WORKDIR/tuning/<name>`` (reused if there), ``models/<name>`` links its model folder."""
    name = f"{base.name}-{'tuned' if exposure == 'examples' else 'ordered'}-{task}"
    output, link = models.parent / "tuning" / name, models / name
    if not (output / "model" / "config.json").is_file():
        output.parent.mkdir(parents=True, exist_ok=True)
        data = tuning_file(include, task, output.parent / f"{task}-examples.jsonl")
        lm_eval_pdd("make-ordered", "--output", str(output), "--model", str(base), "--data", str(data),
                    "--examples", str(rows), "--exposure", exposure, "--epochs", str(epochs), "--no-progress")  # fmt: skip
    if not link.exists():
        link.symlink_to((output / "model").resolve(), target_is_directory=True)
    return link


def check(model: Path, include: Path, out: Path, metadata: dict, dtype: str) -> float | None:
    """``lm_eval --tasks pdd_contamination`` on the local copies; its wall time (reused if ``out`` has a run)."""
    if list(out.rglob("results_*.json")):
        return None
    command = [
        str(Path(sys.executable).with_name("lm_eval")), "--model", "hf", "--model_args",
        f"pretrained={os.path.relpath(model)},dtype={dtype}", "--device", "cpu", "--include_path", str(include),
        "--tasks", "pdd_contamination", "--batch_size", "8", "--metadata", json.dumps(metadata),
        "--output_path", str(out), "--log_samples",
    ]  # fmt: skip
    start = time.perf_counter()
    run_checked(command, capture=False, stdout=sys.stderr)  # its progress shown as it runs
    return time.perf_counter() - start


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workdir", type=Path, default=Path("work/example_board"))
    parser.add_argument("--source-tasks", default=SOURCE_TASKS, help=f"tasks, groups or tags (default {SOURCE_TASKS})")
    parser.add_argument("--rows", type=positive_int, default=16, help="rows a leaf (default 16)")
    parser.add_argument("--tuned-task", default="arc_challenge", choices=sorted(FAMILIES_BY_TASK))
    parser.add_argument("--tuned-rows", type=positive_int, default=96, help="rows of the tuned task (default 96)")
    parser.add_argument("--epochs", type=epochs, default=3, help="passes of the tuning (default 3)")
    parser.add_argument("--ordered-epochs", type=epochs, default=10, help="passes of the copy tuned in order (default 10)")  # fmt: skip
    parser.add_argument("--shards", type=shard_count, default=8, help="the exchangeability test's shards (default 8)")
    parser.add_argument(
        "--model", type=model_directory, default=None, help="the base model's directory (default: the default model)"
    )
    parser.add_argument("--third", type=model_directory, default=None, help="the third model's directory (default: a copy tuned on gsm8k)")  # fmt: skip
    parser.add_argument("--image", type=Path, default=None, help="copy the board's heat map here")
    add_json_option(parser)
    args = parser.parse_args(argv)
    refuse_existing_json(args)
    work = args.workdir
    include = leaderboard_tasks(work / "tasks", rows=args.rows)
    leaderboard_tasks(include, rows=args.tuned_rows, families={FAMILIES_BY_TASK[args.tuned_task]: FAMILIES[FAMILIES_BY_TASK[args.tuned_task]]})  # fmt: skip
    (include / "pdd_contamination.yaml").write_text(
        f"include: {REPO / 'task_configs/contamination/pdd_contamination.yaml'}\n"
    )
    models = work / "models"
    models.mkdir(parents=True, exist_ok=True)
    base = Path(args.model or lm_eval_pdd("default-model")).resolve()
    default = models / base.name  # the board names each model by its folder here
    if not default.exists():
        default.symlink_to(base, target_is_directory=True)
    tuned = tuned_copy(default, include, args.tuned_task, args.tuned_rows, args.epochs, models)
    third = args.third or tuned_copy(default, include, "gsm8k", args.rows, args.epochs, models)
    ordered = tuned_copy(default, include, args.tuned_task, args.tuned_rows, args.ordered_epochs, models, exposure="ordered")  # fmt: skip
    board_models = (default, tuned, third, ordered)
    dtype = lm_eval_pdd("cpu-dtype")
    metadata = {"source_tasks": args.source_tasks, "source_include_path": str(include.resolve()), "exchangeability": {"num_shards": args.shards}}  # fmt: skip
    seconds = {}
    for model in board_models:
        print(f"checking {model.name} ...", file=sys.stderr, flush=True)
        seconds[model.name] = check(model, include, work / "out" / model.name, metadata, dtype)
    report = work / "report"
    print(lm_eval_pdd("report", *(str(work / "out" / m.name) for m in board_models), "--out", str(report), "--force"), file=sys.stderr)  # fmt: skip
    board = json.loads((report / "contamination.json").read_text())
    verdicts = {model: collections.Counter(row.values()) for model, row in board["matrix"].items()}
    found = {
        "what": "the example contamination board of the docs (issue 42 item 5): four models on the leaderboards' local copies",  # fmt: skip
        "command": recorded_command("example_board.py", sys.argv[1:] if argv is None else argv),
        "machine": machine(f"dtype {dtype}"),
        "rows": {"a leaf": args.rows, args.tuned_task: args.tuned_rows},
        "tuning": {
            "task": args.tuned_task,
            "examples_epochs": args.epochs,
            "ordered_epochs": args.ordered_epochs,
            "ordered_blocks": 8,
        },  # fmt: skip
        "exchangeability_shards": args.shards,
        "check_seconds": {name: None if value is None else round(value, 1) for name, value in seconds.items()},
        "verdict_counts": {model: dict(counts) for model, counts in verdicts.items()},
        "tuned_task": {model: row.get(args.tuned_task) for model, row in board["matrix"].items()},
    }
    print(json.dumps(found, indent=1))
    if args.image:
        shutil.copyfile(report / "contamination.png", args.image)
    if args.json:
        args.json.write_text(json.dumps(found, indent=1) + "\n")
    return 0


#: The task a family's first leaf is (the families of one task: the ones a copy can be tuned on).
FAMILIES_BY_TASK = {"arc_challenge": "arc", "gsm8k": "gsm8k", "hellaswag": "hellaswag", "winogrande": "winogrande"}


if __name__ == "__main__":
    sys.exit(main())
