"""Errors a user can fix, and how the command line shows them.

A :class:`UserError` says what was wrong, what was expected and the fix; its traceback is noise to
the user. ``lm_eval`` does not catch the exceptions a task raises while it is loaded (or scored), so
:func:`install_excepthook` (called when the pdd task classes are imported) makes an uncaught
:class:`UserError` print as one line, ``<ErrorType>: <message>``, and exit with status 1. Every
other exception keeps its full traceback; ``LM_EVAL_PDD_TRACEBACK=1`` shows the traceback of a
:class:`UserError` too.
"""

from __future__ import annotations

import os
import sys


class UserError(ValueError):
    """A mistake in the user's input (a file, a setting, an argument); the message names the fix."""


def _show_user_errors(previous):
    def hook(kind, error, traceback):
        if isinstance(error, UserError) and os.environ.get("LM_EVAL_PDD_TRACEBACK", "") in ("", "0"):
            print(
                f"\nerror: {kind.__name__}: {error}\n(set LM_EVAL_PDD_TRACEBACK=1 to see the traceback)",
                file=sys.stderr,
            )
            return
        previous(kind, error, traceback)

    hook._pdd_user_errors = True
    return hook


def install_excepthook() -> None:
    """Show an uncaught :class:`UserError` as its message alone (idempotent)."""
    if not getattr(sys.excepthook, "_pdd_user_errors", False):
        sys.excepthook = _show_user_errors(sys.excepthook)
