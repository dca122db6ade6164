"""Tables without a corpus: word-frequency estimates and the uniform table, clearly labelled."""

from __future__ import annotations

import numpy as np
import pytest
from support.tables import needs_smollm2, tiny_tokenizer

from pdd_tasks.freq.estimates import estimate_table, jieba_word_counts, uniform_table, wordfreq_word_counts
from pdd_tasks.freq.tables import FrequencyTable, merge_tables
from pdd_tasks.tools import cli


WORDS = ["the", "cat", "sat", "on", "mat", "naïve", "café"]


@pytest.fixture(scope="module")
def tokenizer():
    return tiny_tokenizer(["the cat sat on the mat", "naïve café"] * 3, vocab_size=290)


def test_estimate_counts_each_token_of_a_word_times_its_count(tokenizer):
    pairs = [(w, 10 * (i + 1)) for i, w in enumerate(WORDS)]
    table = estimate_table(pairs, tokenizer, "hand-made list")
    expected = np.zeros(len(tokenizer), dtype=np.int64)
    for word, count in pairs:  # byte-level BPE: the word in running text is " word"
        for tid in tokenizer(" " + word, add_special_tokens=False).input_ids:
            expected[tid] += count
    np.testing.assert_array_equal(table.counts, expected)
    assert table.counts_from == "estimate" and table.is_estimate
    assert table.corpus.startswith("ESTIMATE from a word-frequency list, not corpus counts: hand-made list")
    assert table.documents == 0 and table.max_tokens_per_doc is None


def test_estimate_of_chinese_words_counts_the_word_between_commas(tokenizer):
    table = estimate_table([("猫", 5)], tokenizer, "zh", language="zh")
    ids = tokenizer("猫", add_special_tokens=False).input_ids
    assert table.total_tokens == 5 * len(ids)
    assert "'，<word>，'" in table.corpus


def test_wordfreq_list_gives_an_english_estimate(tokenizer):
    pairs, description = wordfreq_word_counts("en", "small", scale=1e6)
    words = dict(pairs)
    assert words["the"] > words["cat"] > 0 and len(pairs) > 10_000
    assert "wordfreq" in description and "'en'" in description
    table = estimate_table(pairs, tokenizer, description)
    the = tokenizer(" the", add_special_tokens=False).input_ids
    assert len(the) == 1 and table.counts[the[0]] >= words["the"]
    assert table.total_tokens >= sum(words.values())  # every word gives at least one token
    with pytest.raises(ValueError, match="no 'best' list for language 'xx'"):
        wordfreq_word_counts("xx")


def test_jieba_dictionary(tmp_path):
    pairs, description = jieba_word_counts()
    assert len(pairs) > 300_000 and "jieba" in description
    path = tmp_path / "dict.txt"
    path.write_text("猫 12 n\n狗 3\n\n", encoding="utf-8")
    assert jieba_word_counts(path)[0] == [("猫", 12), ("狗", 3)]
    path.write_text("猫 many n\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"dict\.txt:1: expected 'word count \[tag\]'"):
        jieba_word_counts(path)


def test_uniform_table_gives_equal_frequencies(tokenizer):
    table = uniform_table(tokenizer)
    assert table.counts_from == "uniform" and table.corpus.startswith("UNIFORM")
    log_f = table.log_frequencies(len(tokenizer))
    np.testing.assert_allclose(log_f, np.full(len(tokenizer), -np.log(len(tokenizer))), rtol=0, atol=1e-12)


def test_estimates_survive_save_load_and_refuse_merging_with_counts(tokenizer, tmp_path):
    estimate = estimate_table([("cat", 3)], tokenizer, "x")
    loaded = FrequencyTable.load(estimate.save(tmp_path / "e.npz"))
    assert loaded.counts_from == "estimate" and loaded.corpus == estimate.corpus
    with pytest.raises(ValueError, match="kind"):
        merge_tables([estimate, uniform_table(tokenizer).replace(max_tokens_per_doc=None)])


def test_cli_estimate_and_inspect_label_the_estimate(tokenizer, tmp_path, capsys):
    tok_dir = tmp_path / "tok"
    tokenizer.save_pretrained(tok_dir)
    out = tmp_path / "wf.npz"
    assert cli.main(["estimate-table", "--tokenizer", str(tok_dir), "--from", "wordfreq", "--wordlist", "small",
                     "--output", str(out)]) == 0  # fmt: skip
    assert capsys.readouterr().out == f"{out}\n"
    assert cli.main(["inspect-table", str(out), "--top", "3"]) == 0
    shown = capsys.readouterr().out
    assert "counts from: ESTIMATE (not counted in a corpus" in shown
    assert "corpus: ESTIMATE from a word-frequency list" in shown
    assert shown.rstrip().splitlines()[-1].startswith("NOTE: ESTIMATE")
    assert (
        cli.main(
            ["estimate-table", "--tokenizer", str(tok_dir), "--from", "uniform", "--output", str(tmp_path / "u.npz")]
        )
        == 0
    )
    capsys.readouterr()
    assert cli.main(["inspect-table", str(tmp_path / "u.npz")]) == 0
    assert "counts from: UNIFORM" in capsys.readouterr().out


def test_old_tables_without_the_new_fields_read_as_corpus_counts(tmp_path):
    """Backward compatibility: the shipped table predates counts_from/text_bytes."""
    import json

    from pdd_tasks.freq.tables import default_table_path

    with np.load(default_table_path()) as data:
        meta = json.loads(str(data["meta"][()]))
    assert "counts_from" not in meta
    table = FrequencyTable.load(default_table_path())
    assert table.counts_from == "corpus" and table.text_bytes is None and not table.is_estimate


@needs_smollm2
def test_english_estimate_for_the_default_tokenizer():
    from transformers import AutoTokenizer

    from pdd_tasks.tools.default_model import ensure_default_model

    tok = AutoTokenizer.from_pretrained(ensure_default_model())
    pairs, description = wordfreq_word_counts("en", "small")
    table = estimate_table(pairs, tok, description)
    top = [tok.decode([int(i)]) for i in np.argsort(-table.counts)[:5]]
    assert " the" in top
    assert table.coverage < 0.5  # words only: far fewer ids than a corpus table
