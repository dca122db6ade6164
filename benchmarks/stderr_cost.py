"""Cost of the standard errors (and of the blind baseline) against a run's wall time.

    python benchmarks/stderr_cost.py OUTPUT_PATH [--task pdd_wikimia_32] [--repeats 3]

Reads a run made with ``--log_samples`` (e.g. the pdd_wikimia_32 run of docs/report.md) and times, on its
own per-text items, exactly what the harness does after scoring: (a) every metric's aggregation,
(b) every metric's standard error through the hook the harness calls (``stderr_for_metric`` with
the run's ``bootstrap_iters``), the blind baseline's classifier fit counted apart. Each is the
median of ``--repeats`` repetitions (the blind classifier's cache cleared each time). Compared
with the run's ``total_evaluation_time_seconds``. Prints a Markdown table and the load.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from pathlib import Path

from _common import cpu_name

from pdd_tasks import lm_eval_patches
from pdd_tasks.tasks import aggregations
from pdd_tasks.tools.results.runs import find_runs


def items_by_metric(samples: list[dict], metrics: list[str]) -> dict[str, list]:
    return {metric: [tuple(sample[metric]) for sample in samples] for metric in metrics}


def aggregation_of(metric: str):
    """The harness aggregation of a metric name (``dcpdd_auc``, ``blind_tpr@fpr<1%``, ...)."""
    for name, aggregate in aggregations.AGGREGATIONS.items():
        if metric.endswith(f"_{name}"):
            prefix = metric.removesuffix(f"_{name}")
            return aggregations.BLIND_AGGREGATIONS[name] if prefix == aggregations.BLIND else aggregate
    raise KeyError(metric)


def timed(function) -> float:
    start = time.perf_counter()
    function()
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("output_path", type=Path)
    parser.add_argument("--task", default="pdd_wikimia_32")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()

    run = find_runs([args.output_path])[-1]
    samples = run.samples(args.task)
    iters = int(run.results["config"]["bootstrap_iters"])
    wall = float(run.results["total_evaluation_time_seconds"])
    metrics = [key for key in samples[0] if key.endswith("_auc") or "_tpr@fpr<" in key]
    aggregate_of = {metric: aggregation_of(metric) for metric in metrics}
    items = items_by_metric(samples, metrics)
    model_metrics = [m for m in metrics if not m.startswith(aggregations.BLIND + "_")]
    blind_metrics = [m for m in metrics if m.startswith(aggregations.BLIND + "_")]
    lm_eval_patches.apply()
    import lm_eval.evaluator_utils as evaluator_utils

    def aggregate(names):
        for name in names:
            aggregate_of[name](items[name])

    def stderrs(names):
        for name in names:
            evaluator_utils.stderr_for_metric(aggregate_of[name], iters)(items[name])

    rows = []
    for label, function in (
        (f"aggregations, {len(model_metrics)} method metrics", lambda: aggregate(model_metrics)),
        (f"standard errors, {len(model_metrics)} method metrics", lambda: stderrs(model_metrics)),
        (
            "blind baseline: classifier fit (once)",
            lambda: aggregations._blind_items.cache_clear() or aggregate(blind_metrics[:1]),
        ),
        (
            f"blind baseline: {len(blind_metrics)} metrics and stderrs after the fit",
            lambda: (aggregate(blind_metrics), stderrs(blind_metrics)),
        ),
    ):
        times = [timed(function) for _ in range(args.repeats)]
        rows.append((label, statistics.median(times)))
    print(f"{args.task}: {len(samples)} texts, bootstrap_iters {iters}; run wall time {wall:.1f} s ({run.file})")
    print(f"machine: {cpu_name()}, {os.cpu_count()} cores; load average {os.getloadavg()[0]:.1f} (1 min)\n")
    print("| step | seconds (median) | share of the run's wall time |")
    print("|---|---:|---:|")
    for label, seconds in rows:
        print(f"| {label} | {seconds:.2f} | {100 * seconds / wall:.2f}% |")


if __name__ == "__main__":
    main()
