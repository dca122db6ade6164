"""Argument types of the ``lm-eval-pdd`` commands: one vocabulary for numbers on a command line.

Each is an ``argparse`` ``type=`` function: a value out of range raises
:class:`argparse.ArgumentTypeError`, so argparse prints ``usage`` and one line naming the option,
the value and what is expected, and exits with status 2, before any work starts. A negative count,
a rate outside its interval, NaN or infinity never reaches the code (a negative
``--bootstrap-iters`` would give NaN standard errors).
"""

from __future__ import annotations

import argparse
import math


__all__ = ["bootstrap_iters", "epochs", "non_negative_int", "positive_float", "positive_int", "random_seed"]


def _int(text: str, expected: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected {expected}, got {text!r}") from None


def positive_int(text: str) -> int:
    """A whole number >= 1 (a count of texts, steps, documents)."""
    value = _int(text, "a whole number >= 1")
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 1, got {text}")
    return value


#: The most epochs a fine-tuning accepts (``--epochs``; :mod:`pdd_tasks.tools.builders.fine_tuning`
#: checks it too): the controls are made with 1 to 3 (their power curves stop at 3); a thousand passes
#: over any file is no control of anything a pretraining corpus does, only hours of compute.
MAX_EPOCHS = 1000


def epochs(text: str) -> int:
    """Epochs of a fine-tuning: a whole number from 1 to :data:`MAX_EPOCHS`."""
    value = positive_int(text)
    if value > MAX_EPOCHS:
        raise argparse.ArgumentTypeError(
            f"expected at most {MAX_EPOCHS:,} epochs (the controls use 1 to 3), got {text}"
        )
    return value


def non_negative_int(text: str) -> int:
    """A whole number >= 0 (an index, a count where 0 means none)."""
    value = _int(text, "a whole number >= 0")
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 0, got {text}")
    return value


def random_seed(text: str) -> int:
    """A random seed: a whole number from 0 to 2**32 - 1 (what NumPy's and PyTorch's generators take)."""
    value = _int(text, "a seed, a whole number >= 0")
    if not 0 <= value < 2**32:
        raise argparse.ArgumentTypeError(f"expected a seed from 0 to {2**32 - 1}, got {text}")
    return value


def positive_float(text: str) -> float:
    """A finite number > 0 (a learning rate, a corpus size)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number > 0, got {text!r}") from None
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"expected a finite number > 0, got {text}")
    return value


def bootstrap_iters(text: str) -> int:
    """Bootstrap draws: 0 (no bootstrap: no standard errors, as ``lm_eval``'s ``bootstrap_iters=0``)
    or at least 2 (a standard deviation needs two draws)."""
    value = _int(text, "a number of draws, 0 or >= 2")
    if value < 0 or value == 1:
        raise argparse.ArgumentTypeError(
            f"expected 0 (no standard errors) or a number of draws >= 2 (e.g. 10000), got {text}"
        )
    return value
