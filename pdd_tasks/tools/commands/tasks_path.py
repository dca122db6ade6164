"""``lm-eval-pdd tasks-path``: the directory of the installed task configs, for ``lm_eval --include_path``.

Prints only that path on stdout, so ``--include_path $(lm-eval-pdd tasks-path)`` works.
"""

from __future__ import annotations

import argparse

from pdd_tasks.paths import tasks_path


def add_arguments(parser: argparse.ArgumentParser) -> None:
    pass


def run(args: argparse.Namespace) -> int:
    print(tasks_path())
    return 0
