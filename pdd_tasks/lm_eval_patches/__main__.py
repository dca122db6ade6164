"""``python -m pdd_tasks.lm_eval_patches ARGS``: lm-eval's own command line (``lm_eval ARGS``) with the
patches applied and the pdd backends registered first, so ``--model hf-pdd`` is a known model name.

The plain ``lm_eval`` command creates the model before it imports any task module
(docs/architecture.md, "Order in an lm_eval run"), so it cannot know a name that only this package
registers; there, ``--model hf`` with a pdd task gets the same per-token capture from patch
``hf-loglikelihood`` of :mod:`pdd_tasks.lm_eval_patches`. Here the patches are applied before lm-eval
starts, and a user's mistake (``UserError``) is shown as its message with exit status 1
(:func:`pdd_tasks.errors.run_reporting_user_errors`; no excepthook is set).

It lives in the patches package, not in :mod:`pdd_tasks.backends` (the layer below, which imports
nothing of the patches), because what it does first is :func:`pdd_tasks.lm_eval_patches.apply`.
"""

import sys

from lm_eval.__main__ import cli_evaluate

from pdd_tasks import lm_eval_patches  # imports pdd_tasks.backends.hf, which registers hf-pdd
from pdd_tasks.errors import run_reporting_user_errors


def main() -> int:
    """Apply the lm-eval patches, then run lm-eval's command line; returns the exit status."""

    def run() -> None:
        lm_eval_patches.apply()
        cli_evaluate()

    return run_reporting_user_errors(run)


if __name__ == "__main__":
    sys.exit(main())
