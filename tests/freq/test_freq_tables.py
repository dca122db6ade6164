"""pdd_tasks.freq.tables: table identity, file format, building, and the shipped default table."""

from __future__ import annotations

import gzip
import hashlib
import json
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from support.tables import PILE, PILE_SHA256, needs_smollm2
from support.tables import tiny_tokenizer as _tiny_tokenizer

from pdd_metrics.reference import log_reference_frequencies
from pdd_tasks.freq.tables import (
    DEFAULT_TABLE_FILENAME,
    FrequencyTable,
    FrequencyTableError,
    FrequencyTableMismatchError,
    build_table,
    default_table_path,
    iter_jsonl_texts,
    tokenizer_fingerprint,
)
from pdd_tasks.tools import cli


SENTENCES = [
    "The cat sat on the mat.",
    "A dog ate the bone in the garden.",
    "The quick brown fox jumps over the lazy dog.",
    "Cats and dogs are friends; the mat is warm.",
    "Über naïve café: ünïcödé text also counts.",
]


@pytest.fixture(scope="module")
def tiny_tokenizer():
    return _tiny_tokenizer(SENTENCES)


@pytest.fixture(scope="module")
def other_tokenizer():
    return _tiny_tokenizer(["completely different words here", "zebra yak quokka"] * 2, 280)


def _direct_counts(tokenizer, texts, cap):
    counter = Counter()
    for text in texts:
        ids = tokenizer(text, add_special_tokens=False).input_ids
        counter.update(ids if cap is None else ids[:cap])
    return np.array([counter.get(v, 0) for v in range(len(tokenizer))], dtype=np.int64)


def _table(**changes) -> FrequencyTable:
    fields = dict(
        counts=np.array([5, 0, 3, 2], dtype=np.int64),
        tokenizer_name="tiny",
        tokenizer_fingerprint="ab" * 32,
        tokenizer_vocab_size=4,
        total_tokens=10,
        documents=3,
        max_tokens_per_doc=1024,
        corpus="hand-made",
    )
    fields.update(changes)
    return FrequencyTable(**fields)


# ------------------------------------------------------------------------------- fingerprints


class _Vocab:
    def __init__(self, vocab):
        self._vocab = vocab

    def get_vocab(self):
        return dict(self._vocab)


def test_fingerprint_is_the_sha256_of_the_sorted_json_pairs():
    vocab = {"b": 1, "a": 0, "é": 2}
    expected = hashlib.sha256(
        json.dumps([["a", 0], ["b", 1], ["é", 2]], ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    ).hexdigest()
    assert tokenizer_fingerprint(_Vocab(vocab)) == expected


def test_fingerprint_ignores_dict_order_but_not_the_mapping():
    a = _Vocab({"a": 0, "b": 1, "c": 2})
    same = _Vocab({"c": 2, "a": 0, "b": 1})
    swapped = _Vocab({"a": 1, "b": 0, "c": 2})
    larger = _Vocab({"a": 0, "b": 1, "c": 2, "d": 3})
    assert tokenizer_fingerprint(a) == tokenizer_fingerprint(same)
    assert tokenizer_fingerprint(a) != tokenizer_fingerprint(swapped)
    assert tokenizer_fingerprint(a) != tokenizer_fingerprint(larger)


def test_fingerprint_of_real_tokenizers(tiny_tokenizer, other_tokenizer, tmp_path):
    fp = tokenizer_fingerprint(tiny_tokenizer)
    assert len(fp) == 64 and int(fp, 16) >= 0
    tiny_tokenizer.save_pretrained(tmp_path / "tok")
    from transformers import AutoTokenizer

    reloaded = AutoTokenizer.from_pretrained(tmp_path / "tok")
    assert tokenizer_fingerprint(reloaded) == fp  # same mapping, different object and path
    assert tokenizer_fingerprint(other_tokenizer) != fp


# ------------------------------------------------------------------------------ table object


def test_table_validates_its_fields():
    with pytest.raises(ValueError, match="total_tokens=11 but counts sum to 10"):
        _table(total_tokens=11)
    with pytest.raises(ValueError, match="tokenizer_vocab_size=5"):
        _table(tokenizer_vocab_size=5)
    with pytest.raises(ValueError, match="format_version 2"):
        _table(format_version=2)


def test_table_counts_are_read_only_copies():
    source = np.array([5, 0, 3, 2])
    table = _table(counts=source)
    source[0] = 100
    assert table.counts[0] == 5
    assert table.counts.dtype == np.int64
    with pytest.raises(ValueError):
        table.counts[0] = 1


def test_log_frequencies_delegate_with_padding():
    table = _table()
    np.testing.assert_array_equal(table.log_frequencies(6), log_reference_frequencies(table.counts, 6))
    np.testing.assert_allclose(np.exp(table.log_frequencies(6)), np.array([6, 1, 4, 3, 1, 1]) / 16)


def test_coverage():
    assert _table().coverage == pytest.approx(0.75)


# ------------------------------------------------------------------------------------ file I/O


@pytest.mark.parametrize("cap", [1024, None])
def test_save_load_round_trip(tmp_path, cap):
    rng = np.random.default_rng(0)
    counts = rng.integers(0, 2**40, size=1000, dtype=np.int64)  # beyond int32
    table = _table(
        counts=counts,
        tokenizer_vocab_size=1000,
        total_tokens=int(counts.sum()),
        max_tokens_per_doc=cap,
        corpus='ünïcödé corpus, "quoted"',
    )
    path = table.save(tmp_path / "sub" / "t.npz")
    assert path == tmp_path / "sub" / "t.npz" and path.is_file()
    loaded = FrequencyTable.load(path)
    assert loaded.counts.dtype == np.int64
    assert loaded.counts.tobytes() == table.counts.tobytes()
    assert loaded.meta == table.meta
    assert loaded.max_tokens_per_doc == cap
    # plain npz without pickled objects
    with np.load(path, allow_pickle=False) as data:
        assert sorted(data.files) == ["counts", "meta"]
    assert not list((tmp_path / "sub").glob("*.tmp"))


def test_save_keeps_the_exact_file_name(tmp_path):
    path = _table().save(tmp_path / "table.bin")
    assert path.is_file() and not (tmp_path / "table.bin.npz").exists()
    assert FrequencyTable.load(path).total_tokens == 10


def test_load_missing_file(tmp_path):
    with pytest.raises(FileNotFoundError, match="nope.npz.*lm-eval-pdd build-table"):
        FrequencyTable.load(tmp_path / "nope.npz")


def test_load_rejects_a_text_file(tmp_path):
    path = tmp_path / "notes.npz"
    path.write_text("hello, not a table\n")
    with pytest.raises(FrequencyTableError, match="not an lm-eval-pdd frequency table"):
        FrequencyTable.load(path)


def test_load_rejects_another_npz(tmp_path):
    path = tmp_path / "other.npz"
    np.savez(path, weights=np.zeros(3))
    with pytest.raises(FrequencyTableError, match=r"not an lm-eval-pdd frequency table.*weights"):
        FrequencyTable.load(path)


def test_load_rejects_an_npz_with_foreign_meta(tmp_path):
    path = tmp_path / "other.npz"
    np.savez(path, counts=np.zeros(3, dtype=np.int64), meta=np.array(json.dumps({"x": 1})))
    with pytest.raises(FrequencyTableError, match="kind"):
        FrequencyTable.load(path)


def test_load_rejects_an_unknown_format_version(tmp_path):
    path = _table().save(tmp_path / "t.npz")
    with np.load(path) as data:
        counts, meta = data["counts"], json.loads(str(data["meta"][()]))
    meta["format_version"] = 2
    np.savez_compressed(path, counts=counts, meta=np.array(json.dumps(meta)))
    with pytest.raises(FrequencyTableError, match="format_version 2.*reads format_version 1"):
        FrequencyTable.load(path)


# -------------------------------------------------------------------------------- check_matches


def test_check_matches_accepts_the_same_tokenizer(tiny_tokenizer):
    table = build_table(SENTENCES, tiny_tokenizer, corpus="s", progress=False)
    table.check_matches(tokenizer_fingerprint(tiny_tokenizer), "tiny-model")  # no error


def test_check_matches_refuses_another_tokenizer(tiny_tokenizer, other_tokenizer):
    table = build_table(SENTENCES, tiny_tokenizer, corpus="s", progress=False, tokenizer_name="tiny-bpe")
    with pytest.raises(FrequencyTableMismatchError) as info:
        table.check_matches(tokenizer_fingerprint(other_tokenizer), "org/other-model")
    assert isinstance(info.value, ValueError)
    message = str(info.value)
    assert "'tiny-bpe'" in message  # the table's tokenizer
    assert "'org/other-model'" in message  # the model
    assert table.tokenizer_fingerprint[:16] in message
    assert (
        "lm-eval-pdd build-table --tokenizer org/other-model --input <corpus.jsonl.gz> --output <table.npz>" in message
    )
    assert '--metadata \'{"freq_table": "<table.npz>"}\'' in message


# ----------------------------------------------------------------------------------- building


def test_build_counts_match_a_direct_count(tiny_tokenizer):
    table = build_table(SENTENCES, tiny_tokenizer, corpus="five sentences", progress=False)
    expected = _direct_counts(tiny_tokenizer, SENTENCES, None)
    np.testing.assert_array_equal(table.counts, expected)
    assert table.total_tokens == int(expected.sum()) > len(SENTENCES)
    assert table.documents == len(SENTENCES)
    assert table.tokenizer_vocab_size == len(tiny_tokenizer)
    assert table.tokenizer_fingerprint == tokenizer_fingerprint(tiny_tokenizer)
    assert table.corpus == "five sentences"
    assert table.max_tokens_per_doc == 1024
    # text tokens only: no BOS/EOS added
    assert table.counts[tiny_tokenizer.convert_tokens_to_ids("<|endoftext|>")] == 0


def test_build_caps_tokens_per_document(tiny_tokenizer):
    lengths = [len(tiny_tokenizer(t, add_special_tokens=False).input_ids) for t in SENTENCES]
    assert max(lengths) > 5  # the cap below actually cuts
    table = build_table(SENTENCES, tiny_tokenizer, corpus="s", max_tokens_per_doc=5, progress=False, batch_size=2)
    np.testing.assert_array_equal(table.counts, _direct_counts(tiny_tokenizer, SENTENCES, 5))
    assert table.total_tokens == sum(min(n, 5) for n in lengths)
    assert table.max_tokens_per_doc == 5


def test_build_on_halves_sums_to_the_whole(tiny_tokenizer):
    whole = build_table(SENTENCES, tiny_tokenizer, corpus="w", max_tokens_per_doc=6, progress=False)
    first = build_table(SENTENCES[:2], tiny_tokenizer, corpus="a", max_tokens_per_doc=6, progress=False)
    second = build_table(iter(SENTENCES[2:]), tiny_tokenizer, corpus="b", max_tokens_per_doc=6, progress=False)
    np.testing.assert_array_equal(first.counts + second.counts, whole.counts)
    assert first.documents + second.documents == whole.documents


def test_build_with_progress_bar(tiny_tokenizer, capsys):
    table = build_table(SENTENCES, tiny_tokenizer, corpus="s", progress=True, batch_size=2)
    captured = capsys.readouterr()
    assert captured.out == ""
    assert "tok_per_s" in captured.err
    assert table.documents == 5


# ------------------------------------------------------------------------------ JSONL reading


def test_iter_jsonl_texts_plain_and_gzip(tmp_path):
    lines = [json.dumps({"text": t, "n": i}) for i, t in enumerate(SENTENCES)]
    plain = tmp_path / "c.jsonl"
    plain.write_text("\n".join(lines[:2]) + "\n\n" + "\n".join(lines[2:]) + "\n", encoding="utf-8")
    packed = tmp_path / "c.jsonl.gz"
    with gzip.open(packed, "wt", encoding="utf-8") as fh:
        fh.write("\n".join(lines) + "\n")
    assert list(iter_jsonl_texts(plain)) == SENTENCES
    assert list(iter_jsonl_texts(packed)) == SENTENCES


def test_iter_jsonl_texts_names_the_line_lacking_the_field(tmp_path):
    path = tmp_path / "c.jsonl"
    path.write_text('{"text": "a"}\n{"text": "b"}\n{"body": "c"}\n', encoding="utf-8")
    texts = iter_jsonl_texts(path)
    assert next(texts) == "a"
    with pytest.raises(ValueError, match=r"c\.jsonl:3: no field 'text' \(found \['body'\]\)"):
        list(texts)
    with pytest.raises(ValueError, match=r":1: no field 'body'"):
        list(iter_jsonl_texts(path, text_field="body"))


def test_iter_jsonl_texts_rejects_bad_json_and_non_strings(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"text": "a"}\nnot json\n', encoding="utf-8")
    with pytest.raises(ValueError, match=r":2: not valid JSON"):
        list(iter_jsonl_texts(bad))
    num = tmp_path / "num.jsonl"
    num.write_text('{"text": 5}\n', encoding="utf-8")
    with pytest.raises(ValueError, match=r":1: field 'text' is int, expected str"):
        list(iter_jsonl_texts(num))


# ------------------------------------------------------------------------------------------ CLI


def test_cli_tasks_path_prints_an_existing_directory(capsys):
    assert cli.main(["tasks-path"]) == 0
    out = capsys.readouterr().out
    assert out.endswith("\n") and out.count("\n") == 1
    path = Path(out.strip())
    assert path.is_dir()
    assert any(path.rglob("*.yaml"))


def test_cli_build_and_inspect_a_table(tiny_tokenizer, tmp_path, capsys):
    tok_dir = tmp_path / "tok"
    tiny_tokenizer.save_pretrained(tok_dir)
    corpus = tmp_path / "corpus.jsonl.gz"
    with gzip.open(corpus, "wt", encoding="utf-8") as fh:
        for text in SENTENCES:
            fh.write(json.dumps({"body": text}) + "\n")
    out_path = tmp_path / "table.npz"
    status = cli.main(
        [
            "build-table",
            "--tokenizer", str(tok_dir),
            "--input", str(corpus),
            "--text-field", "body",
            "--max-tokens-per-doc", "5",
            "--limit-docs", "4",
            "--output", str(out_path),
            "--no-progress",
        ]
    )  # fmt: skip
    assert status == 0
    assert capsys.readouterr().out == f"{out_path}\n"
    table = FrequencyTable.load(out_path)
    np.testing.assert_array_equal(table.counts, _direct_counts(tiny_tokenizer, SENTENCES[:4], 5))
    assert table.documents == 4 and table.max_tokens_per_doc == 5
    assert table.tokenizer_name == str(tok_dir)
    assert table.corpus == f"{corpus} (limited to the first 4 documents)"

    assert cli.main(["inspect-table", str(out_path), "--tokenizer", str(tok_dir), "--top", "3"]) == 0
    out = capsys.readouterr().out
    assert f"total tokens: {table.total_tokens}\n" in out
    assert "documents: 4\n" in out
    assert "(matches)" in out
    top_id = int(np.argmax(table.counts))
    assert repr(tiny_tokenizer.decode([top_id])) in out


def test_cli_inspect_rejects_a_non_table(tmp_path, capsys):
    path = tmp_path / "x.npz"
    path.write_text("junk")
    assert cli.main(["inspect-table", str(path)]) == 1
    assert "not an lm-eval-pdd frequency table" in capsys.readouterr().err


# --------------------------------------------------------------------------- shipped table


def test_default_table_path_is_the_shipped_file():
    path = default_table_path()
    assert path.name == DEFAULT_TABLE_FILENAME
    assert path.is_file()
    assert path.parent.name == "freq_tables"
    assert (path.parent / "README.md").is_file()


def test_shipped_table_identity():
    table = FrequencyTable.load(default_table_path())
    assert table.documents == 10959
    assert table.max_tokens_per_doc == 1024
    assert table.tokenizer_vocab_size == 49152
    assert 0 < table.total_tokens <= 10959 * 1024
    assert table.total_tokens == int(table.counts.sum())
    assert PILE_SHA256 in table.corpus
    readme = (default_table_path().parent / "README.md").read_text(encoding="utf-8")
    assert str(table.total_tokens) in readme.replace(",", "")
    assert table.tokenizer_fingerprint in readme
    assert PILE_SHA256 in readme


def test_cli_inspect_shipped_table_prints_total_tokens(capsys):
    table = FrequencyTable.load(default_table_path())
    assert cli.main(["inspect-table", str(default_table_path()), "--top", "5"]) == 0
    out = capsys.readouterr().out
    assert f"total tokens: {table.total_tokens}\n" in out
    assert f"tokenizer fingerprint: {table.tokenizer_fingerprint}\n" in out
    assert out.count("\n") >= 10 + 1 + 5


@pytest.mark.skipif(not PILE.is_file(), reason=f"needs the shared corpus at {PILE}")
def test_shipped_table_was_built_from_the_shared_corpus():
    digest = hashlib.sha256(PILE.read_bytes()).hexdigest()
    assert digest == PILE_SHA256
    docs = sum(1 for _ in iter_jsonl_texts(PILE))
    assert FrequencyTable.load(default_table_path()).documents == docs


@needs_smollm2
def test_shipped_table_matches_the_default_model_tokenizer():
    from transformers import AutoTokenizer

    from pdd_tasks.tools.default_model import ensure_default_model

    tokenizer = AutoTokenizer.from_pretrained(ensure_default_model())
    table = FrequencyTable.load(default_table_path())
    assert table.tokenizer_vocab_size == len(tokenizer)
    table.check_matches(tokenizer_fingerprint(tokenizer), "default model")  # no error
    assert table.tokenizer_fingerprint == tokenizer_fingerprint(tokenizer)
    # the most frequent ids decode to ordinary text pieces, not special tokens
    top = np.argsort(-table.counts)[:10]
    assert not set(top.tolist()) & set(tokenizer.all_special_ids)
