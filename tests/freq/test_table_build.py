"""Building frequency tables from corpora: sources (JSONL, Parquet, text, streamed HF datasets),
limits, sharding + merging (= one build, exactly), resuming an interrupted build, and the CLI."""

from __future__ import annotations

import gzip
import json
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from support.tables import PILE, needs_smollm2
from support.tables import tiny_tokenizer as _tiny_tokenizer

from pdd_tasks.freq import build as table_build
from pdd_tasks.freq.build import BuildResumeError, build
from pdd_tasks.freq.sources import (
    TableSourceError,
    expand_braces,
    hub_sources,
    local_sources,
    parse_where,
    select_shard,
)
from pdd_tasks.freq.tables import (
    BuildLimits,
    FrequencyTable,
    FrequencyTableMismatchError,
    batch_encoder,
    build_table,
    merge_tables,
)
from pdd_tasks.tools import cli


WORDS = "the cat sat on a mat while dogs ran over green hills and rivers under grey skies".split()


def _docs(n: int, seed: int = 0) -> list[dict]:
    rng = np.random.default_rng(seed)
    docs = []
    for i in range(n):
        words = rng.choice(WORDS, size=int(rng.integers(1, 40)))
        docs.append({"text": " ".join(words) + f" #{i}", "domain": "a" if i % 3 else "b", "meta": {"set": f"s{i % 2}"}})
    return docs


@pytest.fixture(scope="module")
def tokenizer():
    return _tiny_tokenizer([" ".join(WORDS)] * 5 + [f"#{i}" for i in range(50)], vocab_size=320)


def _direct(tokenizer, texts, cap=1024) -> np.ndarray:
    counter = Counter()
    for text in texts:
        ids = tokenizer(text, add_special_tokens=False).input_ids
        counter.update(ids if cap is None else ids[:cap])
    return np.array([counter.get(v, 0) for v in range(len(tokenizer))], dtype=np.int64)


def _write_jsonl(path: Path, rows: list[dict], gz: bool = False) -> Path:
    data = "".join(json.dumps(row) + "\n" for row in rows)
    if gz:
        with gzip.open(path, "wt", encoding="utf-8") as fh:
            fh.write(data)
    else:
        path.write_text(data, encoding="utf-8")
    return path


def _write_parquet(path: Path, rows: list[dict]) -> Path:
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.Table.from_pylist(rows), path, row_group_size=7)
    return path


@pytest.fixture()
def corpus(tmp_path) -> tuple[list[Path], list[dict]]:
    """Three files (JSONL, gzipped JSONL, Parquet) of 25, 30 and 20 documents."""
    docs = _docs(75)
    files = [
        _write_jsonl(tmp_path / "c0.jsonl", docs[:25]),
        _write_jsonl(tmp_path / "c1.jsonl.gz", docs[25:55], gz=True),
        _write_parquet(tmp_path / "c2.parquet", docs[55:]),
    ]
    return files, docs


# ------------------------------------------------------------------------------------ sources


def test_expand_braces_ranges_lists_and_padding():
    assert expand_braces("en/c4-train.{00000..00014}-of-01024.json.gz")[14] == "en/c4-train.00014-of-01024.json.gz"
    assert len(expand_braces("en/c4-train.{00000..00014}-of-01024.json.gz")) == 15
    assert expand_braces("x{1..3}") == ["x1", "x2", "x3"]
    assert expand_braces("{a,b}-{0..1}") == ["a-0", "a-1", "b-0", "b-1"]
    assert expand_braces("plain*.jsonl") == ["plain*.jsonl"]


def test_local_sources_read_every_format(tmp_path, corpus):
    files, docs = corpus
    sources = local_sources([str(tmp_path / "c*")])
    assert [s.format for s in sources] == ["jsonl", "jsonl", "parquet"]
    assert [t for s in sources for t in s.texts()] == [d["text"] for d in docs]
    (tmp_path / "one.txt").write_text("whole file\n\nis one document", encoding="utf-8")
    with gzip.open(tmp_path / "lines.txt.gz", "wt", encoding="utf-8") as fh:
        fh.write("first line\n\nsecond line\n")
    assert list(local_sources([tmp_path / "one.txt"])[0].texts()) == ["whole file\n\nis one document"]
    assert list(local_sources([tmp_path / "lines.txt.gz"], fmt="lines")[0].texts()) == ["first line", "second line"]
    # a directory means every corpus file below it, sorted
    assert [Path(s.name).name for s in local_sources([tmp_path])] == [
        "c0.jsonl",
        "c1.jsonl.gz",
        "c2.parquet",
        "lines.txt.gz",
        "one.txt",
    ]


def test_where_filters_records_including_nested_fields(corpus):
    files, docs = corpus
    texts = [t for s in local_sources(files, where=parse_where(["domain=b", "meta.set=s0"])) for t in s.texts()]
    expected = [d["text"] for d in docs if d["domain"] == "b" and d["meta"]["set"] == "s0"]
    assert texts == expected and 0 < len(texts) < len(docs)


def test_source_errors_name_the_problem(tmp_path):
    with pytest.raises(TableSourceError, match="matches no file"):
        local_sources([str(tmp_path / "nothing*.jsonl")])
    with pytest.raises(TableSourceError, match="not found"):
        local_sources([tmp_path / "missing.jsonl"])
    (tmp_path / "data.csv").write_text("a,b\n")
    with pytest.raises(TableSourceError, match="pass --format"):
        local_sources([tmp_path / "data.csv"])
    bad = _write_jsonl(tmp_path / "bad.jsonl", [{"text": "a"}, {"body": "b"}])
    with pytest.raises(TableSourceError, match=r"bad\.jsonl:2: no field 'text' \(found \['body'\]\).*--text-field"):
        list(local_sources([bad])[0].texts())
    pq = _write_parquet(tmp_path / "p.parquet", [{"body": "x"}])
    with pytest.raises(TableSourceError, match="no column 'text'.*--text-field"):
        list(local_sources([pq])[0].texts())
    with pytest.raises(TableSourceError, match="FIELD=VALUE"):
        parse_where(["domain"])


def test_hub_streaming_path_reads_a_local_repository(tmp_path, corpus):
    """The Hub code path (datasets.load_dataset(..., streaming=True) with data-file patterns), run
    on a local directory laid out like a dataset repository."""
    files, docs = corpus
    repo = tmp_path / "repo"
    (repo / "data").mkdir(parents=True)
    _write_parquet(repo / "data" / "train-00000.parquet", docs[:40])
    _write_parquet(repo / "data" / "train-00001.parquet", docs[40:])
    sources = hub_sources(str(repo), None, "train", ["data/train-{00000..00001}.parquet"])
    assert len(sources) == 2 and sources[0].kind == "hub"
    assert [t for s in sources for t in s.texts()] == [d["text"] for d in docs]
    where = hub_sources(str(repo), None, "train", ["data/*.parquet"], where=parse_where(["domain=b"]))
    assert len(where) == 1
    assert list(where[0].texts()) == [d["text"] for d in docs if d["domain"] == "b"]


def test_hub_offline_gives_a_clear_message(monkeypatch):
    import datasets
    import huggingface_hub

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", True, raising=False)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True, raising=False)
    sources = hub_sources("allenai/c4", "en", "train", ["en/c4-train.{00000..00014}-of-01024.json.gz"])
    assert len(sources) == 15
    with pytest.raises(TableSourceError) as info:
        next(sources[0].texts())
    message = str(info.value)
    assert "'allenai/c4'" in message and "c4-train.00000-of-01024.json.gz" in message
    assert "HF_HUB_OFFLINE" in message and "--input" in message


# ---------------------------------------------------------------------------------- counting


def test_batch_encoder_gives_the_tokenizer_ids(tokenizer, corpus):
    texts = [d["text"] for d in corpus[1]]
    assert batch_encoder(tokenizer)(texts) == [tokenizer(t, add_special_tokens=False).input_ids for t in texts]


def test_parallel_and_serial_builds_agree(tokenizer, corpus):
    texts = [d["text"] for d in corpus[1]]
    a = build_table(texts, tokenizer, "c", progress=False, parallel=True, batch_size=8)
    b = build_table(texts, tokenizer, "c", progress=False, parallel=False, batch_size=3)
    np.testing.assert_array_equal(a.counts, b.counts)
    np.testing.assert_array_equal(a.counts, _direct(tokenizer, texts))
    assert a.text_bytes == sum(len(t.encode()) for t in texts)


def test_limits_documents_tokens_and_bytes(tokenizer, corpus):
    texts = [d["text"] for d in corpus[1]]
    lengths = [len(tokenizer(t, add_special_tokens=False).input_ids) for t in texts]
    sizes = [len(t.encode("utf-8")) for t in texts]

    def first_reaching(values, limit):  # documents taken whole: the one reaching the limit is in
        total = 0
        for i, v in enumerate(values):
            total += v
            if total >= limit:
                return i + 1
        return len(values)

    by_docs = build_table(texts, tokenizer, "c", progress=False, limits=BuildLimits(documents=10), batch_size=4)
    assert by_docs.documents == 10
    np.testing.assert_array_equal(by_docs.counts, _direct(tokenizer, texts[:10]))
    by_tokens = build_table(texts, tokenizer, "c", progress=False, limits=BuildLimits(tokens=100), batch_size=4)
    n = first_reaching(lengths, 100)
    assert by_tokens.documents == n and by_tokens.total_tokens >= 100 > by_tokens.total_tokens - lengths[n - 1]
    np.testing.assert_array_equal(by_tokens.counts, _direct(tokenizer, texts[:n]))
    by_bytes = build_table(texts, tokenizer, "c", progress=False, limits=BuildLimits(text_bytes=500), batch_size=4)
    n = first_reaching(sizes, 500)
    assert by_bytes.documents == n and by_bytes.text_bytes == sum(sizes[:n])
    with pytest.raises(ValueError, match="positive"):
        BuildLimits(documents=0)


# --------------------------------------------------------------------- sharding and merging


@pytest.mark.parametrize("shard_by,num_shards", [("file", 2), ("file", 3), ("document", 4)])
def test_shards_merged_equal_one_build(tokenizer, corpus, shard_by, num_shards):
    files, docs = corpus
    sources = local_sources(files)
    whole = build(sources, tokenizer, max_tokens_per_doc=6, progress=False, docs_per_part=8)
    shards = [
        build(sources, tokenizer, max_tokens_per_doc=6, progress=False, docs_per_part=8,
              shard_index=i, num_shards=num_shards, shard_by=shard_by)
        for i in range(num_shards)
    ]  # fmt: skip
    assert all(0 < s.documents < whole.documents for s in shards)
    merged = merge_tables(shards)
    np.testing.assert_array_equal(merged.counts, whole.counts)
    np.testing.assert_array_equal(whole.counts, _direct(tokenizer, [d["text"] for d in docs], cap=6))
    assert merged.documents == whole.documents == len(docs)
    assert merged.text_bytes == whole.text_bytes
    assert f"shard 1 of {num_shards} by {shard_by}" in shards[1].corpus


def test_shard_selection_is_a_partition_by_sorted_name(corpus):
    sources = local_sources(corpus[0])
    picked = [select_shard(list(reversed(sources)), i, 2) for i in range(2)]
    assert [s.name for s in picked[0]] == [sources[0].name, sources[2].name]
    assert [s.name for s in picked[1]] == [sources[1].name]
    with pytest.raises(TableSourceError, match="--shard-index 2 --num-shards 2"):
        select_shard(sources, 2, 2)


def test_a_shard_with_no_file_is_an_empty_table(tokenizer, corpus):
    table = build(local_sources(corpus[0]), tokenizer, shard_index=4, num_shards=5, progress=False)
    assert table.documents == 0 and table.total_tokens == 0


def test_merge_refuses_other_tokenizers_and_caps(tokenizer, corpus):
    texts = [d["text"] for d in corpus[1]]
    other = _tiny_tokenizer(["zebra yak quokka"] * 4, vocab_size=280)
    a = build_table(texts, tokenizer, "a", progress=False)
    with pytest.raises(FrequencyTableMismatchError, match="different tokenizers"):
        merge_tables([a, build_table(texts, other, "b", progress=False)])
    with pytest.raises(ValueError, match="different per-document caps"):
        merge_tables([a, build_table(texts, tokenizer, "b", max_tokens_per_doc=3, progress=False)])


# -------------------------------------------------------------------------------- resuming


def test_interrupted_build_resumes_without_recounting(tokenizer, tmp_path, monkeypatch):
    docs = _docs(40, seed=1)
    path = tmp_path / "corpus.jsonl"
    lines = [json.dumps(d) for d in docs]
    path.write_text("\n".join(lines[:33] + ["{broken"] + lines[33:]) + "\n", encoding="utf-8")
    encoded: list[str] = []
    real = table_build.batch_encoder

    def recording(tok):
        encode = real(tok)

        def wrapped(texts):
            encoded.extend(texts)
            return encode(texts)

        return wrapped

    monkeypatch.setattr(table_build, "batch_encoder", recording)
    output = tmp_path / "t.npz"
    kwargs = dict(output=output, docs_per_part=10, progress=False, batch_size=4)
    with pytest.raises(TableSourceError, match=r"corpus\.jsonl:34: not valid JSON"):
        build(local_sources([path]), tokenizer, **kwargs)
    parts = sorted((tmp_path / "t.npz.parts").glob("*.npz"))
    assert len(parts) == 3  # parts of documents 0-9, 10-19, 20-29 were finished and kept
    assert not output.exists()
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")  # the input is fixed
    encoded.clear()
    table = build(local_sources([path]), tokenizer, **kwargs)
    assert encoded == [d["text"] for d in docs[30:]]  # only the part in flight was redone
    np.testing.assert_array_equal(table.counts, _direct(tokenizer, [d["text"] for d in docs]))
    assert table.documents == 40
    assert FrequencyTable.load(output).total_tokens == table.total_tokens
    assert not (tmp_path / "t.npz.parts").exists()


@pytest.mark.parametrize(
    "change",
    ["rewritten", "one-doc-changed", "appended"],
)
def test_resume_after_the_input_changed_counts_the_new_content(tokenizer, tmp_path, monkeypatch, change):
    # An interrupted build (its parts kept), then the same file name with other content: the parts
    # of the old content must not be reused, those of unchanged documents are (not re-tokenized).
    docs = _docs(35)
    path = _write_jsonl(tmp_path / "corpus.jsonl", docs[:25])
    kwargs = dict(work_dir=tmp_path / "work", docs_per_part=10, progress=False, batch_size=4)
    build(local_sources([path]), tokenizer, keep_parts=True, **kwargs)
    new = {
        "rewritten": _docs(25, seed=7),
        "one-doc-changed": docs[:14] + [{"text": "quite another text"}] + docs[15:25],
        "appended": docs,
    }[change]
    _write_jsonl(path, new)
    encoded: list[str] = []
    real = table_build.batch_encoder
    monkeypatch.setattr(
        table_build, "batch_encoder", lambda tok: lambda texts: encoded.extend(texts) or real(tok)(texts)
    )
    table = build(local_sources([path]), tokenizer, **kwargs)
    texts = [d["text"] for d in new]
    np.testing.assert_array_equal(table.counts, _direct(tokenizer, texts))
    assert table.documents == len(new)
    first_changed = {"rewritten": 0, "one-doc-changed": 10, "appended": 20}[change]
    assert encoded == texts[first_changed:]  # the parts before the first change were reused


def test_resume_refuses_other_settings(tokenizer, tmp_path, corpus):
    work = tmp_path / "work"
    build(local_sources(corpus[0]), tokenizer, work_dir=work, progress=False, keep_parts=True)
    with pytest.raises(BuildResumeError, match="max_tokens_per_doc.*remove the directory"):
        build(local_sources(corpus[0]), tokenizer, work_dir=work, max_tokens_per_doc=5, progress=False)


def test_resume_with_a_limit_stops_at_the_same_place(tokenizer, tmp_path, corpus):
    work = tmp_path / "work"
    sources = local_sources(corpus[0])
    first = build(sources, tokenizer, work_dir=work, limits=BuildLimits(documents=33), docs_per_part=10,
                  progress=False, keep_parts=True)  # fmt: skip
    again = build(sources, tokenizer, work_dir=work, limits=BuildLimits(documents=33), docs_per_part=10,
                  progress=False, keep_parts=True)  # fmt: skip
    assert first.documents == again.documents == 33
    np.testing.assert_array_equal(first.counts, again.counts)
    np.testing.assert_array_equal(first.counts, _direct(tokenizer, [d["text"] for d in corpus[1][:33]]))


# ---------------------------------------------------------------------------------------- CLI


def test_cli_shards_then_merge_equals_one_build(tokenizer, tmp_path, corpus, capsys):
    tok_dir = tmp_path / "tok"
    tokenizer.save_pretrained(tok_dir)
    common = [
        "--tokenizer",
        str(tok_dir),
        "--input",
        str(tmp_path / "c*"),
        "--no-progress",
        "--max-tokens-per-doc",
        "7",
    ]
    assert cli.main(["build-table", *common, "--output", str(tmp_path / "whole.npz")]) == 0
    for i in range(3):
        assert cli.main(["build-table", *common, "--num-shards", "3", "--shard-index", str(i),
                         "--output", str(tmp_path / "shards" / f"s{i}.npz")]) == 0  # fmt: skip
    capsys.readouterr()
    assert cli.main(["merge-tables", str(tmp_path / "shards"), "--output", str(tmp_path / "merged.npz")]) == 0
    assert capsys.readouterr().out == f"{tmp_path / 'merged.npz'}\n"
    whole, merged = FrequencyTable.load(tmp_path / "whole.npz"), FrequencyTable.load(tmp_path / "merged.npz")
    np.testing.assert_array_equal(whole.counts, merged.counts)
    assert whole.documents == merged.documents == 75
    assert not list(tmp_path.glob("*.parts"))


def test_cli_merge_refuses_another_tokenizer(tokenizer, tmp_path, capsys):
    other = _tiny_tokenizer(["zebra yak quokka"] * 4, vocab_size=280)
    build_table(["a cat"], tokenizer, "a", progress=False).save(tmp_path / "a.npz")
    build_table(["a cat"], other, "b", progress=False).save(tmp_path / "b.npz")
    status = cli.main(
        ["merge-tables", str(tmp_path / "a.npz"), str(tmp_path / "b.npz"), "--output", str(tmp_path / "m.npz")]
    )
    assert status == 1
    assert "refused: cannot merge tables of different tokenizers" in capsys.readouterr().err
    assert not (tmp_path / "m.npz").exists()


def test_cli_build_errors(tmp_path, tokenizer, capsys):
    tok_dir = tmp_path / "tok"
    tokenizer.save_pretrained(tok_dir)
    assert (
        cli.main(
            [
                "build-table",
                "--tokenizer",
                str(tok_dir),
                "--input",
                str(tmp_path / "none.jsonl"),
                "--output",
                str(tmp_path / "x.npz"),
            ]
        )
        == 1
    )
    assert "corpus file" in capsys.readouterr().err
    assert cli.main(["build-table", "--tokenizer", str(tok_dir), "--input", "a.jsonl"]) == 1
    assert "--output TABLE.npz, --install" in capsys.readouterr().err
    assert (
        cli.main(["build-table", "--tokenizer", str(tok_dir), "--input", "a", "--hf-dataset", "x", "--output", "x.npz"])
        == 1
    )
    assert "one of them" in capsys.readouterr().err


# --------------------------------------------------------------------- the real tokenizer


@needs_smollm2
@pytest.mark.skipif(not PILE.is_file(), reason=f"needs the shared corpus at {PILE}")
def test_builder_ids_equal_the_default_tokenizer_call_on_the_pile_sample():
    """The fast path (tokenizers' encode_batch_fast) gives exactly the ids of tokenizer(text)."""
    from itertools import islice

    from transformers import AutoTokenizer

    from pdd_tasks.freq.tables import iter_jsonl_texts
    from pdd_tasks.tools.default_model import ensure_default_model

    tok = AutoTokenizer.from_pretrained(ensure_default_model())
    texts = [t[:4000] for t in islice(iter_jsonl_texts(PILE), 0, 11000, 50)]  # every domain
    assert batch_encoder(tok)(texts) == tok(texts, add_special_tokens=False)["input_ids"]


def test_docstring_examples_pass():
    import doctest

    from pdd_tasks.freq import sources as table_sources
    from pdd_tasks.tools.commands import build_table

    for module in (table_sources, build_table):
        result = doctest.testmod(module, verbose=False)
        assert result.attempted >= 1 and result.failed == 0, module.__name__
