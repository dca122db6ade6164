"""What the frequency-table commands share (``build-table``, ``merge-tables``, ``estimate-table``,
``inspect-table``, ``install-table``, ``list-tables``).

Each prints the path it wrote on stdout (messages go to stderr) and exits 1 with a message naming the
problem on bad input: loading a tokenizer or a table, the ``--output``/``--install``/``--force``
options and the check before writing (never over an input, a file replaced only with ``--force``),
and writing or installing the table.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from pathlib import Path

from pdd_tasks.tools.outputs import OutputRefused, check_output_file


def err(message: str) -> None:
    print(message, file=sys.stderr)


def load_tokenizer(name_or_path: str):
    from transformers import AutoTokenizer

    with contextlib.redirect_stdout(sys.stderr):
        try:
            return AutoTokenizer.from_pretrained(name_or_path)
        except Exception as exc:
            raise SystemExit(
                f"lm-eval-pdd: cannot load tokenizer {name_or_path!r} ({type(exc).__name__}: {exc}); "
                f"pass a local model directory or a Hub name reachable from this machine"
            ) from None


def failed(command: str, message: str) -> int:
    """Exit status 1 after ``lm-eval-pdd COMMAND: message`` on stderr."""
    err(f"lm-eval-pdd {command}: {message}")
    return 1


def finish(table, output: Path | None, install: bool, force: bool, command: str) -> int:
    from pdd_tasks.freq.tables import install_table

    if output is not None:
        table.save(output)
    if install:
        try:
            cached = install_table(table, force=force)
        except FileExistsError as exc:
            return failed(command, str(exc))
        err(f"installed for tokenizer fingerprint {table.tokenizer_fingerprint[:16]}... at {cached}")
        if output is None:
            output = cached
    print(output)
    return 0


def load_table(path: Path, command: str):
    """The table at ``path``, or None after a message saying why it cannot be read."""
    from pdd_tasks.freq.tables import FrequencyTable, FrequencyTableError

    try:
        return FrequencyTable.load(path)
    except (FileNotFoundError, FrequencyTableError) as exc:
        err(f"lm-eval-pdd {command}: {exc}")
        return None


def add_output(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--output", type=Path, default=None, metavar="TABLE.npz", help="where to write the table")
    parser.add_argument(
        "--install",
        action="store_true",
        help="also install the table in the cache, where the tasks find it for every model with "
        "this tokenizer (see list-tables)",
    )
    parser.add_argument(
        "--force", action="store_true", help="replace an existing --output file, or with --install an installed table"
    )


def need_output(args: argparse.Namespace, command: str, inputs: list[Path] = ()) -> bool:
    """Whether the command may write: an output is given, and it replaces no file unless --force
    (never one of the command's own inputs, which it is still reading)."""
    if args.output is None and not args.install:
        err(f"lm-eval-pdd {command}: pass --output TABLE.npz, --install, or both")
        return False
    if args.output is None:
        return True
    try:
        check_output_file(args.output, force=args.force, inputs=inputs, missing_folder_ok=True)
    except OutputRefused as exc:
        err(f"lm-eval-pdd {command}: {exc}")
        return False
    return True
