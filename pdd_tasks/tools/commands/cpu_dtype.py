"""``lm-eval-pdd cpu-dtype``: the dtype for the model on this CPU (:mod:`pdd_tasks.tools.cpu_dtype`):
``bfloat16`` where it is native (AVX512-BF16/AMX), else ``float32``.

Prints only the dtype on stdout (why, on stderr), so ``dtype=$(lm-eval-pdd cpu-dtype)`` works.
"""

from __future__ import annotations

import argparse
import sys


def add_arguments(parser: argparse.ArgumentParser) -> None:
    pass


def run(args: argparse.Namespace) -> int:
    from pdd_tasks.tools.cpu_dtype import choose_dtype, cpu_flags, describe

    dtype, reason = choose_dtype(cpu_flags())
    print(describe(dtype, reason), file=sys.stderr)
    print(dtype)
    return 0
