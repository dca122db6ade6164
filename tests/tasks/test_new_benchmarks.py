"""WikiMIA-25, ArxivMIA, StackMIAsub, Copyright Traps and the SoK's MIMIR group.

Each task is built by lm-eval's own TaskManager from the YAMLs in this checkout's task directory and
reads a small fixture laid out as its Hub repository is (``data/<split>-*.parquet`` shards, or the
repository's JSONL files), through ``data_source`` and the one loading path
(:func:`pdd_tasks.loading.benchmark_data.load_benchmark`). The fixtures hold made-up texts; the file
layouts, field names and label conventions are the ones the dataset cards and the authors' code
show (each task README says where from). The cards' ``configs`` blocks, read by the real
``datasets.load_dataset`` from a local folder, check each task's Hub config and split name (the call
the ``hub`` path makes, minus the network). One run goes end to end through the ``lm_eval`` command
line with the tiny model: Copyright Traps with ReCaLL prefixes from a file in the layout of
``imperial-cpg/copyright-traps-extra-non-members``.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import datasets
import pytest
from lm_eval.tasks import TaskManager
from support.harness import REPO, cpu_float32, harness_args, read_results, read_samples, run_lm_eval, tasks_path

from pdd_tasks.backends.base import PerTokenRequest
from pdd_tasks.loading.benchmark_data import DatasetError
from pdd_tasks.prepare.recall_prefixes import text_hash


FIXTURES = REPO / "tests" / "fixtures"
TASK_CONFIGS = REPO / "task_configs"

WIKIMIA25_SPLITS = {"32": "WikiMIA_length32", "64": "WikiMIA_length64", "128": "WikiMIA_length128"}
WIKIMIA25_SPLITS["paper"] = "paper_subset"
TRAPS = [(length, reps) for length in (25, 50, 100) for reps in (10, 100, 1000)]
GROUPS = {
    "pdd_wikimia25": ["pdd_wikimia25_32", "pdd_wikimia25_64", "pdd_wikimia25_128"],
    "pdd_copyright_traps": [f"pdd_copyright_traps_{length}_{reps}" for length, reps in TRAPS],
    "pdd_mimir_sok": [
        f"pdd_mimir_{d}" for d in ("arxiv", "dm_mathematics", "hackernews", "pile_cc", "pubmed_central", "wikipedia")
    ],
}
TASKS = (
    [f"pdd_wikimia25_{s}" for s in WIKIMIA25_SPLITS]
    + GROUPS["pdd_copyright_traps"]
    + ["pdd_arxivmia", "pdd_arxivmia_test", "pdd_stackmia"]
)


def manager(**metadata) -> TaskManager:
    return TaskManager(include_path=tasks_path(), include_defaults=False, metadata=metadata or None)


def load_task(name: str, **metadata):
    return manager(**metadata).load(name)["tasks"][name]


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def wikimia25_rows(split: str) -> list[dict]:
    """Rows in WikiMIA-25's schema (``input``, ``label``; 1 = member), distinct per split."""
    return [
        {"input": f"In {split} the council of a river town voted on bridge {i}, and the vote was close.", "label": 1}
        for i in range(2)
    ] + [
        {"input": f"In 2025, for {split}, a storm {i} closed the coastal road for a week.", "label": 0}
        for i in range(2)
    ]


def trap_rows(length: int, reps: int) -> list[dict]:
    """Rows in Copyright Traps' schema (``perplexity_bucket``, ``text``, ``label``; 1 = member)."""
    return [
        {
            "perplexity_bucket": bucket,
            "text": f"trap {length}/{reps} #{i}: the amber lattice hums {bucket}",
            "label": i % 2,
        }
        for i, bucket in enumerate((1, 11, 21, 31))
    ]


def shard(rows: list[dict], path: Path) -> Path:
    """One Parquet shard, as ``push_to_hub`` names them (``<split>-00000-of-00001.parquet``)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    datasets.Dataset.from_list(rows).to_parquet(path)
    return path


@pytest.fixture(scope="module")
def hub_copies(tmp_path_factory):
    """``hf download`` folders of WikiMIA-25 and Copyright Traps, and of the extra non-members."""
    root = tmp_path_factory.mktemp("hub")
    for split in WIKIMIA25_SPLITS.values():
        shard(wikimia25_rows(split), root / "wikimia25" / "data" / f"{split}-00000-of-00001.parquet")
    for length, reps in TRAPS:
        split = f"seq_len_{length}_n_rep_{reps}"
        shard(trap_rows(length, reps), root / "copyright_traps" / "data" / f"{split}-00000-of-00001.parquet")
    extra = [{"perplexity_bucket": 1, "text": f"extra non-member {i}: a quiet kiln of glass"} for i in range(3)]
    shard(extra, root / "extra" / "data" / "seq_len_100-00000-of-00001.parquet")
    return root


def source_of(task: str, hub_copies: Path) -> tuple[Path, list[tuple[str, int]]]:
    """The data_source folder of a task and the (text, label) rows it must load."""
    if task.startswith("pdd_wikimia25_"):
        rows = wikimia25_rows(WIKIMIA25_SPLITS[task.removeprefix("pdd_wikimia25_")])
        return hub_copies / "wikimia25", [(r["input"], r["label"]) for r in rows]
    if task.startswith("pdd_copyright_traps_"):
        length, reps = map(int, task.removeprefix("pdd_copyright_traps_").split("_"))
        return hub_copies / "copyright_traps", [(r["text"], r["label"]) for r in trap_rows(length, reps)]
    if task.startswith("pdd_arxivmia"):
        name = "arxiv_mia_test.jsonl" if task.endswith("_test") else "arxiv_mia.jsonl"
        rows = read_jsonl(FIXTURES / "arxivmia" / "data" / name)
        return FIXTURES / "arxivmia", [(r["text"], r["label"]) for r in rows]
    rows = read_jsonl(FIXTURES / "stackmia" / "StackMIAsub.jsonl")
    return FIXTURES / "stackmia", [(r["snippet"], r["label"]) for r in rows]


# -------------------------------------------------------------------------------------- indexing


def test_every_new_task_and_group_is_indexed():
    tasks = manager()
    assert set(TASKS) <= set(tasks.all_subtasks)
    assert set(GROUPS) <= set(tasks.all_groups)


def test_groups_hold_their_tasks(hub_copies):
    for group, members in GROUPS.items():
        if group == "pdd_mimir_sok":
            source = FIXTURES / "mimir"
        else:
            source = source_of(members[0], hub_copies)[0]
        loaded = manager(data_source=str(source)).load(group)
        assert sorted(loaded["group_map"][group]) == sorted(members)


def test_the_sok_group_is_mimir_without_github():
    tasks = manager(data_source=str(FIXTURES / "mimir"))
    mimir = tasks.load("pdd_mimir")["group_map"]["pdd_mimir"]
    sok = tasks.load("pdd_mimir_sok")
    assert sorted(set(mimir) - set(sok["group_map"]["pdd_mimir_sok"])) == ["pdd_mimir_github"]
    assert {task.config.test_split for task in sok["tasks"].values()} == {"ngram_13_0.8"}


# ---------------------------------------------------------------- Hub layouts -> labelled rows


@pytest.mark.parametrize("name", TASKS)
def test_each_task_reads_its_hub_layout(name, hub_copies):
    source, expected = source_of(name, hub_copies)
    task = load_task(name, data_source=str(source))
    docs = list(task.test_docs())
    assert [(d["text"], d["label"]) for d in docs] == expected
    requests = task.construct_requests(docs[0], "", metadata=(name, 0, 1))
    assert all(isinstance(r, PerTokenRequest) for r in requests)
    assert [r.args for r in requests] == [("", docs[0]["text"]), ("", docs[0]["text"].lower())]


def test_a_single_file_works_as_data_source(hub_copies):
    shard_file = next((hub_copies / "copyright_traps" / "data").glob("seq_len_50_n_rep_100-*.parquet"))
    docs = list(load_task("pdd_copyright_traps_50_100", data_source=str(shard_file)).test_docs())
    assert [(d["text"], d["label"]) for d in docs] == [(r["text"], r["label"]) for r in trap_rows(50, 100)]
    test_file = FIXTURES / "arxivmia" / "data" / "arxiv_mia_test.jsonl"
    assert len(list(load_task("pdd_arxivmia_test", data_source=str(test_file)).test_docs())) == 4


def test_arxivmia_configs_are_files_not_splits():
    # the card's configs: arxiv_mia (default; all rows) and arxiv_mia_test, each one file, split "train"
    source = str(FIXTURES / "arxivmia")
    full, test = load_task("pdd_arxivmia", data_source=source), load_task("pdd_arxivmia_test", data_source=source)
    assert (full.config.dataset_name, test.config.dataset_name) == ("arxiv_mia", "arxiv_mia_test")
    assert full.config.test_split == test.config.test_split == "train"


def test_a_folder_without_the_split_names_what_it_needs(tmp_path):
    with pytest.raises(DatasetError, match=r"holds none of seq_len_25_n_rep_10\.jsonl"):
        load_task("pdd_copyright_traps_25_10", data_source=str(tmp_path))
    with pytest.raises(DatasetError, match=r"holds none of StackMIAsub\.jsonl"):
        load_task("pdd_stackmia", data_source=str(tmp_path))
    (tmp_path / "StackMIAsub.jsonl").write_text('{"text": "not the snippet field", "label": 1}\n')
    with pytest.raises(DatasetError, match=r"no field 'snippet'"):
        load_task("pdd_stackmia", data_source=str(tmp_path))


# ---------------------------------------------------------------------- end to end, CLI, tiny model


def test_copyright_traps_with_recall_prefixes_from_the_extra_non_members(tiny_model, tiny_table, hub_copies, tmp_path):
    task = "pdd_copyright_traps_100_1000"
    extra = next((hub_copies / "extra" / "data").glob("seq_len_100-*.parquet"))
    out = tmp_path / "out"
    metadata = {
        "data_source": str(hub_copies / "copyright_traps"),
        "freq_table": str(tiny_table),
        "recall_shots": 2,
        "recall_prefix_file": str(extra),
    }
    run_lm_eval(
        harness_args(cpu_float32(tiny_model), task, out, batch_size=4, metadata=metadata, device="cpu"), cwd=tmp_path
    )
    results = read_results(out)
    for method in ("loss", "zlib", "recall"):
        assert 0.0 <= results["results"][task][f"{method}_auc,none"] <= 1.0
    record = results["configs"][task]["metadata"]["recall_prefixes"]
    assert record["source"] == "recall_prefix_file" and record["path"] == str(extra)
    extra_texts = [f"extra non-member {i}: a quiet kiln of glass" for i in range(2)]
    assert [d["sha256"] for d in record["nonmember_prefix"]] == [text_hash(t) for t in extra_texts]
    samples = read_samples(out, task)
    assert sorted((s["doc"]["text"], s["doc"]["label"]) for s in samples) == sorted(
        (r["text"], r["label"]) for r in trap_rows(100, 1000)
    )


# ------------------------------------------------ the Hub's configs, as datasets.load_dataset reads them

#: The ``configs`` blocks of the dataset cards (YAML front matter of each repository's README.md), as
#: published; StackMIAsub's card has none (one file, so one split ``train``).
CARD_CONFIGS = {
    "wikimia25": """configs:
  - config_name: default
    data_files:
      - split: WikiMIA_length32
        path: data/WikiMIA_length32-*.parquet
      - split: WikiMIA_length64
        path: data/WikiMIA_length64-*.parquet
      - split: WikiMIA_length128
        path: data/WikiMIA_length128-*.parquet
      - split: paper_subset
        path: data/paper_subset-*.parquet
""",
    "arxivmia": """configs:
- config_name: arxiv_mia
  data_files: data/arxiv_mia.jsonl
  default: true
- config_name: arxiv_mia_dev
  data_files: data/arxiv_mia_dev.jsonl
- config_name: arxiv_mia_test
  data_files: data/arxiv_mia_test.jsonl
""",
    "copyright_traps": "configs:\n- config_name: default\n  data_files:\n"
    + "".join(f"  - split: seq_len_{n}_n_rep_{r}\n    path: data/seq_len_{n}_n_rep_{r}-*\n" for n, r in TRAPS),
    "stackmia": "",
}


def card_repo(source: Path, family: str, folder: Path) -> Path:
    """A copy of ``source`` with a README.md whose front matter is the card's ``configs`` block."""
    repo = folder / "repo"
    shutil.copytree(source, repo)
    (repo / "README.md").write_text(f"---\n{CARD_CONFIGS[family]}---\n# card\n")
    return repo


@pytest.mark.parametrize("name", ["pdd_wikimia25_paper", "pdd_arxivmia", "pdd_arxivmia_test", "pdd_stackmia"])
def test_the_hub_config_and_split_of_each_task_exist_as_the_card_declares(name, hub_copies, tmp_path):
    # The card's configs read by the real datasets.load_dataset with the task's dataset_name and
    # test_split: the call the hub path makes, minus the network.
    source, expected = source_of(name, hub_copies)
    family = {"pdd_wikimia25": "wikimia25", "pdd_arxivmia": "arxivmia", "pdd_stackmia": "stackmia"}[
        name.removesuffix("_paper").removesuffix("_test")
    ]
    repo = card_repo(source, family, tmp_path)
    task = load_task(name, data_source=str(source))
    split = datasets.load_dataset(str(repo), task.config.dataset_name, split=task.config.test_split)
    text_field = task.config.metadata["text_field"]
    assert [(row[text_field], row["label"]) for row in split] == expected


def test_copyright_traps_splits_exist_as_the_card_declares(hub_copies, tmp_path):
    repo = card_repo(hub_copies / "copyright_traps", "copyright_traps", tmp_path)
    for name in GROUPS["pdd_copyright_traps"]:
        config = load_task(name, data_source=str(repo)).config
        split = datasets.load_dataset(str(repo), config.dataset_name, split=config.test_split)
        assert [(r["text"], r["label"]) for r in split] == source_of(name, hub_copies)[1]
