"""The task directory as lm-eval indexes it: names, data, requests, metadata overrides."""

from __future__ import annotations

import hashlib
import re

import pytest
from lm_eval.tasks import TaskManager
from support.harness import REPO, tasks_path

from pdd_tasks.backends.base import PerTokenRequest
from pdd_tasks.tools.report.tables import method_table


WIKIMIA_SIZES = {32: (776, 387), 64: (542, 284), 128: (250, 139), 256: (82, 51)}  # rows, members


@pytest.fixture(scope="module")
def manager():
    return TaskManager(include_path=tasks_path())


BENCHMARK_TASKS = (
    {f"pdd_wikimia_{n}" for n in WIKIMIA_SIZES}
    | {"pdd_custom", "pdd_bookmia", "pdd_bookmia_a10", "pdd_patentmia"}
    | {f"pdd_wikimia24_{n}" for n in (32, 64, 128, 256)}
    | {f"pdd_wikimia_paraphrased_{n}" for n in (32, 64, 128)}
    | {
        f"pdd_mimir_{d}"
        for d in ("arxiv", "dm_mathematics", "github", "hackernews", "pile_cc", "pubmed_central", "wikipedia")
    }
    | {f"pdd_wikimia25_{s}" for s in ("32", "64", "128", "paper")}
    | {"pdd_arxivmia", "pdd_arxivmia_test", "pdd_stackmia"}
    | {f"pdd_copyright_traps_{n}_{r}" for n in (25, 50, 100) for r in (10, 100, 1000)}
)
BENCHMARK_GROUPS = {
    "pdd_wikimia",
    "pdd_wikimia24",
    "pdd_wikimia25",
    "pdd_wikimia_paraphrased",
    "pdd_mimir",
    "pdd_mimir_sok",
    "pdd_copyright_traps",
}


def test_every_task_is_indexed(manager):
    # lm-eval silently drops a YAML that fails to parse: every name must be there, beside the
    # harness's own tasks (no name clash).
    assert BENCHMARK_TASKS <= set(manager.all_subtasks)
    assert BENCHMARK_GROUPS <= set(manager.all_groups)


def test_wikimia_group_loads_the_packaged_data(manager):
    loaded = manager.load("pdd_wikimia")
    flat = loaded["tasks"]
    assert sorted(loaded["group_map"]["pdd_wikimia"], key=len) == [f"pdd_wikimia_{n}" for n in WIKIMIA_SIZES]
    assert set(flat) == {f"pdd_wikimia_{n}" for n in WIKIMIA_SIZES}
    for n, (rows, members) in WIKIMIA_SIZES.items():
        docs = list(flat[f"pdd_wikimia_{n}"].test_docs())
        assert len(docs) == rows
        assert sum(doc["label"] for doc in docs) == members


def test_packaged_wikimia_matches_its_provenance():
    folder = REPO / "pdd_tasks" / "data" / "wikimia"
    provenance = (folder / "PROVENANCE.md").read_text()
    for n in WIKIMIA_SIZES:
        name = f"WikiMIA_length{n}.jsonl"
        recorded = re.search(rf"{name}\s+([0-9a-f]{{64}})", provenance).group(1)
        assert hashlib.sha256((folder / name).read_bytes()).hexdigest() == recorded


def test_requests_are_the_text_and_its_lowercase_with_empty_context(manager):
    task = manager.load("pdd_wikimia_32")["tasks"]["pdd_wikimia_32"]
    doc = next(iter(task.test_docs()))
    requests = task.construct_requests(doc, "", metadata=("pdd_wikimia_32", 0, 1))
    assert [type(r) for r in requests] == [PerTokenRequest, PerTokenRequest]
    assert [r.args for r in requests] == [("", doc["text"]), ("", doc["text"].lower())]


def test_metadata_overrides_settings_and_drops_lowercase():
    manager = TaskManager(include_path=tasks_path(), metadata={"dcpdd_a": 10, "min_k": 0.1, "lowercase": False})
    task = manager.load("pdd_wikimia_32")["tasks"]["pdd_wikimia_32"]
    assert (task.settings.dcpdd_a, task.settings.min_k, task.settings.lowercase) == (10.0, 0.1, False)
    assert not any(name.startswith("lowercase_") for name in task.aggregation())
    doc = next(iter(task.test_docs()))
    assert len(task.construct_requests(doc, "", metadata=("pdd_wikimia_32", 0, 1))) == 1


def test_local_directory_data_source(tmp_path):
    (tmp_path / "WikiMIA_length32.jsonl").write_text(
        '{"input": "a member", "label": 1}\n{"input": "not one", "label": 0}\n'
    )
    manager = TaskManager(include_path=tasks_path(), metadata={"data_source": str(tmp_path)})
    task = manager.load("pdd_wikimia_32")["tasks"]["pdd_wikimia_32"]
    assert [doc["text"] for doc in task.test_docs()] == ["a member", "not one"]


def test_method_table_lists_methods_by_task():
    results = {
        "results": {
            "pdd_wikimia_64": {
                "loss_auc,none": 0.61,
                "loss_tpr@fpr<5%,none": 0.1,
                "dcpdd_auc,none": 0.7,
                "dcpdd_tpr@fpr<5%,none": 0.2,
            },
            "pdd_wikimia_32": {
                "loss_auc,none": 0.55,
                "loss_tpr@fpr<5%,none": 0.05,
                "dcpdd_auc,none": 0.65,
                "dcpdd_tpr@fpr<5%,none": 0.15,
            },
            "other_task": {"acc,none": 0.3},
        },
        "n-samples": {"pdd_wikimia_32": {"effective": 776}, "pdd_wikimia_64": {"effective": 542}},
    }
    lines = method_table(results).splitlines()
    assert (
        lines[0]
        == "| method | pdd_wikimia_32 AUC | pdd_wikimia_32 TPR@FPR<5% | pdd_wikimia_64 AUC | pdd_wikimia_64 TPR@FPR<5% |"
    )
    assert lines[2] == "| Loss | 0.550 | 0.050 | 0.610 | 0.100 |"
    assert lines[3] == "| DC-PDD (a=0.01) | 0.650 | 0.150 | 0.700 | 0.200 |"


def test_method_table_reports_lowercase_as_not_applicable_for_chinese():
    results = {
        "results": {
            "pdd_bookmia": {"loss_auc,none": 0.6, "loss_tpr@fpr<5%,none": 0.1, "lowercase_auc,none": 0.55,
                            "lowercase_tpr@fpr<5%,none": 0.07, "dcpdd_auc,none": 0.7, "dcpdd_tpr@fpr<5%,none": 0.2},
            "pdd_patentmia": {"loss_auc,none": 0.58, "loss_tpr@fpr<5%,none": 0.09, "dcpdd_auc,none": 0.66,
                              "dcpdd_tpr@fpr<5%,none": 0.12},
        },
        "configs": {
            "pdd_bookmia": {"metadata": {"lowercase": True}},
            "pdd_patentmia": {"metadata": {"lowercase": False, "language": "zh"}},
        },
    }  # fmt: skip
    table = method_table(results)
    lines = table.splitlines()
    assert (
        lines[0]
        == "| method | pdd_bookmia AUC | pdd_bookmia TPR@FPR<5% | pdd_patentmia AUC | pdd_patentmia TPR@FPR<5% |"
    )
    assert lines[3] == "| Lowercase | 0.550 | 0.070 | n/a | n/a |"
    assert (
        "n/a: Lowercase does not apply to pdd_patentmia (its texts (zh) have no letter case; task setting `lowercase: false`)."
        in table
    )
    # a Chinese-only run still shows the Lowercase row, as n/a with the reason
    only = {"results": {"pdd_patentmia": results["results"]["pdd_patentmia"]}, "configs": results["configs"]}
    assert "| Lowercase | n/a | n/a |" in method_table(only).splitlines()
    # a metric missing for another reason says so
    del results["results"]["pdd_bookmia"]["lowercase_tpr@fpr<5%,none"]
    assert "n/a: not in the results: Lowercase TPR@FPR<5% of pdd_bookmia." in method_table(results)


def test_the_generated_yamls_are_what_generate_py_writes():
    """``task_configs/generate.py --check``: a YAML of a generated family edited by hand (or a change
    of the generator without its YAMLs) fails here."""
    import subprocess
    import sys

    check = subprocess.run(
        [sys.executable, str(REPO / "task_configs" / "generate.py"), "--check"], capture_output=True, text=True
    )
    assert check.returncode == 0, check.stdout + check.stderr
