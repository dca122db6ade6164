"""Tables found without a path: the cache keyed by tokenizer fingerprint, the shipped fallback, and
the message and results-JSON record of which table a run used (through the real lm_eval CLI)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from support.harness import read_results, run_lm_eval, tasks_path
from support.tables import tiny_tokenizer

from pdd_tasks.freq.tables import (
    FrequencyTable,
    build_table,
    cached_table_path,
    default_table_path,
    find_table,
    install_table,
    table_cache_dir,
    tokenizer_fingerprint,
)
from pdd_tasks.tools import cli


@pytest.fixture()
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("LM_EVAL_PDD_HOME", str(tmp_path / "home"))
    return tmp_path / "home"


@pytest.fixture(scope="module")
def tokenizer():
    return tiny_tokenizer(["the cat sat on the mat"] * 3, vocab_size=270)


def test_cache_dir_follows_the_default_model_convention(tmp_path, monkeypatch):
    monkeypatch.delenv("LM_EVAL_PDD_HOME", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert table_cache_dir() == tmp_path / "xdg" / "lm_eval_pdd" / "freq_tables"
    monkeypatch.setenv("LM_EVAL_PDD_HOME", str(tmp_path / "h"))
    assert table_cache_dir() == tmp_path / "h" / "freq_tables"
    with pytest.raises(ValueError, match="64-hex-digit"):
        cached_table_path("not-a-fingerprint")


def test_install_and_find(home, tokenizer):
    fingerprint = tokenizer_fingerprint(tokenizer)
    assert find_table(fingerprint) == (default_table_path(), "shipped default")
    assert find_table(None) == (default_table_path(), "shipped default")
    table = build_table(["the cat sat"], tokenizer, "one", progress=False)
    path = install_table(table)
    assert path == home / "freq_tables" / f"{fingerprint}.npz"
    assert find_table(fingerprint) == (path, "cache")
    install_table(table)  # the same table again: fine
    other = build_table(["the mat"], tokenizer, "two", progress=False)
    with pytest.raises(FileExistsError, match="already installed.*--force"):
        install_table(other)
    install_table(other, force=True)
    np.testing.assert_array_equal(FrequencyTable.load(path).counts, other.counts)


def test_cli_build_install_and_list(home, tokenizer, tmp_path, capsys):
    tok_dir = tmp_path / "tok"
    tokenizer.save_pretrained(tok_dir)
    corpus = tmp_path / "c.jsonl"
    corpus.write_text(json.dumps({"text": "the cat sat on the mat"}) + "\n", encoding="utf-8")
    assert (
        cli.main(["build-table", "--tokenizer", str(tok_dir), "--input", str(corpus), "--install", "--no-progress"])
        == 0
    )
    cached = home / "freq_tables" / f"{tokenizer_fingerprint(tokenizer)}.npz"
    assert capsys.readouterr().out == f"{cached}\n"
    assert FrequencyTable.load(cached).documents == 1
    assert cli.main(["list-tables"]) == 0
    listed = capsys.readouterr().out
    assert cached.name in listed and "counted in a corpus" in listed and str(default_table_path()) in listed
    other = tmp_path / "other.npz"
    build_table(["mat mat"], tokenizer, "other", progress=False).save(other)
    assert cli.main(["install-table", str(other)]) == 1
    assert "--force" in capsys.readouterr().err
    assert cli.main(["install-table", str(other), "--force"]) == 0
    assert capsys.readouterr().out == f"{cached}\n"


def test_a_run_finds_the_installed_table_and_records_it(tiny_model, tiny_table, tmp_path, monkeypatch):
    """No freq_table given: the shipped table does not fit the tiny model, the installed one does."""
    home = tmp_path / "home"
    monkeypatch.setenv("LM_EVAL_PDD_HOME", str(home))
    args = [
        "--model", "hf", "--model_args", f"pretrained={tiny_model},dtype=float32", "--device", "cpu",
        "--include_path", tasks_path(), "--tasks", "pdd_wikimia_32", "--limit", "6", "--batch_size", "4",
    ]  # fmt: skip
    refused = run_lm_eval([*args, "--output_path", str(tmp_path / "refused")], cwd=tmp_path, check=False)
    assert refused.returncode != 0 and "--install" in refused.stderr
    cached = install_table(tiny_table)
    process = run_lm_eval([*args, "--output_path", str(tmp_path / "out")], cwd=tmp_path)
    used = read_results(tmp_path / "out")["configs"]["pdd_wikimia_32"]["metadata"]["freq_table_used"]
    assert used["path"] == str(cached) and used["source"] == "cache" and used["counts_from"] == "corpus"
    assert f"DC-PDD reference table {cached} (cache)" in process.stderr
