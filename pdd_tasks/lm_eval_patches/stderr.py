"""The patch of lm-eval's choice of a metric's standard error (``lm_eval/evaluator_utils.py``,
``stderr_for_metric``, from ``lm_eval/api/metrics.py``): the pdd metrics' own standard errors."""

from __future__ import annotations

import math

from pdd_tasks.lm_eval_patches.core import Patch, register


def _with_pdd_stderrs(stock):
    """Replacement of ``evaluator_utils.stderr_for_metric``: an aggregation that carries its standard
    error (attribute ``stderr``, :func:`pdd_tasks.registry.with_stderr`: the pdd tasks' aggregations)
    gets it, every other one lm-eval's.

    The harness asks for one only when ``bootstrap_iters > 0`` (``bootstrap_iters=0`` turns every stderr
    off, ours included). An undefined standard error (NaN: fewer than 2 texts of a class) is ``N/A``, as
    the harness writes for one it cannot compute."""

    def stderr_for_metric(metric, bootstrap_iters: int):
        stderr = getattr(metric, "stderr", None)
        if stderr is None:
            return stock(metric, bootstrap_iters)
        if bootstrap_iters <= 0:
            return None

        def compute(items):
            value = stderr(items, bootstrap_iters)
            return "N/A" if isinstance(value, float) and math.isnan(value) else value

        return compute

    return stderr_for_metric


def _evaluator_utils():
    import lm_eval.evaluator_utils

    return lm_eval.evaluator_utils


register(
    Patch(
        name="stderr-for-metric",
        purpose=(
            "the results table shows standard errors of the pdd metrics (DeLong for AUC, a stratified "
            "bootstrap of bootstrap_iters draws for TPR at FPR) instead of N/A; lm-eval's own aggregations "
            "keep lm-eval's"
        ),
        changes="evaluator_utils.py: stderr_for_metric (imported there from api/metrics.py)",
        when="always",
        targets=lambda: [(_evaluator_utils(), "stderr_for_metric")],
        replacement=_with_pdd_stderrs,
    ),
)
