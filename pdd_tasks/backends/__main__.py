"""``python -m pdd_tasks.backends ARGS``: lm-eval's own command line (``lm_eval ARGS``) with the pdd
backends registered first, so ``--model hf-pdd`` is a known model name.

The plain ``lm_eval`` command creates the model before it imports any task module
(docs/architecture.md, "Order in an lm_eval run"), so it cannot know a name that only this package
registers; there, ``--model hf`` with a pdd task gets the same per-token capture through the graft
of :func:`pdd_tasks.backends.hf.install_hf_capture`.
"""

import sys

from lm_eval.__main__ import cli_evaluate

import pdd_tasks.backends.hf  # noqa: F401  (registers hf-pdd with lm-eval)


if __name__ == "__main__":
    sys.exit(cli_evaluate())
