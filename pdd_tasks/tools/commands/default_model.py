"""``lm-eval-pdd default-model [--path DIR]``: convert the embedded SmolLM2-135M-Instruct once
(:mod:`pdd_tasks.tools.default_model`) and print its directory.

Prints only that path on stdout (the conversion's messages go to stderr), so
``pretrained=$(lm-eval-pdd default-model)`` works.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from pathlib import Path


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--path",
        type=Path,
        default=None,
        help="directory for the converted model (default: $LM_EVAL_PDD_HOME/models/... or "
        "${XDG_CACHE_HOME:-~/.cache}/lm_eval_pdd/models/SmolLM2-135M-Instruct)",
    )


def run(args: argparse.Namespace) -> int:
    from pdd_tasks.tools.default_model import DefaultModelError, ensure_default_model

    try:
        with contextlib.redirect_stdout(sys.stderr):
            path = ensure_default_model(args.path)
    except DefaultModelError as exc:
        print(f"lm-eval-pdd default-model: {exc}", file=sys.stderr)
        return 1
    print(path)
    return 0
