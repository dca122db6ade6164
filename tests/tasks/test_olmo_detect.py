"""OLMo-Detect (``pdd_olmo_detect``, ``pdd_olmo_detect_shifted``): its GitHub repository's layout.

The fixture is a folder laid out as ``benchmark/`` of github.com/ted-tennis/OLMo-Detect (commit
8ed11cd; its README and file list): per subset, a member file per setting
(``member/{matched,shifted}/test/member_<stage>_<subset>_<setting>_test.jsonl``; GSM8K has no setting
level) and one non-member file shared by both settings (``non-member/test/...``), one JSON object per
line with the text in ``text`` beside fields of the source (as in the published files; made-up
texts). Dev files sit beside the test files and must not be read. Each task is built by lm-eval's
own TaskManager from this checkout's YAMLs and loads through ``data_source`` and the one loading
path; one run goes through the ``lm_eval`` command line with the tiny model.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from lm_eval.tasks import TaskManager
from support.harness import cpu_float32, harness_args, read_results, read_samples, run_lm_eval, tasks_path

from pdd_tasks.loading.benchmark_data import DatasetError


#: The test files of ``benchmark/`` as the repository lists them (pre- and mid-training), relative to it.
PUBLISHED = [
    f"pretraining/{domain}/{role}"
    for domain in ("dclm", "pes2o", "openwebmath")
    for role in (
        f"member/matched/test/member_pretraining_{domain}_matched_test.jsonl",
        f"member/shifted/test/member_pretraining_{domain}_shifted_test.jsonl",
        f"non-member/test/non-member_pretraining_{domain}_test.jsonl",
    )
] + [
    "pretraining/starcoder/member/matched/test/member_pretraining_starcoder_java_matched_test.jsonl",
    "pretraining/starcoder/member/matched/test/member_pretraining_starcoder_python_matched_test.jsonl",
    "pretraining/starcoder/member/shifted/test/member_pretraining_starcoder_java_shifted_test.jsonl",
    "pretraining/starcoder/member/shifted/test/member_pretraining_starcoder_python_shifted_test.jsonl",
    "pretraining/starcoder/non-member/test/non-member_pretraining_starcoder_java_test.jsonl",
    "pretraining/starcoder/non-member/test/non-member_pretraining_starcoder_python_test.jsonl",
    "midtraining/gsm8k/member/test/member_midtraining_gsm8k_test.jsonl",
    "midtraining/gsm8k/non-member/test/non-member_midtraining_gsm8k_test.jsonl",
    "midtraining/stackexchange/member/matched/test/member_midtraining_stackexchange_math_matched_test.jsonl",
    "midtraining/stackexchange/member/matched/test/member_midtraining_stackexchange_stackoverflow_matched_test.jsonl",
    "midtraining/stackexchange/member/shifted/test/member_midtraining_stackexchange_math_shifted_test.jsonl",
    "midtraining/stackexchange/member/shifted/test/member_midtraining_stackexchange_stackoverflow_shifted_test.jsonl",
    "midtraining/stackexchange/non-member/test/non-member_midtraining_stackexchange_math_test.jsonl",
    "midtraining/stackexchange/non-member/test/non-member_midtraining_stackexchange_stackoverflow_test.jsonl",
]
SUBSETS = ["dclm", "pes2o", "openwebmath", "starcoder_python", "starcoder_java", "gsm8k"]
SUBSETS += ["stackexchange_math", "stackexchange_stackoverflow"]
MATCHED = [f"pdd_olmo_detect_{subset}" for subset in SUBSETS]
SHIFTED = [f"pdd_olmo_detect_shifted_{subset}" for subset in SUBSETS if subset != "gsm8k"]


def manager(**metadata) -> TaskManager:
    return TaskManager(include_path=tasks_path(), include_defaults=False, metadata=metadata or None)


def load_task(name: str, **metadata):
    return manager(**metadata).load(name)["tasks"][name]


def record(text: str) -> dict:
    """A row as the published files hold it: the text in ``text``, beside fields of its source."""
    return {"text": text, "url": "https://example.org/page", "1b_13-gram_overlap_score": 0.03, "metadata": {"a": 1}}


def texts(path: str) -> list[str]:
    """The made-up texts of one file: named after it, so a text says which file it came from."""
    return [f"{Path(path).stem} {i}: the copper river bends past the mill" for i in range(2)]


def dev(path: str) -> str:
    """The dev file beside a test file (``.../test/..._test.jsonl`` -> ``.../dev/..._dev.jsonl``)."""
    return path.replace("/test/", "/dev/").replace("_test.jsonl", "_dev.jsonl")


def write_jsonl(path: Path, rows: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")


@pytest.fixture(scope="module")
def repo(tmp_path_factory) -> Path:
    """A copy of the repository: ``benchmark/`` with the published test files and a dev file beside each."""
    root = tmp_path_factory.mktemp("olmo") / "OLMo-Detect"
    for path in PUBLISHED:
        for name in (path, dev(path)):
            write_jsonl(root / "benchmark" / name, [record(t) for t in texts(name)])
    return root


def expected_files(task: str) -> tuple[str, str]:
    """(member file, non-member file) of a task, picked from the published list by name."""
    shifted = task.startswith("pdd_olmo_detect_shifted_")
    subset = task.removeprefix("pdd_olmo_detect_shifted_").removeprefix("pdd_olmo_detect_")
    setting = "" if subset == "gsm8k" else ("_shifted" if shifted else "_matched")
    (member,) = [p for p in PUBLISHED if Path(p).name.endswith(f"ing_{subset}{setting}_test.jsonl") and "/member/" in p]
    (nonmember,) = [p for p in PUBLISHED if Path(p).name.endswith(f"ing_{subset}_test.jsonl") and "/non-member/" in p]
    return member, nonmember


def test_the_tasks_and_groups_are_indexed_and_hold_their_tasks(repo):
    tasks = manager(data_source=str(repo))
    assert set(MATCHED + SHIFTED) <= set(tasks.all_subtasks)
    assert len(MATCHED) == 8 and len(SHIFTED) == 7  # GSM8K has no shifted setting
    assert sorted(tasks.load("pdd_olmo_detect")["group_map"]["pdd_olmo_detect"]) == sorted(MATCHED)
    shifted = tasks.load("pdd_olmo_detect_shifted")["group_map"]["pdd_olmo_detect_shifted"]
    assert sorted(shifted) == sorted(SHIFTED)


@pytest.mark.parametrize("name", MATCHED + SHIFTED)
def test_each_task_reads_its_two_test_files(name, repo):
    member, nonmember = expected_files(name)
    docs = list(load_task(name, data_source=str(repo)).test_docs())
    expected = [(t, 1) for t in texts(member)] + [(t, 0) for t in texts(nonmember)]
    assert [(d["text"], d["label"]) for d in docs] == expected


def test_the_paths_are_the_published_ones(repo):
    # spelled out from the repository's file list, not built like the YAMLs
    task = load_task("pdd_olmo_detect_shifted_stackexchange_math", data_source=str(repo))
    files = task.config.metadata["hub_files"]
    assert files == {
        "member": "benchmark/midtraining/stackexchange/member/shifted/test/"
        "member_midtraining_stackexchange_math_shifted_test.jsonl",
        "nonmember": "benchmark/midtraining/stackexchange/non-member/test/non-member_midtraining_stackexchange_math_test.jsonl",
    }
    gsm8k = load_task("pdd_olmo_detect_gsm8k", data_source=str(repo)).config.metadata["hub_files"]
    assert gsm8k["member"] == "benchmark/midtraining/gsm8k/member/test/member_midtraining_gsm8k_test.jsonl"


def test_the_benchmark_folder_itself_works_as_data_source(repo):
    docs = list(load_task("pdd_olmo_detect_starcoder_java", data_source=str(repo / "benchmark")).test_docs())
    assert [d["label"] for d in docs] == [1, 1, 0, 0]
    assert docs[0]["text"] == texts(expected_files("pdd_olmo_detect_starcoder_java")[0])[0]


def test_without_a_local_copy_the_message_says_where_to_get_it():
    with pytest.raises(DatasetError) as caught:
        load_task("pdd_olmo_detect_dclm")
    message = str(caught.value)
    assert "https://github.com/ted-tennis/OLMo-Detect" in message
    assert "TedSSS/OLMo-Detect is not read" in message
    assert """--metadata '{"data_source": "<path>"}'""" in message
    assert "benchmark/pretraining/dclm/non-member/test/non-member_pretraining_dclm_test.jsonl" in message


def test_a_row_without_the_text_field_is_named(repo, tmp_path):
    folder = tmp_path / "benchmark" / "pretraining" / "pes2o"
    write_jsonl(folder / "member/matched/test/member_pretraining_pes2o_matched_test.jsonl", [{"body": "x"}])
    write_jsonl(folder / "non-member/test/non-member_pretraining_pes2o_test.jsonl", [record("y")])
    with pytest.raises(
        DatasetError, match=r"member_pretraining_pes2o_matched_test\.jsonl:1: no 'text' field \(fields: body\)"
    ):
        load_task("pdd_olmo_detect_pes2o", data_source=str(tmp_path))


def test_lm_eval_scores_a_subset_end_to_end(tiny_model, tiny_table, repo, tmp_path):
    task = "pdd_olmo_detect_gsm8k"
    out = tmp_path / "out"
    # ReCaLL's prefixes from the subset's dev non-members, as the authors' recall runs take --uncon-dev
    dev = repo / "benchmark/midtraining/gsm8k/non-member/dev/non-member_midtraining_gsm8k_dev.jsonl"
    metadata = {
        "data_source": str(repo),
        "freq_table": str(tiny_table),
        "recall_shots": 2,
        "recall_prefix_file": str(dev),
    }
    run_lm_eval(
        harness_args(cpu_float32(tiny_model), task, out, batch_size=4, metadata=metadata, device="cpu"), cwd=tmp_path
    )
    results = read_results(out)["results"][task]
    for method in ("loss", "zlib", "min_k", "dcpdd", "recall"):
        assert 0.0 <= results[f"{method}_auc,none"] <= 1.0
    record = read_results(out)["configs"][task]["metadata"]["recall_prefixes"]
    assert record["source"] == "recall_prefix_file" and record["path"] == str(dev)
    samples = read_samples(out, task)
    member, nonmember = expected_files(task)
    expected = [(t, 1) for t in texts(member)] + [(t, 0) for t in texts(nonmember)]
    assert sorted((s["doc"]["text"], s["doc"]["label"]) for s in samples) == sorted(expected)
