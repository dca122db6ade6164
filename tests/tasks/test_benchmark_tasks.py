"""The benchmark families beyond WikiMIA: BookMIA, PatentMIA, WikiMIA-24, paraphrased WikiMIA, MIMIR.

Every task is built by lm-eval's own TaskManager from the YAMLs in the task directory, reads a small
fixture in its benchmark's published schema (``tests/fixtures/<benchmark>/``), and builds its
requests. The Hub loading code runs for real up to the network boundary (offline mode makes it stop
there, with the message that names the local-copy override); the local file and directory paths run
in full, once end to end through the ``lm_eval`` command line with the tiny model.
"""

from __future__ import annotations

import gzip
import json
import re
import shutil
import zipfile
import zlib
from pathlib import Path

import pytest
from lm_eval.tasks import TaskManager
from support.harness import REPO, SHARED, read_results, read_samples, run_lm_eval, tasks_path

from pdd_tasks.backends.base import PerTokenRequest
from pdd_tasks.loading.benchmark_data import DatasetError, first_n_whitespace_words
from pdd_tasks.loading.chinese import first_n_words
from pdd_tasks.tools.report.tables import print_method_table


FIXTURES = REPO / "tests" / "fixtures"
MIMIR_DOMAINS = ("arxiv", "dm_mathematics", "github", "hackernews", "pile_cc", "pubmed_central", "wikipedia")
MIMIR_CONFIG = {"wikipedia": "wikipedia_(en)"}  # MIMIR's config name where it is not the task suffix
GROUPS = {
    "pdd_wikimia24": [f"pdd_wikimia24_{n}" for n in (32, 64, 128, 256)],
    "pdd_wikimia_paraphrased": [f"pdd_wikimia_paraphrased_{n}" for n in (32, 64, 128)],
    "pdd_mimir": [f"pdd_mimir_{d}" for d in MIMIR_DOMAINS],
}
# task: (fixture data_source, rows, members)
FIXTURE_OF = {
    "pdd_bookmia": (FIXTURES / "bookmia", 6, 3),
    "pdd_bookmia_a10": (FIXTURES / "bookmia" / "book_data.jsonl", 6, 3),
    "pdd_patentmia": (FIXTURES / "patentmia", 6, 3),
    **{task: (FIXTURES / "wikimia24", 4, 2) for task in GROUPS["pdd_wikimia24"]},
    **{task: (FIXTURES / "wikimia_paraphrased", 4, 2) for task in GROUPS["pdd_wikimia_paraphrased"]},
    **{task: (FIXTURES / "mimir", 6, 3) for task in GROUPS["pdd_mimir"]},
}


def manager(**metadata) -> TaskManager:
    """lm-eval's TaskManager over the pdd task directory only (the built-in tasks are indexed once,
    in test_tasks.py)."""
    return TaskManager(include_path=tasks_path(), include_defaults=False, metadata=metadata or None)


def load_task(name: str, **metadata):
    return manager(**metadata).load(name)["tasks"][name]


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


@pytest.fixture
def offline_hub(monkeypatch, tmp_path):
    """Offline mode as HF_HUB_OFFLINE=1 sets it (read at import, so patched here) and empty caches:
    the real datasets / huggingface_hub code runs and stops at the network boundary."""
    import datasets
    import huggingface_hub

    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", True)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", tmp_path / "datasets")


# -------------------------------------------------------------------------------------- indexing


def test_every_benchmark_task_and_group_is_indexed():
    # lm-eval drops a YAML that fails to parse without a word: every name must be there.
    tasks = manager()
    assert set(FIXTURE_OF) <= set(tasks.all_subtasks)
    assert set(GROUPS) <= set(tasks.all_groups)


@pytest.mark.parametrize("group", sorted(GROUPS))
def test_each_group_holds_its_tasks(group):
    source = FIXTURE_OF[GROUPS[group][0]][0]
    loaded = manager(data_source=str(source)).load(group)
    assert sorted(loaded["group_map"][group]) == sorted(GROUPS[group])
    assert set(loaded["tasks"]) == set(GROUPS[group])


# ------------------------------------------------------------------------ fixtures -> requests


@pytest.mark.parametrize("name", sorted(FIXTURE_OF))
def test_each_task_builds_requests_from_its_fixture(name):
    source, rows, members = FIXTURE_OF[name]
    task = load_task(name, data_source=str(source))
    docs = list(task.test_docs())
    assert len(docs) == rows
    assert sum(doc["label"] for doc in docs) == members
    assert all(isinstance(doc["text"], str) and doc["text"] for doc in docs)
    doc = docs[0]
    requests = task.construct_requests(doc, "", metadata=(name, 0, 1))
    assert all(isinstance(r, PerTokenRequest) for r in requests)
    if name == "pdd_patentmia":  # Chinese: no Lowercase, one request per text
        assert [r.args for r in requests] == [("", doc["text"])]
        assert "lowercase" not in task.settings.methods
    else:
        assert [r.args for r in requests] == [("", doc["text"]), ("", doc["text"].lower())]


def test_bookmia_reads_the_snippet_column_and_the_paper_labels():
    task = load_task("pdd_bookmia", data_source=str(FIXTURES / "bookmia"))
    published = read_jsonl(FIXTURES / "bookmia" / "book_data.jsonl")
    assert [(d["text"], d["label"]) for d in task.test_docs()] == [(r["snippet"], r["label"]) for r in published]


def test_bookmia_default_cap_is_the_recommended_one_and_a10_reproduces_the_table():
    assert load_task("pdd_bookmia", data_source=str(FIXTURES / "bookmia")).settings.dcpdd_a == 0.01
    assert load_task("pdd_bookmia_a10", data_source=str(FIXTURES / "bookmia")).settings.dcpdd_a == 10.0
    assert load_task("pdd_bookmia", data_source=str(FIXTURES / "bookmia"), dcpdd_a=10).settings.dcpdd_a == 10.0


def test_data_loading_doctests():
    import doctest

    import pdd_tasks.loading.benchmark_data

    result = doctest.testmod(pdd_tasks.loading.benchmark_data)
    assert result.attempted > 0 and result.failed == 0


def test_max_words_keeps_the_first_words_with_their_spacing():
    task = load_task("pdd_bookmia", data_source=str(FIXTURES / "bookmia"), max_words=5)
    published = read_jsonl(FIXTURES / "bookmia" / "book_data.jsonl")
    texts = [d["text"] for d in task.test_docs()]
    assert texts == [first_n_whitespace_words(r["snippet"], 5) for r in published]
    assert all(len(t.split()) == 5 for t in texts)
    assert texts[0] == "The lamp on the quay"


def test_patentmia_cuts_to_jieba_words_and_turns_lowercase_off():
    task = load_task("pdd_patentmia", data_source=str(FIXTURES / "patentmia"), max_words=6)
    published = read_jsonl(FIXTURES / "patentmia" / "PatentMIA.jsonl")
    texts = [d["text"] for d in task.test_docs()]
    assert texts == [first_n_words(r["text"], 6) for r in published]
    assert texts[0] == "子曰：学而时习之"  # 子 / 曰 / ： / 学而 / 时习 / 之: the first six jieba words
    assert all(published[i]["text"].startswith(t) and t != published[i]["text"] for i, t in enumerate(texts))
    assert task.settings.lowercase is False


def test_mimir_turns_member_and_nonmember_files_into_labelled_rows():
    for suffix in MIMIR_DOMAINS:
        config = MIMIR_CONFIG.get(suffix, suffix)
        task = load_task(f"pdd_mimir_{suffix}", data_source=str(FIXTURES / "mimir"))
        folder = FIXTURES / "mimir" / "cache_100_200_1000_512"
        members = [json.loads(x) for x in (folder / "train" / f"{config}_ngram_13_0.8.jsonl").read_text().splitlines()]
        nonmembers = [
            json.loads(x) for x in (folder / "test" / f"{config}_ngram_13_0.8.jsonl").read_text().splitlines()
        ]
        assert [(d["text"], d["label"]) for d in task.test_docs()] == [(t, 1) for t in members] + [
            (t, 0) for t in nonmembers
        ]


def test_mimir_reads_the_hub_folder_itself_and_a_file_of_pairs(tmp_path):
    inner = FIXTURES / "mimir" / "cache_100_200_1000_512"
    assert len(list(load_task("pdd_mimir_github", data_source=str(inner)).test_docs())) == 6
    pairs = tmp_path / "github_pairs.jsonl"  # rows as the datasets loading script made them
    pairs.write_text(
        "\n".join(
            json.dumps({"member": f"seen {i}", "nonmember": f"unseen {i}", "member_neighbors": []}) for i in range(2)
        )
    )
    docs = list(load_task("pdd_mimir_github", data_source=str(pairs)).test_docs())
    assert [(d["text"], d["label"]) for d in docs] == [("seen 0", 1), ("unseen 0", 0), ("seen 1", 1), ("unseen 1", 0)]


# ------------------------------------------------------------------------ local file formats


@pytest.mark.parametrize(
    "task, name, field",
    [("pdd_arxivmia", "arxiv_mia.jsonl.gz", "text"), ("pdd_stackmia", "StackMIAsub.jsonl.gz", "snippet")],
)
def test_a_folder_holding_the_gzipped_file_is_read_as_the_file_itself(tmp_path, task, name, field):
    """Before: the .gz file itself was read, the folder holding it refused ("holds none of ...")."""
    rows = [{field: f"text number {i} of the benchmark", "label": i % 2} for i in range(4)]
    folder = tmp_path / "copy"
    folder.mkdir()
    with gzip.open(folder / name, "wt", encoding="utf-8") as handle:
        handle.write("".join(json.dumps(row) + "\n" for row in rows))
    from_file = list(load_task(task, data_source=str(folder / name)).test_docs())
    from_folder = list(load_task(task, data_source=str(folder)).test_docs())
    assert len(from_folder) == 4 and from_folder == from_file


def test_patentmia_from_the_zip_the_authors_publish(tmp_path):
    archive = tmp_path / "data.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        zf.write(FIXTURES / "patentmia" / "PatentMIA.jsonl", "data/PatentMIA.jsonl")
        zf.writestr("data/WikiMIA_128.jsonl", '{"input": "other benchmark", "label": 1}\n')
    docs = list(load_task("pdd_patentmia", data_source=str(archive)).test_docs())
    published = read_jsonl(FIXTURES / "patentmia" / "PatentMIA.jsonl")
    assert [d["text"] for d in docs] == [r["text"] for r in published]
    # the unzipped folder works too (the file is found in its subdirectory)
    with zipfile.ZipFile(archive) as zf:
        zf.extractall(tmp_path / "unzipped")
    assert len(list(load_task("pdd_patentmia", data_source=str(tmp_path / "unzipped")).test_docs())) == 6


def test_zip_without_the_named_file_says_which_files_it_holds(tmp_path):
    archive = tmp_path / "data.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        zf.writestr("a.jsonl", '{"text": "x", "label": 1}\n')
        zf.writestr("b.jsonl", '{"text": "y", "label": 0}\n')
    with pytest.raises(DatasetError, match=r"PatentMIA\.jsonl.*a\.jsonl.*b\.jsonl"):
        load_task("pdd_patentmia", data_source=str(archive))


@pytest.mark.parametrize("form", ["parquet", "csv", "json_array", "jsonl_gz", "hub_parquet_shards", "save_to_disk"])
def test_wikimia24_split_from_other_file_forms(form, tmp_path):
    import datasets

    rows = read_jsonl(FIXTURES / "wikimia24" / "WikiMIA_length64.jsonl")
    split = datasets.Dataset.from_list(rows)
    if form == "parquet":
        split.to_parquet(tmp_path / "WikiMIA_length64.parquet")
    elif form == "csv":
        split.to_csv(tmp_path / "WikiMIA_length64.csv", index=False)
    elif form == "json_array":
        (tmp_path / "WikiMIA_length64.json").write_text(json.dumps(rows))
    elif form == "jsonl_gz":
        with gzip.open(tmp_path / "WikiMIA_length64.jsonl.gz", "wt") as handle:
            handle.writelines(json.dumps(r) + "\n" for r in rows)
    elif form == "hub_parquet_shards":  # what `hf download` gives for a parquet Hub dataset
        (tmp_path / "data").mkdir()
        datasets.Dataset.from_list(rows[:2]).to_parquet(tmp_path / "data" / "WikiMIA_length64-00000-of-00002.parquet")
        datasets.Dataset.from_list(rows[2:]).to_parquet(tmp_path / "data" / "WikiMIA_length64-00001-of-00002.parquet")
    else:  # the MIA-Tuner repository ships WikiMIA-24 as a save_to_disk DatasetDict
        datasets.DatasetDict({"WikiMIA_length64": split}).save_to_disk(str(tmp_path / "WikiMIA-24"))
        tmp_path = tmp_path / "WikiMIA-24"
    docs = list(load_task("pdd_wikimia24_64", data_source=str(tmp_path)).test_docs())
    assert [(d["text"], d["label"]) for d in docs] == [(r["input"], r["label"]) for r in rows]


def test_a_missing_local_copy_says_what_was_expected(tmp_path):
    with pytest.raises(DatasetError, match=r"neither 'hub', 'package' nor an existing file"):
        load_task("pdd_wikimia24_32", data_source=str(tmp_path / "nowhere"))
    with pytest.raises(DatasetError, match=r"holds none of WikiMIA_length32\.jsonl"):
        load_task("pdd_wikimia24_32", data_source=str(tmp_path))
    with pytest.raises(DatasetError, match=r"does not hold cache_100_200_1000_512/train/arxiv_ngram_13_0\.8\.jsonl"):
        load_task("pdd_mimir_arxiv", data_source=str(tmp_path))


def test_wrong_schema_in_a_local_file_names_the_field(tmp_path):
    (tmp_path / "book_data.jsonl").write_text('{"text": "no snippet field", "label": 1}\n')
    with pytest.raises(DatasetError, match=r"no field 'snippet'"):
        load_task("pdd_bookmia", data_source=str(tmp_path))


# ------------------------------------------------------------------- the Hub, up to the network


@pytest.mark.parametrize(
    "name, hub_id",
    [
        ("pdd_bookmia", "swj0419/BookMIA"),
        ("pdd_wikimia24_32", "wjfu99/WikiMIA-24"),
        ("pdd_wikimia_paraphrased_64", "zjysteven/WikiMIA_paraphrased_perturbed"),
        ("pdd_mimir_wikipedia", "iamgroot42/mimir"),
        ("pdd_wikimia25_32", "SimMIA/WikiMIA-25"),
        ("pdd_arxivmia_test", "zhliu/ArxivMIA"),
        ("pdd_stackmia", "darklight03/StackMIAsub"),
        ("pdd_copyright_traps_100_10", "imperial-cpg/copyright-traps"),
    ],
)
def test_offline_hub_error_names_dataset_hub_id_and_override(name, hub_id, offline_hub):
    with pytest.raises(DatasetError) as caught:
        load_task(name)
    message = str(caught.value)
    assert message.startswith(f"{name}: could not load ")
    assert f"(dataset {hub_id}" in message
    assert f"hf download {hub_id} --repo-type dataset" in message
    assert """--metadata '{"data_source": "<dir>"}'""" in message
    if name.startswith("pdd_mimir"):  # a script dataset: the files are fetched with huggingface_hub
        assert "LocalEntryNotFoundError" in message and "gated" in message
        assert "cache_100_200_1000_512/test/wikipedia_(en)_ngram_13_0.8.jsonl" in message
    else:  # the real datasets.load_dataset stopped at the network boundary
        assert f"Couldn't reach '{hub_id}' on the Hub" in message


def test_patentmia_is_not_on_the_hub_and_says_where_to_get_it():
    with pytest.raises(DatasetError) as caught:
        load_task("pdd_patentmia")
    message = str(caught.value)
    assert "PatentMIA is not on the Hugging Face Hub" in message
    assert "https://github.com/zhang-wei-chao/DC-PDD" in message
    assert (
        """--metadata '{"data_source": "<path>"}' (<path> = a directory holding PatentMIA.jsonl or """
        """PatentMIA.jsonl.gz, or that file""" in message
    )


# ------------------------------------------------------------------------- WikiMIA-24 (shared)

WIKIMIA24 = SHARED / "data" / "WikiMIA-24"


@pytest.mark.skipif(not WIKIMIA24.is_dir(), reason="needs ../shared/data/WikiMIA-24 (not in a fresh clone)")
def test_wikimia24_group_from_the_shared_copy_keeps_the_short_256_rows():
    """With keep_duplicates every row of PROVENANCE.md is scored; by default each distinct text once
    (WikiMIA-24 repeats texts: 1558 rows of length 32 hold 1386 distinct, one text of length 64 is there
    26 times; no text under both labels)."""
    provenance = (WIKIMIA24 / "PROVENANCE.md").read_text()
    every = manager(data_source=str(WIKIMIA24), keep_duplicates=True).load("pdd_wikimia24")["tasks"]
    distinct = manager(data_source=str(WIKIMIA24)).load("pdd_wikimia24")["tasks"]
    assert set(every) == set(distinct) == set(GROUPS["pdd_wikimia24"])
    for n, n_distinct, distinct_members in ((32, 1386, 684), (64, 1239, 653), (128, 508, 263), (256, 439, 232)):
        rows, members = map(int, re.search(rf"WikiMIA_length{n}\.jsonl\s*\|\s*(\d+)\s*\|\s*(\d+)", provenance).groups())
        docs = list(every[f"pdd_wikimia24_{n}"].test_docs())
        assert (len(docs), sum(d["label"] for d in docs)) == (rows, members)
        task = distinct[f"pdd_wikimia24_{n}"]
        docs = list(task.test_docs())
        assert (len(docs), sum(d["label"] for d in docs)) == (n_distinct, distinct_members)
        assert len({d["text"] for d in docs}) == n_distinct
        record = task.config.metadata["repeats"]
        assert (record["texts"], record["distinct"], record["scored"]) == (rows, n_distinct, n_distinct)
    short = [d for d in every["pdd_wikimia24_256"].test_docs() if len(d["text"].split()) < 256]
    assert len(short) == 268  # PROVENANCE.md: 268 of 506 rows are shorter than 256 words; they are kept
    assert len([d for d in distinct["pdd_wikimia24_256"].test_docs() if len(d["text"].split()) < 256]) == 240


# ---------------------------------------------------------------------- end to end, CLI, tiny model


def test_bookmia_and_patentmia_end_to_end_through_lm_eval(tiny_model, tiny_table, tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    shutil.copy(FIXTURES / "bookmia" / "book_data.jsonl", data)
    shutil.copy(FIXTURES / "patentmia" / "PatentMIA.jsonl", data)
    out = tmp_path / "out"
    metadata = {"data_source": str(data), "freq_table": str(tiny_table), "max_words": 20}
    run_lm_eval(
        [
            "--model", "hf", "--model_args", f"pretrained={tiny_model}", "--device", "cpu",
            "--include_path", tasks_path(), "--tasks", "pdd_bookmia,pdd_patentmia",
            "--batch_size", "4", "--output_path", str(out), "--log_samples", "--metadata", json.dumps(metadata),
        ],
        cwd=tmp_path,
    )  # fmt: skip
    results = read_results(out)["results"]
    assert "lowercase_auc,none" in results["pdd_bookmia"]
    assert "lowercase_auc,none" not in results["pdd_patentmia"]
    for task in ("pdd_bookmia", "pdd_patentmia"):
        assert 0.0 <= results[task]["dcpdd_auc,none"] <= 1.0

    published = read_jsonl(FIXTURES / "patentmia" / "PatentMIA.jsonl")
    samples = read_samples(out, "pdd_patentmia")
    assert sorted(s["doc"]["text"] for s in samples) == sorted(first_n_words(r["text"], 20) for r in published)
    for sample in samples:  # Zlib on the UTF-8 bytes of the Chinese text: zlib = loss / len(zlib(text))
        loss, label = sample["loss_auc"]
        zlib_value, _ = sample["zlib_auc"]
        assert label == sample["doc"]["label"]
        assert zlib_value * len(zlib.compress(sample["doc"]["text"].encode("utf-8"))) == pytest.approx(loss, rel=1e-9)

    table = print_method_table(out)
    lowercase_row = next(line for line in table.splitlines() if line.startswith("| Lowercase |"))
    header = table.splitlines()[0].split(" | ")
    cells = lowercase_row.split(" | ")
    patent_cells = [cells[i] for i, h in enumerate(header) if h.startswith("pdd_patentmia")]
    book_cells = [cells[i] for i, h in enumerate(header) if h.startswith("pdd_bookmia")]
    assert [c.strip(" |") for c in patent_cells] == ["n/a", "n/a"]
    for cell in book_cells:  # "0.500 ± 0.289": the value and its standard error
        value, stderr = cell.strip(" |").split(" ± ")
        assert value.replace(".", "").isdigit() and stderr.replace(".", "").isdigit(), cell
    assert "n/a: Lowercase does not apply to pdd_patentmia (its texts (zh) have no letter case" in table
