"""The patches of lm-eval's evaluation loop (``lm_eval/evaluator.py``, ``lm_eval/evaluator_utils.py``):
per-text values that need every text added to the logged samples after aggregation, and the run's
tasks shown to ``pdd_contamination`` before evaluation."""

from __future__ import annotations

from pdd_tasks.lm_eval_patches.core import Patch, register


def _annotating_samples(stock):
    """Replacement of ``evaluator_utils._collect_results``: the stock function (every task's metrics
    aggregated), then each task that has ``annotate_logged_samples`` adds to its logged samples the
    per-text values that depend on every text of the run (pdd_custom: PTDI's p-values and decisions)."""

    def _collect_results(eval_results_acc, *args, **kwargs):
        result = stock(eval_results_acc, *args, **kwargs)
        for name, acc in eval_results_acc.items():
            annotate = getattr(acc["task"], "annotate_logged_samples", None)
            if annotate is not None and result.samples.get(name):
                annotate(result.samples[name])
        return result

    return _collect_results


def _showing_tasks_the_run(stock):
    """Replacement of ``evaluator.evaluate``: before the stock function, each task of the run that has
    ``see_run_tasks`` (``pdd_contamination``: :meth:`~pdd_tasks.tasks.dataset_level.ContaminationTask.see_run_tasks`)
    is given the run's leaf tasks and groups (:func:`show_run_tasks`), then the stock function evaluates
    them all, unchanged. ``simple_evaluate`` (and so ``lm_eval``'s command line) calls ``evaluate`` through
    its module, after the tasks are built: a task learns the run's other tasks here, whatever their order
    in ``--tasks``."""

    def evaluate(*args, **kwargs):
        task_dict = kwargs["task_dict"] if "task_dict" in kwargs else args[1] if len(args) > 1 else None
        if isinstance(task_dict, dict):
            show_run_tasks(task_dict)
        return stock(*args, **kwargs)

    return evaluate


def show_run_tasks(task_dict: dict) -> None:
    """Call ``see_run_tasks(tasks, groups)`` of each task of ``task_dict`` (``TaskManager.load``'s result,
    or the legacy nested dict of ``get_task_dict``) that has it: ``tasks`` maps each leaf task's name to
    its task, ``groups`` each group's name to its direct children's names (nested groups kept)."""
    if "tasks" in task_dict:
        groups, tasks = task_dict.get("groups") or {}, task_dict["tasks"]
    else:
        groups, tasks = _evaluator_utils()._handle_back_comp(task_dict)
    group_map = {name: list(group.child_names) for name, group in groups.items()}
    for task in list(tasks.values()):
        see = getattr(task, "see_run_tasks", None)
        if callable(see):
            see(dict(tasks), group_map)


def _evaluator_utils():
    import lm_eval.evaluator_utils

    return lm_eval.evaluator_utils


def _evaluator():
    import lm_eval.evaluator

    return lm_eval.evaluator


register(
    Patch(
        name="samples-after-aggregation",
        purpose=(
            "--log_samples holds per-text values that need every text of the run: pdd_custom's PTDI p-value "
            "and identification per method, EM-MIA's final score (annotate_logged_samples), added after the "
            "metrics are aggregated, "
            "on the process that writes the samples (also in a multi-process run)"
        ),
        changes="evaluator_utils.py: _collect_results (called by _process_results)",
        when="always",
        targets=lambda: [(_evaluator_utils(), "_collect_results")],
        replacement=_annotating_samples,
    ),
    Patch(
        name="run-tasks-to-contamination",
        purpose=(
            "pdd_contamination without source_tasks checks the other tasks of its own run (lm_eval --tasks "
            "arc_easy,gsm8k,pdd_contamination): before evaluating, each task with see_run_tasks is given the run's "
            "leaf tasks and groups (show_run_tasks); the evaluation itself is the stock function's, unchanged"
        ),
        changes="evaluator.py: evaluate (called by simple_evaluate after the tasks are built)",
        when="always",
        targets=lambda: [(_evaluator(), "evaluate")],
        replacement=_showing_tasks_the_run,
    ),
)
