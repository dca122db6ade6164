"""The patch of lm-eval's output writing (``lm_eval/loggers/evaluation_tracker.py``): a results or
samples file that lm-eval could not write under ``--output_path`` (a full disk, a read-only folder) stops
the run with one line and exit status 1, where lm-eval alone logs a warning and exits 0."""

from __future__ import annotations

import sys

from pdd_tasks.errors import UserError
from pdd_tasks.lm_eval_patches.core import Patch, register


class OutputNotSaved(UserError):
    """lm-eval could not write its results or samples file under ``--output_path`` (a full disk, a
    read-only folder); lm-eval itself logs a warning and exits 0 (``loggers/evaluation_tracker.py``)."""


class _SaveFailureLog:
    """Stands in for ``evaluation_tracker.eval_logger`` during one save: forwards every call, and records
    lm-eval's ``Could not save ...`` warning and the ``repr`` of its exception (the ``info`` that follows)."""

    def __init__(self, logger) -> None:
        self.logger, self.failure, self.cause = logger, None, None

    def warning(self, message, *args, **kwargs):
        if str(message).startswith("Could not save"):
            self.failure = str(message)
        return self.logger.warning(message, *args, **{"stacklevel": 2, **kwargs})  # lm-eval's line, not this one

    def info(self, message, *args, **kwargs):
        if self.failure is not None and self.cause is None:
            self.cause = str(message)
        return self.logger.info(message, *args, **{"stacklevel": 2, **kwargs})

    def __getattr__(self, name):
        return getattr(self.logger, name)


def _print_results(results: dict | None) -> None:
    """The results table lm_eval prints after saving (which an :class:`OutputNotSaved` would skip)."""
    if results and isinstance(results.get("results"), dict):
        from lm_eval.utils import make_table

        print(make_table(results))
        if results.get("groups"):
            print(make_table(results, "groups"))


def _failing_on_unsaved_output(stock):
    """Replacement of ``EvaluationTracker.save_results_aggregated`` / ``save_results_samples``: the stock
    method, with the module's logger watched (:class:`_SaveFailureLog`); where lm-eval could not save, the
    results table is printed (lm_eval would print it next) and :class:`OutputNotSaved` names the output
    path, the cause and the fix: exit status 1 under ``lm_eval`` (patch ``show-user-errors``), not 0."""
    module = sys.modules[stock.__module__]

    def save(self, *args, **kwargs):
        log = _SaveFailureLog(module.eval_logger)
        module.eval_logger = log
        try:
            result = stock(self, *args, **kwargs)
        finally:
            module.eval_logger = log.logger
        results = kwargs.get("results", args[0] if args and isinstance(args[0], dict) else None)
        if stock.__name__ == "save_results_aggregated":
            self._pdd_results, self._pdd_results_saved = results, log.failure is None
        if log.failure is None:
            return result
        _print_results(getattr(self, "_pdd_results", None))
        task = kwargs.get("task_name", args[0] if args and isinstance(args[0], str) else None)
        what = (
            f"the samples of {task} (its samples file may be cut: table and report name a cut one)"
            if task
            else "the results"
        )
        saved = " The results JSON was saved." if task and getattr(self, "_pdd_results_saved", False) else ""
        raise OutputNotSaved(
            f"lm_eval --output_path {self.output_path}: lm-eval could not save {what}: {log.cause or log.failure} "
            f"(lm-eval alone would exit 0 with a warning).{saved} The results are printed above. Free space on that "
            "disk or give --output_path a folder you can write to, then run again."
        )

    return save


def _evaluation_tracker() -> list[type]:
    import lm_eval.loggers.evaluation_tracker

    return [lm_eval.loggers.evaluation_tracker.EvaluationTracker]


register(
    Patch(
        name="output-save-failures",
        purpose=(
            "lm_eval --output_path on a full disk or a read-only folder: lm-eval logs 'Could not save results "
            "aggregated' (or '... sample results') and exits 0, a samples file cut; with this patch the run "
            "prints its results table and stops with OutputNotSaved (path, cause, fix), exit status 1"
        ),
        changes=(
            "loggers/evaluation_tracker.py: EvaluationTracker.save_results_aggregated, "
            "EvaluationTracker.save_results_samples (their module's eval_logger watched during the call)"
        ),
        when="always",
        targets=lambda: [
            (cls, name) for cls in _evaluation_tracker() for name in ("save_results_aggregated", "save_results_samples")
        ],
        replacement=_failing_on_unsaved_output,
    ),
)
