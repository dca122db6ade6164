"""Errors a user can fix, and how a command line shows them.

A :class:`UserError` says what was wrong, what was expected and the fix; its traceback is noise to
the user. A command line shows it as one message, ``error: <ErrorType>: <message>``, and exits with
status 1 (:func:`user_error_message`); ``LM_EVAL_PDD_TRACEBACK=1`` shows the traceback too
(:func:`traceback_wanted`). Every other exception keeps its full traceback.

Where that happens: ``lm-eval-pdd`` (:func:`pdd_tasks.tools.cli.main`) and
``python -m pdd_tasks.lm_eval_patches`` catch a :class:`UserError` themselves
(:func:`run_reporting_user_errors`). lm-eval's own ``lm_eval``
command does not catch the exceptions a task raises while it is loaded or scored, so there
:func:`pdd_tasks.lm_eval_patches.apply` sets :func:`excepthook_showing_user_errors` as
``sys.excepthook``, in that program only (see that module). This module changes no global state.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable


class UserError(ValueError):
    """A mistake in the user's input (a file, a setting, an argument); the message names the fix."""


class SettingError(UserError):
    """A task setting (a metadata key) with a wrong value, or a key that is no setting (a typo)."""


def traceback_wanted() -> bool:
    """Whether the user asked for the traceback of a :class:`UserError` (``LM_EVAL_PDD_TRACEBACK=1``)."""
    return os.environ.get("LM_EVAL_PDD_TRACEBACK", "") not in ("", "0")


def user_error_message(error: BaseException) -> str:
    """How a command line shows a :class:`UserError`: its type and message, and how to see more."""
    return f"\nerror: {type(error).__name__}: {error}\n(set LM_EVAL_PDD_TRACEBACK=1 to see the traceback)"


def report_user_error(error: UserError) -> int:
    """Print ``error`` as :func:`user_error_message` on stderr and return the exit status, 1."""
    print(user_error_message(error), file=sys.stderr)
    return 1


def excepthook_showing_user_errors(previous):
    """A ``sys.excepthook`` that prints an uncaught :class:`UserError` as its message alone (unless
    :func:`traceback_wanted`) and hands every other exception to ``previous``."""

    def hook(kind, error, traceback):
        if isinstance(error, UserError) and not traceback_wanted():
            report_user_error(error)
            return
        previous(kind, error, traceback)

    hook.__wrapped__ = previous
    return hook


def run_reporting_user_errors(main: Callable[[], int | None]) -> int:
    """Run a command line's ``main`` and return its exit status; a :class:`UserError` it raises is
    printed as :func:`user_error_message` (status 1), or re-raised if :func:`traceback_wanted`."""
    try:
        return main() or 0
    except UserError as error:
        if traceback_wanted():
            raise
        return report_user_error(error)


#: The most characters of a user's data (a value, a list of field names) a message embeds.
EXCERPT_CHARS = 120


def excerpt(value: object, limit: int = EXCERPT_CHARS) -> str:
    """``repr(value)`` for a message, cut to ``limit`` characters with what was left out: a message
    never embeds an unbounded piece of the user's data (a column of 776 texts, a 100 kB text).

    >>> excerpt("short")
    "'short'"
    >>> excerpt(list(range(1000)), limit=20)
    '[0, 1, 2, 3, 4, 5, 6... (4890 characters in all)'
    """
    text = repr(value)
    if len(text) <= limit:
        return text
    return f"{text[:limit]}... ({len(text)} characters in all)"
