"""Bad input, round 3 (issue 32, item 7 and the minor flaws): messages that misled, each with the message
the user should see, through the real command lines (``lm_eval`` on the tiny GPT-2 of ``conftest.py``,
``lm-eval-pdd``, ``.ci/install-vllm``)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from support.bad_input import assert_refused, lm_eval_custom, rows, write_jsonl
from support.harness import cpu_float32, harness_args, run_lm_eval, run_lm_eval_pdd, wikimia_rows

from pdd_tasks.tools.outputs import replace_folder


REPOSITORY = Path(__file__).resolve().parents[2]
NETWORK_HINT = "HF datasets cache"


def lm_eval_task(model, task: str, metadata: dict, tmp_path: Path) -> subprocess.CompletedProcess:
    args = harness_args(cpu_float32(model), task, tmp_path / "out", device="cpu", batch_size=4, metadata=metadata)
    return run_lm_eval(args, cwd=tmp_path, check=False)


@pytest.fixture(scope="module")
def own_tasks(tmp_path_factory) -> Path:
    """A folder of YAML tasks of one's own: one whose test file is empty, one with a key lm-eval does not
    know, and one that works."""
    folder = tmp_path_factory.mktemp("own-tasks")
    (folder / "empty.jsonl").write_text("")
    write_jsonl(folder / "data.jsonl", [{"question": f"Question {i}?", "answer": f"Answer {i}."} for i in range(8)])

    def task(name: str, data: str, extra: str = "") -> None:
        (folder / f"{name}.yaml").write_text(
            f"task: {name}\ndataset_path: json\ndataset_kwargs:\n  data_files:\n    test: {folder / data}\n"
            'test_split: test\noutput_type: generate_until\ndoc_to_text: "{{question}}"\n'
            f'doc_to_target: "{{{{answer}}}}"\n{extra}'
        )

    task("own_empty", "empty.jsonl")
    task("own_bad_key", "data.jsonl", "bogus_key: 1\n")
    task("own_fine", "data.jsonl")
    return folder


# -- the source of a dataset-level test ------------------------------------------------------------------


@pytest.mark.parametrize(
    "task, metadata",
    [
        ("pdd_codec", {"source_task": "pdd_wikimia_32"}),
        ("pdd_exchangeability", {"source_task": "pdd_wikimia_32", "num_shards": 2, "permutations": 2}),
        ("pdd_contamination", {"source_tasks": ["pdd_wikimia_32"]}),
    ],
    ids=["codec", "exchangeability", "contamination"],
)
def test_a_pdd_task_as_source_task_is_refused_as_one(tiny_model, tmp_path, task, metadata):
    process = lm_eval_task(tiny_model, task, metadata, tmp_path)
    assert_refused(process, "source_task 'pdd_wikimia_32' is a pdd task", "Point source_task at the benchmark's own")
    assert "no such lm-eval task" not in process.stderr


def test_a_missing_source_include_path_is_named(tiny_model, tmp_path):
    missing = tmp_path / "no-such-folder"
    process = lm_eval_task(tiny_model, "pdd_codec", {"source_task": "own_fine", "source_include_path": str(missing)}, tmp_path)  # fmt: skip
    assert_refused(process, f"source_include_path '{missing}' does not exist", "Give the folder that holds the YAML")
    assert "add --metadata" not in process.stderr


def test_an_unknown_task_in_a_given_source_include_path_does_not_ask_to_add_it(tiny_model, own_tasks, tmp_path):
    process = lm_eval_task(
        tiny_model, "pdd_codec", {"source_task": "own_typo", "source_include_path": str(own_tasks)}, tmp_path
    )
    assert_refused(process, "source_task 'own_typo': no such lm-eval task", f"in source_include_path '{own_tasks}'")
    assert "add --metadata" not in process.stderr


def test_a_source_task_with_an_empty_test_file_names_its_file(tiny_model, own_tasks, tmp_path):
    process = lm_eval_task(
        tiny_model, "pdd_codec", {"source_task": "own_empty", "source_include_path": str(own_tasks)}, tmp_path
    )
    assert_refused(process, "source_task 'own_empty'", str(own_tasks / "empty.jsonl"), "is empty (no rows)")
    assert NETWORK_HINT not in process.stderr


def test_a_source_task_whose_yaml_has_an_unknown_key_names_the_key(tiny_model, own_tasks, tmp_path):
    process = lm_eval_task(
        tiny_model, "pdd_codec", {"source_task": "own_bad_key", "source_include_path": str(own_tasks)}, tmp_path
    )
    assert_refused(process, f"its YAML {own_tasks / 'own_bad_key.yaml'} has a key lm-eval does not know", "'bogus_key'")
    assert NETWORK_HINT not in process.stderr


# -- OLMo-Detect: data_source is the clone's folder -------------------------------------------------------


def test_olmo_detect_with_one_of_its_files_as_data_source_asks_for_the_clone(tiny_model, tmp_path):
    file = write_jsonl(tmp_path / "member_midtraining_gsm8k_test.jsonl", [{"text": t} for t in ("a b c", "d e f")])
    process = lm_eval_task(tiny_model, "pdd_olmo_detect_gsm8k", {"data_source": str(file)}, tmp_path)
    assert_refused(
        process,
        f"data_source {file} is one file, but",
        "two files, one per class",
        "Pass the clone's folder (the one that holds benchmark/)",
    )


# -- pdd_controlled: data keys it does not read are refused, not recorded as if applied -------------------


def test_pdd_controlled_refuses_max_words_it_would_ignore(tiny_model, tmp_path):
    process = lm_eval_task(tiny_model, "pdd_controlled", {"controlled_dir": str(tmp_path), "max_words": 5}, tmp_path)
    assert_refused(process, "pdd_controlled: metadata max_words=5 does not apply here", "Drop the key")
    assert not list(tmp_path.rglob("results_*.json"))


# -- the log: texts counted as texts, not as requests -----------------------------------------------------


def test_one_truncated_text_is_counted_once(tiny_model, tiny_table, tmp_path):
    long_text = " ".join(row["input"] for row in wikimia_rows(128)[:4])  # far more than 256 tokens
    data = write_jsonl(tmp_path / "t.jsonl", rows((long_text, 1), ("A short text.", 0), ("Another short one.", 1)))
    process = lm_eval_custom(tiny_model, data, tmp_path / "out", {"freq_table": str(tiny_table), "truncate": True})
    assert "1 text(s) were longer than" in process.stderr
    assert "(2 scoring requests: a text is also scored lowercased" in process.stderr


# -- output folders: the mode of a plain mkdir, not mkdtemp's 0700 ----------------------------------------


def test_a_replaced_folder_gets_the_mode_of_a_plain_mkdir(tmp_path):
    umask = os.umask(0o022)
    try:
        with replace_folder(tmp_path / "out", force=False, command="make-controlled") as folder:
            (folder / "data.jsonl").write_text("{}\n")
    finally:
        os.umask(umask)
    assert (tmp_path / "out").stat().st_mode & 0o777 == 0o755


def test_make_controlled_output_is_readable_by_others(tiny_model, tmp_path):
    pool = write_jsonl(tmp_path / "pool.jsonl", [{"input": row["input"]} for row in wikimia_rows(32)[:12]])
    output = tmp_path / "controlled"
    command = ["make-controlled", "--model", tiny_model, "--pool", pool, "--output", output, "--no-progress"]
    umask = os.umask(0o022)
    try:
        assert run_lm_eval_pdd([*command, "--epochs", "1", "--batch-size", "8"], tmp_path).returncode == 0
    finally:
        os.umask(umask)
    assert output.stat().st_mode & 0o777 == 0o755


# -- merge-tables: table files, and which were merges already ---------------------------------------------


def test_merge_tables_says_which_input_was_a_merge(tiny_model, tmp_path):
    for name in "abc":
        (tmp_path / f"{name}.txt").write_text(f"Text of part {name}, counted on its own.\n")
        build = ["build-table", "--tokenizer", tiny_model, "--input", tmp_path / f"{name}.txt", "--format", "lines"]
        build += ["--corpus", f"part {name}", "--output", tmp_path / f"{name}.npz", "--no-progress", "--no-parallel"]
        assert run_lm_eval_pdd(build, tmp_path).returncode == 0
    first = run_lm_eval_pdd(["merge-tables", tmp_path / "a.npz", tmp_path / "b.npz", "--output", tmp_path / "ab.npz"])
    assert "merged 2 table files (a.npz, b.npz):" in first.stderr
    second = run_lm_eval_pdd(
        ["merge-tables", tmp_path / "ab.npz", tmp_path / "c.npz", "--output", tmp_path / "abc.npz"]
    )
    assert second.returncode == 0, second.stderr
    assert "merged 2 table files (ab.npz, c.npz); ab.npz is itself a merge of 'part a + part b'" in second.stderr


# -- .ci/install-vllm: a half-built .venv-vllm -----------------------------------------------------------


@pytest.mark.parametrize("left", [["bin/python"], ["bin/activate"], []], ids=["no-activate", "no-python", "empty"])
def test_install_vllm_over_a_half_built_environment_says_to_remove_it(tmp_path, left):
    """The script's check runs first: a copy of it in a folder of its own, before any pip call."""
    (tmp_path / ".ci").mkdir()
    shutil.copy(REPOSITORY / ".ci" / "install-vllm", tmp_path / ".ci" / "install-vllm")
    venv = tmp_path / ".venv-vllm"
    (venv / "bin").mkdir(parents=True)
    for name in left:
        (venv / name).write_text("#!/bin/sh\n")
        (venv / name).chmod(0o755)
    process = subprocess.run(
        ["bash", str(tmp_path / ".ci" / "install-vllm")], capture_output=True, text=True, timeout=60, cwd=tmp_path
    )
    assert process.returncode == 1, process.stdout + process.stderr
    assert ".venv-vllm is half-built" in process.stderr
    assert "rm -rf .venv-vllm && .ci/install-vllm" in process.stderr
    assert sorted(p.name for p in (venv / "bin").iterdir()) == sorted(Path(n).name for n in left)  # untouched
