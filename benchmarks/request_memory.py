"""Bytes one request holds in memory once lm-eval has built it: the floor behind the request ceiling
that no ``max_requests`` lifts (issue 43, item 1; ``BYTES_PER_REQUEST`` in
``pdd_tasks/registry/settings.py``).

    python benchmarks/request_memory.py [--requests 200000]

lm-eval builds every request of a run (``Task.build_all_requests``) before the first forward pass,
and keeps them until the run ends. This builds about ``--requests`` requests of two real tasks with
texts of one word each, so that what is measured is the request itself (lm-eval's ``Instance``, its
arguments, the task's list of them) rather than its text:

- ``pdd_exchangeability``: 2 shards of 2 one-word examples, ``permutations`` orders of each (one
  ``loglikelihood`` request per order, each with its own joined string);
- ``pdd_custom`` with PAC on: one-word texts, ``pac_augmentations`` copies of each (the per-token
  requests of the membership tasks; DC-PDD and the other methods that need a table are off).

Each is measured with ``tracemalloc`` (the memory the build allocated and still holds, divided by
the number of requests) and prints a markdown table naming the machine. A real text costs more
(its string, and its tokens once the backend encodes it): this is the floor.
"""

from __future__ import annotations

import argparse
import gc
import json
import tempfile
import tracemalloc
from pathlib import Path

from _common import machine

from pdd_tasks.registry import BYTES_PER_REQUEST, request_ceiling


REPO = Path(__file__).resolve().parents[1]
WORDS = ("apple", "river", "stone", "cloud")


def build_task(test: str, metadata: dict):
    """The task ``pdd_<test>`` as the harness builds it from its YAML in this checkout."""
    from lm_eval.tasks._yaml_loader import load_yaml

    config = load_yaml(REPO / "task_configs" / test / f"pdd_{test}.yaml", resolve_func=True)
    return config["class"](config={**config, "metadata": metadata})


def held_per_request(task) -> tuple[int, float]:
    """(requests built, bytes the build still holds per request) of ``task.build_all_requests()``."""
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    task.build_all_requests(rank=0, world_size=1)
    gc.collect()
    held = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()
    return len(task.instances), held / len(task.instances)


def exchangeability(requests: int, folder: Path):
    data = folder / "words.jsonl"
    data.write_text("".join(json.dumps({"text": word}) + "\n" for word in WORDS))
    permutations = max(1, requests // 2 - 1)
    return build_task(
        "exchangeability",
        {"data_files": str(data), "num_shards": 2, "permutations": permutations, "max_requests": requests + 2},
    )


def membership(requests: int, folder: Path):
    texts = max(2, requests // 1002)  # both classes
    data = folder / "texts.jsonl"
    data.write_text("".join(json.dumps({"text": f"{WORDS[i % 4]}{i}", "label": i % 2}) + "\n" for i in range(texts)))
    metadata = {"data_files": str(data), "pac": True, "pac_augmentations": 1000, "max_requests": requests * 2}
    return build_task("custom", metadata)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=200_000, help="about how many requests each task builds")
    args = parser.parse_args(argv)
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        for name, make in (("pdd_exchangeability", exchangeability), ("pdd_custom (PAC)", membership)):
            built, per_request = held_per_request(make(args.requests, Path(folder)))
            rows.append((name, built, per_request))
    print(f"Machine: {machine()}\n")
    print("| task | requests built | bytes held per request |\n|---|---:|---:|")
    for name, built, per_request in rows:
        print(f"| {name} | {built:,} | {per_request:,.0f} |")
    ceiling, why = request_ceiling()
    print(f"\nBYTES_PER_REQUEST = {BYTES_PER_REQUEST:,} (the floor used); ceiling here: {ceiling:,} requests ({why}).")


if __name__ == "__main__":
    main()
