"""Builders shared by the tests of the dataset-level tests (pdd_codec, pdd_exchangeability, pdd_contamination)."""

from __future__ import annotations

from pathlib import Path


REPO = Path(__file__).resolve().parents[2]


def build_task(test: str, metadata: dict):
    """The task ``pdd_<test>`` as the harness builds it from its YAML in this checkout, with ``metadata``."""
    from lm_eval.tasks._yaml_loader import load_yaml

    config = load_yaml(REPO / "task_configs" / test / f"pdd_{test}.yaml", resolve_func=True)
    return config["class"](config={**config, "metadata": metadata})
