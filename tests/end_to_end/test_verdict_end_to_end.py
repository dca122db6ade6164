"""End to end (issue 33): the default model tuned on a small local task, each example its own training
sequence in random order (exposure (a), how the CoDeC authors' notebook contaminates a model), is
called contaminated by ``lm-eval-pdd table``; the untuned model is not.

The task's examples are 48 WikiMIA-32 non-members (Wikipedia leads on events after the model's
data); its reference of known-unseen examples (``pdd_contamination``'s ``references``) is 48 other
non-members, rendered by a copy of the task's YAML. Everything runs through the real commands:
``lm-eval-pdd make-ordered --exposure examples`` tunes the model (12 optimizer steps, as the
controls), ``lm_eval`` runs ``pdd_contamination``, ``lm-eval-pdd table`` decides.
"""

from __future__ import annotations

import json

import pytest
from support.completions import default_model
from support.harness import REPO, cpu_float32, harness_args, read_results, run_lm_eval, run_lm_eval_pdd, wikimia_rows

from pdd_tasks.tools.report.tables import contamination_checks, print_method_table


EXAMPLES = 48

TASK_YAML = """task: {name}
dataset_path: json
dataset_kwargs:
  data_files:
    test: {data}
test_split: test
output_type: loglikelihood_rolling
doc_to_text: ""
doc_to_target: "{{{{text}}}}"
target_delimiter: ""
metric_list:
  - metric: word_perplexity
"""


@pytest.fixture(scope="module")
def news_tasks(tmp_path_factory):
    """``news_local`` (the benchmark) and ``news_fresh_local`` (its reference), and pdd_contamination's YAML."""
    directory = tmp_path_factory.mktemp("news-tasks")
    unseen = [row["input"] for row in wikimia_rows(32) if row["label"] == 0]
    for name, texts in (("news_local", unseen[:EXAMPLES]), ("news_fresh_local", unseen[EXAMPLES : 2 * EXAMPLES])):
        data = directory / f"{name}.jsonl"
        data.write_text("".join(json.dumps({"text": text}) + "\n" for text in texts))
        (directory / f"{name}.yaml").write_text(TASK_YAML.format(name=name, data=data))
    (directory / "pdd_contamination.yaml").write_text(
        f"include: {REPO / 'task_configs' / 'contamination' / 'pdd_contamination.yaml'}\n"
    )
    return directory


@pytest.fixture(scope="module")
def tuned_model(news_tasks, tmp_path_factory):
    """The default model tuned on news_local's file, each example its own sequence, 1 epoch of 12 steps."""
    base = default_model()
    out = tmp_path_factory.mktemp("tuned") / "examples"
    finished = run_lm_eval_pdd(
        ["make-ordered", "--model", base, "--data", news_tasks / "news_local.jsonl", "--exposure", "examples"]
        + ["--examples", EXAMPLES, "--epochs", 1, "--batch-size", 4, "--output", out, "--no-progress"]
    )
    assert finished.returncode == 0, finished.stderr[-4000:]
    assert json.loads((out / "manifest.json").read_text())["training"]["steps"] == EXAMPLES // 4
    return out / "model"


def contamination_run(model, tasks, out) -> dict:
    metadata = {
        "source_tasks": ["news_local"],
        "source_include_path": str(tasks),
        "references": {"news_local": "news_fresh_local"},
        "exchangeability": {"num_shards": 6, "permutations": 10},
    }
    args = harness_args(cpu_float32(model), "pdd_contamination", out, include=tasks, device="cpu", batch_size=8)
    run_lm_eval(args + ["--metadata", json.dumps(metadata)], cwd=out.parent)
    return read_results(out)


def verdict_row(table: str, task: str) -> str:
    return next(line for line in table.splitlines() if line.startswith(f"| {task} |"))


def test_the_untuned_model_is_not_called_contaminated(news_tasks, tmp_path):
    results = contamination_run(default_model(), news_tasks, tmp_path / "out")
    values = results["results"]["pdd_contamination"]
    assert values["codec_examples/news_local,none"] == values["reference_codec_examples/news_local,none"] == EXAMPLES
    assert (
        results["configs"]["pdd_contamination"]["metadata"]["contamination"]["news_local"]["codec"]["reference"]["task"]
        == "news_fresh_local"
    )
    table = print_method_table(tmp_path / "out")
    # docs/controls-examples.md quotes it: pytest -s tests/end_to_end/test_verdict_end_to_end.py
    print(f"\nuntuned model:\n{table}")
    assert "| not detected |" in verdict_row(table, "news_local"), table
    assert " vs reference " in table and "(vs reference)" in table


def test_the_model_tuned_example_by_example_is_called_contaminated(news_tasks, tuned_model, tmp_path):
    results = contamination_run(tuned_model, news_tasks, tmp_path / "out")
    values = results["results"]["pdd_contamination"]
    file, reference = values["codec_score/news_local,none"], values["reference_codec_score/news_local,none"]
    assert file > reference + 0.2, (file, reference)
    table = print_method_table(tmp_path / "out")
    print(f"\ntuned model:\n{table}")
    assert "| contaminated |" in verdict_row(table, "news_local"), table
    line = next(line for line in table.splitlines() if line.startswith("- news_local: "))
    assert "contaminated: seen example by example (CoDeC " in line and " vs reference " in line
    # the same numbers without the reference: CoDeC against its calibrated null cannot reach it at 48
    # examples, so the verdict is the one a reference answers ("inconclusive": seen this or its kind)
    without = json.loads(json.dumps(results))
    for key in [key for key in without["results"]["pdd_contamination"] if key.startswith("reference_")]:
        del without["results"]["pdd_contamination"][key]
    del without["configs"]["pdd_contamination"]["metadata"]["contamination"]["news_local"]["codec"]["reference"]
    assert contamination_checks(without).rows[0][8] == "inconclusive"
