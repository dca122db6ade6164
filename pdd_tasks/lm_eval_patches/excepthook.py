"""The patch of Python's ``sys.excepthook`` under lm-eval's command line: a user's mistake
(:class:`~pdd_tasks.errors.UserError`) as its message, without a traceback.

lm-eval's ``lm_eval`` command does not catch the exceptions a task raises while it is loaded or scored,
so a user's mistake would come under a full traceback. Patch ``show-user-errors`` makes
``sys.excepthook`` print it as its message (exit status 1), but only where the running program *is*
lm-eval's command line (:func:`~pdd_tasks.lm_eval_patches.core.running_lm_eval_cli`). It is applied
before the version gate, so that the gate's refusal, too, is a message."""

from __future__ import annotations

import sys

from pdd_tasks.errors import excepthook_showing_user_errors
from pdd_tasks.lm_eval_patches.core import Patch, register, running_lm_eval_cli


#: The excepthook patch (applied first, so that the version gate's refusal, too, is a message).
SHOW_USER_ERRORS = Patch(
    name="show-user-errors",
    purpose=(
        "a user's mistake (UserError) raised while lm_eval loads or scores a pdd task is printed as its "
        "message, exit status 1, instead of under a traceback (LM_EVAL_PDD_TRACEBACK=1 shows it)"
    ),
    changes="Python's sys.excepthook",
    when="only where the running program is lm-eval's command line (running_lm_eval_cli)",
    targets=lambda: [(sys, "excepthook")] if running_lm_eval_cli() else [],
    replacement=excepthook_showing_user_errors,
    package="python",
    before_version_gate=True,
)

register(SHOW_USER_ERRORS)
