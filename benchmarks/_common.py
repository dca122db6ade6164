"""Pieces the benchmark scripts share (they run as ``python benchmarks/<script>.py``, so this
directory is on ``sys.path``)."""

from __future__ import annotations

import platform

from lm_eval.api.instance import Instance


def cpu_name() -> str:
    """The processor's model name from /proc/cpuinfo, else what ``platform`` knows."""
    try:
        with open("/proc/cpuinfo") as info:
            for line in info:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def pdd_and_stock_requests(task, docs: list[dict], task_name: str) -> tuple[list, list[Instance]]:
    """The pdd task's per-token requests for ``docs`` and the same requests as plain stock
    loglikelihood ``Instance``s (what any other harness task would send)."""
    pdd_requests = [
        request
        for doc_id, doc in enumerate(docs)
        for request in task.construct_requests(doc, "", metadata=(task_name, doc_id, 1))
    ]
    stock_requests = [
        Instance("loglikelihood", r.doc, r.arguments, r.idx, metadata=(r.task_name, r.doc_id, 1)) for r in pdd_requests
    ]
    return pdd_requests, stock_requests
