"""Results for the tests of ``lm-eval-pdd table``, ``report`` and ``decisions``: a hand-made
pdd_contamination results JSON (the real run: tests/tasks/test_contamination_task.py) and a real
``pdd_wikimia_32`` run through ``lm_eval``."""

from __future__ import annotations

import json

from .harness import run_lm_eval, tasks_path


def results_of(tasks: dict, examples: int = 1000, groups: dict | None = None) -> dict:
    """A results JSON of ``arc_easy`` (multiple choice) and the given source tasks' pdd_contamination
    metrics: task -> (CoDeC drops of ``examples``, exchangeability p-value or None). ``groups``: the
    run's groups as ``pdd_contamination`` records them (group -> direct children, leaf tasks or groups:
    ``contamination_groups``, and each leaf's ``group`` in its summary)."""
    values, summary = {}, {}
    for task, (drops, p_value) in tasks.items():
        values |= {
            f"codec_score/{task},none": drops / examples,
            f"codec_score_ci95_low/{task},none": 0.0,
            f"codec_score_ci95_high/{task},none": 1.0,
            f"codec_examples/{task},none": examples,
        }
        summary[task] = {"examples": examples, "codec": {"scored": examples}, "exchangeability": {"shards": 10}}
        if p_value is None:
            summary[task]["exchangeability"] = {"not_applicable": "2 shards are longer than the context"}
        else:
            values |= {f"exchangeability_pvalue/{task},none": p_value, f"exchangeability_shards/{task},none": 10}
    metadata = {"contamination": summary}
    if groups is not None:
        metadata["contamination_groups"] = groups
        for group, children in groups.items():
            for child in children:
                if child in summary:
                    summary[child]["group"] = group
    return {
        "results": {"arc_easy": {"acc,none": 0.5, "acc_stderr,none": 0.05}, "pdd_contamination": values},
        "configs": {
            "arc_easy": {"output_type": "multiple_choice"},
            "pdd_contamination": {"metadata": metadata},
        },
    }


def lm_eval_run(model, table, out, metadata):
    run_lm_eval(
        [
            "--model", "hf",
            "--model_args", f"pretrained={model},dtype=float32",
            "--device", "cpu",
            "--include_path", tasks_path(),
            "--tasks", "pdd_wikimia_32",
            "--batch_size", "8",
            "--limit", "24",
            "--metadata", json.dumps({"freq_table": str(table), **metadata}),
            "--output_path", str(out),
            "--log_samples",
        ],
        cwd=out.parent,
    )  # fmt: skip
