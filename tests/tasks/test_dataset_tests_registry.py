"""The registry of dataset-level tests: one entry per test, each run by the one task class; a new test
needs its entry and a YAML file, no task code (docs/adding-a-method.md, "Adding a dataset-level test")."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest
from support.harness import cpu_float32, harness_args, read_results, read_samples, run_lm_eval

from pdd_metrics.verdict import Evidence
from pdd_tasks.dataset_tests import DATASET_TESTS, core
from pdd_tasks.dataset_tests.checks import check_dataset_test
from pdd_tasks.dataset_tests.core import DatasetTest, DuplicateTestError, Reading
from pdd_tasks.registry import Setting, whole_number, with_stderr


def test_the_registered_tests_in_table_order():
    assert list(DATASET_TESTS) == ["codec", "exchangeability"]
    for name, test in DATASET_TESTS.items():
        assert test.name == name and test.task == f"pdd_{name}" and test.citation and test.metrics
        assert all(metric.startswith(f"{name}_") for metric in test.metrics)


def test_a_test_registered_twice_is_refused_naming_both_citations():
    """The rule is the registry's (tests/project/test_registries.py); a test's duplicate raises
    DuplicateTestError, naming both citations."""
    with pytest.raises(
        DuplicateTestError, match=r"'codec' is registered twice \(citation '.+' and citation 'another paper'\)"
    ):
        core.register(dataclasses.replace(DATASET_TESTS["codec"], citation="another paper"))


def test_a_setting_declared_twice_in_one_test_is_refused():
    with pytest.raises(RuntimeError, match="declares a setting twice"):
        dataclasses.replace(DATASET_TESTS["codec"], settings=DATASET_TESTS["codec"].settings * 2)


def test_every_default_passes_its_check_and_metrics_carry_their_stderr_where_declared():
    for test in DATASET_TESTS.values():
        for setting in test.all_settings:
            if setting.default is not None:
                assert setting.check(setting.name, setting.default) == setting.default
    assert DATASET_TESTS["codec"].metrics["codec_score"][0].stderr([1.0, -1.0, -2.0, 0.5], 0) > 0


# -- a new test: an entry and a YAML file, no task code ------------------------------------------------


def mean_stderr(items, iters: int) -> float:
    return float(np.std(items, ddof=1) / np.sqrt(len(items)))


@with_stderr(mean_stderr)
def mean_loglik(items) -> float:
    return float(np.mean(items))


#: The toy test's reading: its p-value is exp(mean log-likelihood), "detecting" a benchmark the model
#: finds likely (a toy: it holds no level).
TOY_READING = Reading(
    label="toy",
    detects="seen as a toy",
    result_keys=("toy_loglik_mean", "toy_loglik_examples"),
    evidence=lambda values, reference: Evidence(min(1.0, float(np.exp(values["toy_loglik_mean"])))),
    shown=lambda values, reference: f"mean {values['toy_loglik_mean']:.2f} of {int(values['toy_loglik_examples'])}",
    evidence_anchor="adding-a-method.md#adding-a-dataset-level-test",
)


TOY = DatasetTest(
    name="toy_loglik",
    title="the toy test",
    citation="this test file",
    settings=(Setting("repeat", 1, whole_number, "requests per example"),),
    metrics={"toy_loglik_mean": (mean_loglik, True), "toy_loglik_examples": (len, True)},
    normalise=lambda examples, settings, source: examples,
    select=lambda examples, settings, source: examples,
    planned_requests=lambda examples, settings: (examples * settings.repeat, f"{examples} x repeat {settings.repeat}"),
    cost_fix='e.g. {"repeat": 1}',
    documents=lambda examples, settings, source, model: ([{"text": text} for text in examples], {"source": source}),
    requests=lambda doc, settings: [("", doc["text"])] * settings.repeat,
    item=lambda doc, results: float(np.mean([result[0] for result in results])),
    reading=TOY_READING,
)


@pytest.mark.parametrize("test", [*DATASET_TESTS.values(), TOY], ids=lambda test: test.name)
def test_every_registered_test_and_a_toy_one_pass_the_battery(test):
    check_dataset_test(test)


def test_the_battery_names_what_an_entry_gets_wrong():
    bad = dataclasses.replace(TOY, reading=dataclasses.replace(TOY_READING, evidence_anchor="/tmp/notes.txt"))
    with pytest.raises(AssertionError, match="'toy_loglik': evidence_anchor '/tmp/notes.txt' is not a docs"):
        check_dataset_test(bad)
    wordy = dataclasses.replace(TOY, reading=dataclasses.replace(TOY_READING, shown=lambda values, ref: "x" * 200))
    with pytest.raises(AssertionError, match="shown must be a few words"):
        check_dataset_test(wordy)
    with pytest.raises(RuntimeError, match="result_keys \\['toy_mean'\\] are none of its metrics"):
        dataclasses.replace(TOY, reading=dataclasses.replace(TOY_READING, result_keys=("toy_mean",)))


def test_a_test_added_by_one_entry_is_in_the_verdict_the_table_and_the_board(tmp_path):
    with DATASET_TESTS.added(TOY.name, TOY):
        read_the_toy_test(tmp_path)


def read_the_toy_test(tmp_path):
    # the verdict, `table`, the report and the board know no test by name: they read the registry
    from support.results import results_of

    from pdd_tasks.tools.report.contamination_board import contamination_board, contamination_columns
    from pdd_tasks.tools.report.tables import contamination_checks
    from pdd_tasks.tools.results.runs import find_runs

    results = results_of({"arc_easy": (500, 0.5), "gsm8k": (500, 0.5)})
    values = results["results"]["pdd_contamination"]
    for task, mean in (("arc_easy", np.log(1e-4)), ("gsm8k", np.log(0.5))):
        values |= {f"toy_loglik_mean/{task},none": mean, f"toy_loglik_examples/{task},none": 5}
        results["configs"]["pdd_contamination"]["metadata"]["contamination"][task]["toy_loglik"] = {"documents": 5}
    checks = contamination_checks(results)
    assert checks.header[-5:-2] == ["toy", "toy p", "toy Holm p"]
    rows = {row[0]: row for row in checks.rows}
    assert rows["arc_easy"][-2] == "contaminated" and rows["gsm8k"][-2] == "not detected"
    assert rows["arc_easy"][-5] == "mean -9.21 of 5"
    line = checks.verdicts[0]
    assert line.startswith("arc_easy: contaminated: seen as a toy (toy mean -9.21 of 5, Holm p 0.0006)"), line
    assert line.endswith("[evidence: adding-a-method.md#adding-a-dataset-level-test]")
    # Holm's family counts the toy's p-values too: 2 tasks x 3 tests
    assert "across the 6 p-value(s)" in checks.notes[-1]
    # the board: its columns and its cells
    results["config"] = {"model": "hf", "model_args": "pretrained=org/model"}
    file = tmp_path / "org__model" / "results_2026-01-01T00-00-00.000000.json"
    file.parent.mkdir()
    file.write_text(json.dumps(results))
    board = contamination_board(find_runs([tmp_path]))
    assert {"toy_loglik_mean", "toy_loglik_examples", "toy_loglik_p", "toy_loglik_p_holm"} <= set(
        contamination_columns()
    )
    assert board.cell("org/model", "arc_easy")["detected"] == "seen as a toy"
    assert "toy mean -9.21 of 5, Holm p 0.0006" in board.cell_lines("org/model", "arc_easy")


def test_a_new_test_runs_through_the_task_class_from_its_entry_alone(tiny_model, tmp_path):
    with DATASET_TESTS.added(TOY.name, TOY):
        run_the_toy_test(tiny_model, tmp_path)


def run_the_toy_test(tiny_model, tmp_path):
    tasks = tmp_path / "tasks"
    tasks.mkdir()
    (tasks / "pdd_toy_loglik.yaml").write_text(
        "class: !function pdd_tasks.tasks.dataset_level.DatasetTestTask\ntask: pdd_toy_loglik\ndataset_path: local\n"
        'output_type: loglikelihood\ntest_split: test\ndoc_to_text: ""\ndoc_to_target: "{{text}}"\n'
    )
    data = tmp_path / "texts.jsonl"
    data.write_text("".join(json.dumps({"text": f"example number {i} of the toy file"}) + "\n" for i in range(5)))
    metadata = {"data_files": str(data), "repeat": 2}
    args = harness_args(cpu_float32(tiny_model), "pdd_toy_loglik", tmp_path / "out", include=tasks, device="cpu", metadata=metadata)  # fmt: skip
    run_lm_eval(args, cwd=tmp_path)
    results = read_results(tmp_path / "out")["results"]["pdd_toy_loglik"]
    samples = read_samples(tmp_path / "out", "pdd_toy_loglik")
    logliks = [float(sample["resps"][0][0][0]) for sample in samples]
    assert results["toy_loglik_examples,none"] == 5
    assert results["toy_loglik_mean,none"] == pytest.approx(np.mean(logliks))
    assert results["toy_loglik_mean_stderr,none"] == pytest.approx(mean_stderr(logliks, 0))
    assert all(len(sample["resps"]) == 2 for sample in samples)
    # its settings are checked by the same machinery: a typo is refused, a cost above max_requests too
    bad = harness_args(cpu_float32(tiny_model), "pdd_toy_loglik", tmp_path / "bad", include=tasks, device="cpu", metadata={"data_files": str(data), "repaet": 2})  # fmt: skip
    assert "did you mean 'repeat'" in run_lm_eval(bad, cwd=tmp_path, check=False).stderr
    costly = harness_args(cpu_float32(tiny_model), "pdd_toy_loglik", tmp_path / "costly", include=tasks, device="cpu", metadata={"data_files": str(data), "repeat": 5, "max_requests": 20})  # fmt: skip
    assert (
        "25 requests (5 x repeat 5), more than max_requests=20" in run_lm_eval(costly, cwd=tmp_path, check=False).stderr
    )


def test_pdd_contamination_has_its_own_cheaper_defaults_and_a_block_still_wins(tmp_path):
    # beside an eval the exchangeability test scores 1 permutation a shard (its cost is (permutations
    # + 1) passes over the file: about the eval's), alone the reference code's 250
    from support.dataset_tests import build_task
    from support.standard_tasks import standard_tasks

    from pdd_tasks.dataset_tests.core import read_settings

    tasks = standard_tasks(tmp_path)
    metadata = {
        "source_tasks": ["arc_easy_local"],
        "source_include_path": str(tasks),
        "exchangeability": {"num_shards": 4},
    }
    check = build_task("contamination", metadata)
    assert check.settings[("arc_easy_local", "exchangeability")].permutations == 1
    own = build_task("contamination", metadata | {"exchangeability": {"num_shards": 4, "permutations": 7}})
    assert own.settings[("arc_easy_local", "exchangeability")].permutations == 7
    assert read_settings(DATASET_TESTS["exchangeability"], {}, "pdd_exchangeability").permutations == 250
    with pytest.raises(RuntimeError, match="contamination_defaults \\['permutation'\\] are no settings"):
        DatasetTest(**{**{f.name: getattr(DATASET_TESTS["exchangeability"], f.name) for f in dataclasses.fields(DatasetTest) if f.init}, "contamination_defaults": {"permutation": 1}})  # fmt: skip
