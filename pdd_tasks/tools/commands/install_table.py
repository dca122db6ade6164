"""``lm-eval-pdd install-table``: install a table in the cache, where the tasks find it for every
model with its tokenizer.

    lm-eval-pdd install-table X.npz [--force]
"""

from __future__ import annotations

import argparse
from pathlib import Path

from pdd_tasks.tools.commands._tables import finish, load_table


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("table", type=Path, metavar="TABLE.npz")
    parser.add_argument("--force", action="store_true", help="replace a table already installed for this tokenizer")


def run(args: argparse.Namespace) -> int:
    table = load_table(args.table, "install-table")
    if table is None:
        return 1
    return finish(table, None, True, args.force, "install-table")
