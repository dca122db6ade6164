"""The bad-input suite: bad, odd or hostile input through the real command lines (``lm_eval``,
``lm-eval-pdd``), each case asserting what the user sees: a message naming the problem and the fix
(and no traceback), or the documented behaviour. Issue 13.

Cases that need a model use the tiny GPT-2 of ``conftest.py``; nothing here needs the network.
"""

from __future__ import annotations

import gzip
import json
import zlib
from pathlib import Path

import numpy as np
import pytest
from support.bad_input import MEMBERS, NON_MEMBERS, assert_refused, lm_eval_custom, rows, run_pdd, write_jsonl
from support.harness import read_results, read_samples, run_lm_eval, tasks_path, wikimia_rows
from support.models import build_tiny_model


def labelled(n: int = 3) -> list[dict]:
    return rows(*[(text, 1) for text in MEMBERS[:n]], *[(text, 0) for text in NON_MEMBERS[:n]])


@pytest.fixture
def table_args(tiny_table):
    return {"freq_table": str(tiny_table)}


# -- lm_eval: task settings (refused while lm-eval loads the task, before any model work) ----------


@pytest.mark.parametrize(
    "metadata, fragments",
    [
        ({"mink": 0.1}, ["metadata key 'mink' is not a setting", "did you mean 'min_k'?"]),
        ({"dcpdd_A": 10}, ["metadata key 'dcpdd_A'", "did you mean 'dcpdd_a'?"]),
        ({"lowercse": False}, ["did you mean 'lowercase'?"]),
        ({"min_k": True}, ["min_k=True: expected a fraction in (0, 1]"]),
        ({"dcpdd_a": True}, ["dcpdd_a=True: expected a positive number"]),
        ({"topk_logprobs": 2.5}, ["topk_logprobs=2.5: expected a whole number"]),
        ({"target_fpr": 1.5}, ["target_fpr=1.5: expected a rate in (0, 1)"]),
        ({"target_fdr": 1}, ["target_fdr=1: expected a rate in (0, 1)", "e.g. 0.1"]),
        ({"label_field": "lable"}, ["label_field='lable', but no row", "did you mean 'label'?"]),
        ({"data_files": 3}, ["data_files=3: expected a file path or a list of file paths"]),
    ],
    ids=[
        "mink",
        "dcpdd_A",
        "lowercse",
        "bool-min_k",
        "bool-dcpdd_a",
        "float-topk",
        "target_fpr",
        "target_fdr",
        "label_field",
        "int-path",
    ],
)
def test_a_bad_setting_is_refused_with_the_fix(tiny_model, table_args, tmp_path, metadata, fragments):
    data = write_jsonl(tmp_path / "t.jsonl", labelled())
    process = lm_eval_custom(tiny_model, data, tmp_path / "out", {**table_args, **metadata}, check=False)
    assert_refused(process, *fragments)
    assert "Scoring" not in process.stderr


def test_no_data_file_names_the_metadata_key(tiny_model, tmp_path):
    process = lm_eval_custom(tiny_model, None, tmp_path / "out", {}, check=False)
    assert_refused(process, "pdd_custom needs a data file", '"data_files": "texts.jsonl"')


def test_missing_data_file_is_named(tiny_model, tmp_path):
    process = lm_eval_custom(tiny_model, tmp_path / "nope.jsonl", tmp_path / "out", {}, check=False)
    assert_refused(process, "Data file not found", "nope.jsonl")


def test_benchmark_offline_without_local_copy_is_a_message_not_a_traceback(tiny_model, tmp_path):
    # The test: every pdd task, offline; the first benchmark without a local copy stops the run.
    process = run_lm_eval(
        ["--model", "hf", "--model_args", f"pretrained={tiny_model}", "--device", "cpu", "--include_path",
         tasks_path(), "--tasks", "pdd_*", "--limit", "2", "--output_path", str(tmp_path / "out")],
        cwd=tmp_path,
        check=False,
    )  # fmt: skip
    assert_refused(process, "DatasetError", "To run offline", '"data_source": "<dir>"', "LM_EVAL_PDD_TRACEBACK=1")
    assert process.stderr.count("\n  File ") == 0  # no traceback frames at all


def test_the_traceback_is_there_when_asked_for(tiny_model, tmp_path, monkeypatch):
    args = ["--model", "hf", "--model_args", f"pretrained={tiny_model}", "--device", "cpu", "--include_path",
            tasks_path(), "--tasks", "pdd_custom", "--metadata", json.dumps({"mink": 1})]  # fmt: skip
    process = run_lm_eval(args, cwd=tmp_path, check=False)
    assert_refused(process, "did you mean 'min_k'?")
    monkeypatch.setenv("LM_EVAL_PDD_TRACEBACK", "1")
    env_run = run_lm_eval(args, cwd=tmp_path, check=False)
    assert env_run.returncode != 0 and "Traceback" in env_run.stderr and "SettingError" in env_run.stderr


# -- lm_eval: data files --------------------------------------------------------------------------


def test_a_byte_that_is_not_utf8_is_named_with_file_and_line(tiny_model, tmp_path):
    data = tmp_path / "latin1.jsonl"
    lines = [json.dumps(row).encode() for row in labelled()]
    lines[2] = '{"text": "caf\u00e9 au lait", "label": 1}'.encode("latin-1")
    data.write_bytes(b"\n".join(lines) + b"\n")
    process = lm_eval_custom(tiny_model, data, tmp_path / "out", {}, check=False)
    assert_refused(process, "latin1.jsonl:3: byte 0xe9", "is not UTF-8", "iconv")


def test_a_truncated_gzip_file_is_named(tiny_model, tmp_path):
    whole = gzip.compress(b"".join(json.dumps(row).encode() + b"\n" for row in labelled(6) * 20))
    data = tmp_path / "cut.jsonl.gz"
    data.write_bytes(whole[: len(whole) // 2])
    process = lm_eval_custom(tiny_model, data, tmp_path / "out", {}, check=False)
    assert_refused(process, "cut.jsonl.gz: the gzip stream ends early", "Download or compress it again")


def test_a_line_that_is_not_json_is_named(tiny_model, tmp_path):
    data = tmp_path / "t.jsonl"
    data.write_text("".join(json.dumps(row) + "\n" for row in labelled()) + "{'text': 'single quotes'}\n")
    process = lm_eval_custom(tiny_model, data, tmp_path / "out", {}, check=False)
    assert_refused(process, "t.jsonl:7: not valid JSON")


def test_a_lone_surrogate_in_a_text_is_named_with_file_and_row(tiny_model, tmp_path):
    # json.dumps writes the lone surrogate as the escape "\ud800", which json.loads reads back as is.
    data = write_jsonl(tmp_path / "t.jsonl", labelled() + rows(("a text cut inside an emoji \ud800", 0)))
    assert "\\ud800" in data.read_text()
    process = lm_eval_custom(tiny_model, data, tmp_path / "out", {}, check=False)
    assert_refused(process, "t.jsonl, row 6", "lone surrogate '\\ud800' at character 27", "Fix the escape or remove")


def test_the_same_text_as_member_and_non_member_is_refused(tiny_model, table_args, tmp_path):
    data = write_jsonl(tmp_path / "t.jsonl", labelled() + rows((MEMBERS[0], 0)))
    process = lm_eval_custom(tiny_model, data, tmp_path / "out", table_args, check=False)
    assert_refused(process, "rows 0 and 6 hold the same text with label 1 and 0", "Fix the label of one of them")


def test_a_number_in_the_text_field_of_a_json_file_is_named(tiny_model, tmp_path):
    data = write_jsonl(tmp_path / "t.jsonl", labelled() + [{"text": 12345, "label": 0}])
    process = lm_eval_custom(tiny_model, data, tmp_path / "out", {}, check=False)
    assert_refused(process, "row 6: field 'text' holds int 12345, not a text", "text_field")


def test_data_files_given_as_a_list_are_read_in_order_and_an_all_numeric_csv_column_stays_text(
    tiny_model, table_args, tmp_path
):
    # Documented: data_files may be a list; CSV values are read as written (a column of numbers
    # is text, labels "0"/"1" are labels). An unknown key far from any setting is a warning only.
    first = write_jsonl(tmp_path / "a.jsonl", labelled(2))
    csv = tmp_path / "b.csv"
    csv.write_text("text,label\n31415926535,1\n27182818284,0\n")
    out = tmp_path / "out"
    process = lm_eval_custom(
        tiny_model, [first, csv], out, {**table_args, "note": "a run note"}, extra=["--log_samples"]
    )
    texts = [sample["doc"]["text"] for sample in read_samples(out, "pdd_custom")]
    assert sorted(texts) == sorted(MEMBERS[:2] + NON_MEMBERS[:2] + ["31415926535", "27182818284"])
    warning = next(line for line in process.stderr.splitlines() if "are neither settings of this task" in line)
    assert "metadata key(s) 'note' are neither settings of this task nor known model arguments" in warning
    assert "'dtype'" not in warning and "'pretrained'" not in warning  # model_args never trip it


def test_a_text_that_is_only_the_start_token_is_named(tiny_model, table_args, tmp_path):
    data = write_jsonl(tmp_path / "t.jsonl", labelled() + rows(("<|endoftext|>", 0)))
    process = lm_eval_custom(tiny_model, data, tmp_path / "out", table_args, check=False)
    assert_refused(process, "is only the model's start token", "Remove the row")


# -- lm_eval: numbers that must not be silent ---------------------------------------------------------


def test_a_handful_of_texts_gives_auc_with_a_word_on_sample_size(tiny_model, table_args, tmp_path):
    data = write_jsonl(tmp_path / "t.jsonl", labelled(1))
    out = tmp_path / "out"
    process = lm_eval_custom(tiny_model, data, out, table_args)
    assert "AUC from 1 members and 1 non-members only: its standard error is about 0.50" in process.stderr
    assert "TPR@FPR<5%: with 1 non-members the smallest non-zero FPR is 1/1" in process.stderr
    assert "no false positive fits the budget" in process.stderr
    assert "pdd_custom" in read_results(out)["results"]


def test_a_table_counted_from_nothing_is_refused_at_use(tiny_model, tmp_path):
    from pdd_tasks.freq.tables import FrequencyTable

    table = FrequencyTable.load(build_empty_table(tiny_model, tmp_path))
    assert table.total_tokens == 0
    data = write_jsonl(tmp_path / "t.jsonl", labelled())
    process = lm_eval_custom(
        tiny_model, data, tmp_path / "out", {"freq_table": str(tmp_path / "empty.npz")}, check=False
    )
    assert_refused(process, "EmptyFrequencyTableError", "counted no token at all", "Build it again")


@pytest.mark.parametrize("where", ["missing.npz", "a-folder"], ids=["missing-file", "folder"])
def test_a_freq_table_that_names_no_file_is_refused_before_scoring(tiny_model, tmp_path, where):
    (tmp_path / "a-folder").mkdir()
    data = write_jsonl(tmp_path / "t.jsonl", labelled())
    process = lm_eval_custom(tiny_model, data, tmp_path / "out", {"freq_table": str(tmp_path / where)}, check=False)
    problem = "is a folder, not a table file" if where == "a-folder" else "not found"
    assert_refused(
        process, "FrequencyTableNotFoundError", "metadata freq_table", where, problem, "lm-eval-pdd build-table"
    )
    assert "Scoring" not in process.stderr


@pytest.mark.parametrize("change", [-10, 10], ids=["smaller", "larger"])
def test_a_table_of_another_vocabulary_size_is_refused_before_scoring(tiny_model, tiny_table, tmp_path, change):
    # The same tokenizer fingerprint, but counts cut short (or padded): DC-PDD would silently pad a
    # short table with unseen tokens, and a long one failed only after every forward pass.
    from pdd_tasks.freq.tables import FrequencyTable

    table = FrequencyTable.load(tiny_table)
    size = table.tokenizer_vocab_size
    counts = table.counts[:change] if change < 0 else np.concatenate([table.counts, np.zeros(change, np.int64)])
    edited = table.replace(counts=counts, tokenizer_vocab_size=counts.size, total_tokens=int(counts.sum()))
    path = edited.save(tmp_path / "edited.npz")
    data = write_jsonl(tmp_path / "t.jsonl", labelled())
    process = lm_eval_custom(tiny_model, data, tmp_path / "out", {"freq_table": str(path)}, check=False)
    assert_refused(process, "FrequencyTableMismatchError", f"holds {size + change} counts", f"has {size} ids")
    assert "Scoring" not in process.stderr
    inspected = run_pdd(["inspect-table", path, "--tokenizer", tiny_model], tmp_path)
    assert "(matches)" not in inspected.stdout
    assert f"DOES NOT MATCH: the same fingerprint, but the tokenizer has {size} ids" in inspected.stdout


def small_table(counts: list[int], total: int | None = None):
    from pdd_tasks.freq.tables import FrequencyTable

    return FrequencyTable(
        counts=np.array(counts, dtype=np.int64), tokenizer_name="t", tokenizer_fingerprint="0" * 64,
        tokenizer_vocab_size=len(counts), total_tokens=sum(counts) if total is None else total, documents=1,
        max_tokens_per_doc=None, corpus="c",
    )  # fmt: skip


def test_a_table_whose_counts_overflow_is_refused(tmp_path):
    # Written as the file format says, its total the int64-wrapped sum of its counts (-2**62).
    from pdd_tasks.freq import tables

    counts = np.array([2**62] * 3, dtype=np.int64)
    meta = {**small_table([1, 2, 3]).meta, "total_tokens": int(counts.sum())}
    path = tmp_path / "wrapped.npz"
    np.savez_compressed(path, counts=counts, meta=np.array(json.dumps({"kind": tables._KIND, **meta})))
    process = run_pdd(["inspect-table", path], tmp_path)
    assert_refused(process, "wrapped.npz", f"counts sum to {3 * 2**62:,}, more than an int64 holds", "overflowed")


def test_merge_tables_that_overflow_int64_says_so(tmp_path):
    a = small_table([2**62, 2**62 - 1, 0]).save(tmp_path / "a.npz")  # each total is exactly 2**63 - 1
    b = small_table([2**62, 0, 2**62 - 1]).save(tmp_path / "b.npz")
    process = run_pdd(["merge-tables", a, b, "--output", tmp_path / "m.npz"], tmp_path)
    assert_refused(process, "merging overflows: the count of token id 0", "more than an int64 holds")
    assert "non-negative" not in process.stderr and not (tmp_path / "m.npz").exists()


def build_empty_table(model_dir: Path, tmp_path: Path) -> Path:
    """An empty table as the library writes it (an empty shard), which build-table refuses to write alone."""
    from transformers import AutoTokenizer

    from pdd_tasks.freq.tables import build_table

    path = tmp_path / "empty.npz"
    build_table([], AutoTokenizer.from_pretrained(model_dir), corpus="nothing", progress=False).save(path)
    return path


def test_a_use_cache_file_of_another_model_is_refused(tiny_model, table_args, tmp_path):
    other = build_tiny_model(tmp_path / "other-model", seed=1)
    data = write_jsonl(tmp_path / "t.jsonl", labelled())
    cache = str(tmp_path / "shared-cache")
    lm_eval_custom(tiny_model, data, tmp_path / "first" / "out", table_args, extra=["--use_cache", cache])
    process = lm_eval_custom(other, data, tmp_path / "second" / "out", table_args, extra=["--use_cache", cache], check=False)  # fmt: skip
    assert_refused(process, "AnswersFromAnotherModel", f"computed by {tiny_model}", "use a cache file per model")


def test_a_use_cache_file_of_other_weights_at_the_same_path_is_refused(table_args, tmp_path):
    model = build_tiny_model(tmp_path / "model", seed=0)
    data = write_jsonl(tmp_path / "t.jsonl", labelled())
    cache = str(tmp_path / "cache")
    lm_eval_custom(model, data, tmp_path / "first" / "out", table_args, extra=["--use_cache", cache])
    build_tiny_model(tmp_path / "model", seed=1)  # other weights saved over the first, same tokenizer
    process = lm_eval_custom(model, data, tmp_path / "second" / "out", table_args, extra=["--use_cache", cache], check=False)  # fmt: skip
    assert_refused(process, "AnswersFromAnotherModel", "with other weights", f"than the files at {model} now")
    assert "--use_cache path of their own" in process.stderr and "Delete that cache file" in process.stderr


def test_unlabelled_texts_answered_from_a_cache_of_the_other_convention_are_refused(tiny_model, table_args, tmp_path):
    """pdd_custom without labels checks the cached answers as a labelled run does (it once skipped it)."""
    suspects = write_jsonl(tmp_path / "s.jsonl", [{"text": text} for text in MEMBERS[:3]])
    metadata = {
        **table_args,
        "reference_files": str(write_jsonl(tmp_path / "r.jsonl", [{"text": t} for t in NON_MEMBERS])),
    }
    cache = str(tmp_path / "cache")
    lm_eval_custom(tiny_model, suspects, tmp_path / "first" / "out", metadata, extra=["--use_cache", cache])
    other = {**metadata, "convention": "reference-code"}
    process = lm_eval_custom(tiny_model, suspects, tmp_path / "second" / "out", other, extra=["--use_cache", cache], check=False)  # fmt: skip
    assert_refused(process, "scored with convention 'paper', but this run asks for 'reference-code'")


def test_zlib_of_a_truncated_text_divides_by_the_scored_part(tiny_model, table_args, tmp_path):
    from transformers import AutoTokenizer

    long_text = " ".join(row["input"] for row in wikimia_rows(128)[:4])
    data = write_jsonl(tmp_path / "t.jsonl", [{"text": long_text, "label": 1}] + labelled(2)[1:])
    out = tmp_path / "out"
    process = lm_eval_custom(tiny_model, data, out, {**table_args, "truncate": True}, extra=["--log_samples"])
    assert "were truncated to their first 256 tokens" in process.stderr
    sample = next(s for s in read_samples(out, "pdd_custom") if s["doc"]["text"] == long_text)
    tokenizer = AutoTokenizer.from_pretrained(tiny_model)
    encoded = tokenizer(long_text, add_special_tokens=False, return_offsets_mapping=True)
    scored = long_text[: encoded["offset_mapping"][256 - 1][1]]  # the first 256 tokens after the start token
    compressed_size = sample["loss_auc"][0] / sample["zlib_auc"][0]
    assert compressed_size == pytest.approx(len(zlib.compress(scored.encode())), rel=1e-5)
    assert len(zlib.compress(long_text.encode())) > 1.5 * compressed_size


def test_unlabelled_with_one_reference_text_is_refused_before_scoring(tiny_model, table_args, tmp_path):
    suspect = write_jsonl(tmp_path / "s.jsonl", [{"text": t} for t in MEMBERS])
    reference = write_jsonl(tmp_path / "r.jsonl", [{"text": NON_MEMBERS[0]}])
    process = lm_eval_custom(tiny_model, suspect, tmp_path / "out", {**table_args, "reference_files": str(reference)}, check=False)  # fmt: skip
    assert_refused(process, "holds 1 text; a threshold and a rank test need at least 2 known non-members")


def test_limit_that_cuts_the_reference_set_is_named(tiny_model, table_args, tmp_path):
    suspect = write_jsonl(tmp_path / "s.jsonl", [{"text": t} for t in MEMBERS[:4]])
    reference = write_jsonl(tmp_path / "r.jsonl", [{"text": t} for t in NON_MEMBERS])
    metadata = {**table_args, "reference_files": str(reference)}
    cut = lm_eval_custom(tiny_model, suspect, tmp_path / "cut" / "out", metadata, extra=["--limit", "5"], check=False)
    assert_refused(cut, "1 reference text(s) were scored (and 4 suspect texts)", "drop --limit")
    few = lm_eval_custom(tiny_model, suspect, tmp_path / "few" / "out", metadata, extra=["--limit", "6"])
    assert "only 2 reference texts were scored (--limit?): too few for target_fpr=0.05" in few.stderr


def test_limit_zero_is_refused_before_requests_are_built(tiny_model, table_args, tmp_path):
    data = write_jsonl(tmp_path / "t.jsonl", labelled())
    process = lm_eval_custom(tiny_model, data, tmp_path / "out", table_args, extra=["--limit", "0"], check=False)
    assert_refused(process, "RunOptionError", "pdd_custom: --limit 0 scores no document", "Remove --limit")


@pytest.mark.parametrize(
    "extra, flag",
    [
        (["--apply_chat_template"], "--apply_chat_template"),
        (["--system_instruction", "Answer briefly."], "--system_instruction"),
    ],
    ids=["chat-template", "system-instruction"],
)
def test_a_chat_template_or_system_instruction_is_refused_naming_the_flag(tiny_model, table_args, tmp_path, extra, flag):  # fmt: skip
    data = write_jsonl(tmp_path / "t.jsonl", labelled())
    process = lm_eval_custom(tiny_model, data, tmp_path / "out", table_args, extra=extra, check=False)
    assert_refused(process, "RunOptionError", f"pdd_custom: {flag} cannot be used with a pdd task", f"Remove {flag}")
    assert "Scoring texts" not in process.stderr


def test_labels_and_reference_files_together_are_refused(tiny_model, tmp_path):
    data = write_jsonl(tmp_path / "t.jsonl", labelled())
    process = lm_eval_custom(tiny_model, data, tmp_path / "out", {"reference_files": str(data)}, check=False)
    assert_refused(process, "reference_files is for unlabelled texts", '"label_field": null')


def test_a_benchmark_pointed_at_a_missing_local_copy_is_named(tiny_model, tmp_path):
    process = lm_eval_custom(
        tiny_model,
        None,
        tmp_path / "out",
        {"data_source": str(tmp_path / "nowhere")},
        task="pdd_wikimia_32",
        check=False,
    )
    assert_refused(process, "is neither 'hub', 'package' nor an existing file or directory", "data_source")


# -- lm-eval-pdd: no file replaced without --force ------------------------------------------------------


def small_corpus(tmp_path: Path) -> Path:
    return write_jsonl(tmp_path / "corpus.jsonl", [{"text": t, "domain": "wiki"} for t in MEMBERS + NON_MEMBERS])


def test_build_table_never_writes_over_its_input(tiny_model, tmp_path):
    corpus = small_corpus(tmp_path)
    before = corpus.read_bytes()
    process = run_pdd(["build-table", "--tokenizer", tiny_model, "--input", corpus, "--output", corpus, "--force"], tmp_path)  # fmt: skip
    assert_refused(process, "is also one of the inputs", "Choose another --output")
    assert corpus.read_bytes() == before


def test_build_table_replaces_an_existing_output_only_with_force(tiny_model, tmp_path):
    corpus = small_corpus(tmp_path)
    output = tmp_path / "table.npz"
    output.write_bytes(b"the user's file")
    command = ["build-table", "--tokenizer", tiny_model, "--input", corpus, "--output", output, "--no-progress"]
    assert_refused(run_pdd(command, tmp_path), "already exists; pass --force to replace it")
    assert output.read_bytes() == b"the user's file"
    assert run_pdd([*command, "--force"], tmp_path).returncode == 0
    assert output.read_bytes() != b"the user's file"


@pytest.mark.parametrize(
    "corpus_lines, extra, fragments",
    [
        ([], [], ["counted no token in 0 documents", "nothing written"]),
        (None, ["--where", "domain=github"], ["counted no token", "--where domain=github matched no record?"]),
    ],
    ids=["empty-corpus", "where-matches-nothing"],
)
def test_build_table_from_nothing_writes_nothing(tiny_model, tmp_path, corpus_lines, extra, fragments):
    corpus = small_corpus(tmp_path) if corpus_lines is None else write_jsonl(tmp_path / "empty.jsonl", corpus_lines)
    output = tmp_path / "table.npz"
    process = run_pdd(["build-table", "--tokenizer", tiny_model, "--input", corpus, "--output", output, *extra], tmp_path)  # fmt: skip
    assert_refused(process, *fragments)
    assert not output.exists()


def test_build_table_where_that_matched_nothing_does_not_block_the_corrected_rerun(tiny_model, tmp_path):
    corpus = small_corpus(tmp_path)
    output = tmp_path / "table.npz"
    command = ["build-table", "--tokenizer", tiny_model, "--input", corpus, "--output", output, "--no-progress"]
    assert_refused(run_pdd([*command, "--where", "domain=githb"], tmp_path), "counted no token")
    assert not (tmp_path / "table.npz.parts").exists()
    process = run_pdd([*command, "--where", "domain=wiki"], tmp_path)
    assert process.returncode == 0, process.stderr[-3000:]
    assert output.is_file() and not (tmp_path / "table.npz.parts").exists()


@pytest.mark.parametrize(
    "write, fragments",
    [
        (lambda p: p.write_bytes(b'{"text": "ok"}\n{"text": "na\xefve"}\n'), ["c.jsonl:2: byte 0xef", "not UTF-8"]),
        (lambda p: p.write_text('{"text": "ok"}\n{"text": \n'), ["c.jsonl:2: not valid JSON"]),
        (lambda p: p.write_text('{"text": "ok"}\n{"body": "x"}\n'), ["c.jsonl:2: no field 'text'", "--text-field"]),
        (lambda p: p.write_text('{"text": "ok"}\n{"text": "x\\udfff"}\n'), ["c.jsonl:2:", "lone surrogate '\\udfff'"]),
    ],
    ids=["not-utf8", "bad-json", "no-text-field", "lone-surrogate"],
)
def test_build_table_names_the_file_and_line_of_a_bad_corpus_record(tiny_model, tmp_path, write, fragments):
    corpus = tmp_path / "c.jsonl"
    write(corpus)
    process = run_pdd(["build-table", "--tokenizer", tiny_model, "--input", corpus, "--output", tmp_path / "t.npz"], tmp_path)  # fmt: skip
    assert_refused(process, *fragments)


def test_build_table_names_a_truncated_gzip_corpus(tiny_model, tmp_path):
    whole = gzip.compress(b"".join(json.dumps({"text": t}).encode() + b"\n" for t in MEMBERS * 40))
    corpus = tmp_path / "c.jsonl.gz"
    corpus.write_bytes(whole[: len(whole) // 2])
    process = run_pdd(["build-table", "--tokenizer", tiny_model, "--input", corpus, "--output", tmp_path / "t.npz"], tmp_path)  # fmt: skip
    assert_refused(process, "c.jsonl.gz: the gzip stream ends early")


def test_build_table_names_a_parquet_file_that_is_not_parquet(tiny_model, tmp_path):
    corpus = tmp_path / "c.parquet"
    corpus.write_text("not parquet at all")
    process = run_pdd(["build-table", "--tokenizer", tiny_model, "--input", corpus, "--output", tmp_path / "t.npz"], tmp_path)  # fmt: skip
    assert_refused(process, "c.parquet: not a readable Parquet file")


def test_build_table_with_two_corpora_is_refused(tiny_model, tmp_path):
    process = run_pdd(["build-table", "--tokenizer", tiny_model, "--input", "a.jsonl", "--hf-dataset", "x", "--output", "t.npz"], tmp_path)  # fmt: skip
    assert_refused(process, "give the corpus as --input PATH... or as --hf-dataset ID (one of them)")


def test_build_table_offline_hub_dataset_says_how_to_build_from_files(tiny_model, tmp_path):
    process = run_pdd(["build-table", "--tokenizer", tiny_model, "--hf-dataset", "allenai/c4", "--hf-config", "en", "--output", tmp_path / "t.npz"], tmp_path)  # fmt: skip
    assert_refused(process, "cannot stream Hugging Face dataset 'allenai/c4'", "--input corpus/")


@pytest.fixture
def two_tables(tiny_model, tmp_path):
    corpus = small_corpus(tmp_path)
    paths = []
    for name, where in (("a.npz", []), ("b.npz", ["--limit-docs", "3"])):
        command = ["build-table", "--tokenizer", tiny_model, "--input", corpus, "--output", tmp_path / name, *where]
        assert run_pdd(command, tmp_path).returncode == 0
        paths.append(tmp_path / name)
    return paths


def test_merge_tables_refuses_a_table_given_twice_and_an_output_that_is_an_input(two_tables, tmp_path):
    a, b = two_tables
    before = a.read_bytes()
    assert_refused(run_pdd(["merge-tables", a, a, "--output", a], tmp_path), "given more than once", "added twice")
    assert_refused(run_pdd(["merge-tables", a, b, "--output", a, "--force"], tmp_path), "is also one of the inputs")
    assert_refused(run_pdd(["merge-tables", a, b, "--output", b.with_name("b.npz")], tmp_path), "is also one of the inputs")  # fmt: skip
    assert a.read_bytes() == before
    merged = tmp_path / "merged.npz"
    merged.write_text("keep me")
    assert_refused(run_pdd(["merge-tables", a, b, "--output", merged], tmp_path), "already exists; pass --force")
    assert merged.read_text() == "keep me"


def test_merge_tables_of_other_tokenizers_is_refused(two_tables, tmp_path):
    from pdd_tasks.freq.tables import FrequencyTable

    a, b = two_tables
    other = tmp_path / "other.npz"
    FrequencyTable.load(b).replace(tokenizer_fingerprint="0" * 64).save(other)
    process = run_pdd(["merge-tables", a, other, "--output", tmp_path / "m.npz"], tmp_path)
    assert_refused(process, "refused")


def test_estimate_table_does_not_replace_an_existing_file(tiny_model, tmp_path):
    output = tmp_path / "u.npz"
    output.write_text("keep me")
    process = run_pdd(["estimate-table", "--tokenizer", tiny_model, "--from", "uniform", "--output", output], tmp_path)
    assert_refused(process, "already exists; pass --force")
    assert output.read_text() == "keep me"


def test_inspect_table_of_a_file_that_is_not_a_table(tmp_path):
    bogus = tmp_path / "x.npz"
    bogus.write_text("not a table")
    assert_refused(run_pdd(["inspect-table", bogus], tmp_path), "lm-eval-pdd inspect-table:", "x.npz")


def test_install_table_twice_needs_force(two_tables, tmp_path, monkeypatch):
    a, b = two_tables
    monkeypatch.setenv("LM_EVAL_PDD_HOME", str(tmp_path / "home"))  # where install-table puts it
    assert run_pdd(["install-table", a], tmp_path).returncode == 0
    assert_refused(run_pdd(["install-table", b], tmp_path), "already installed", "--force")


# -- lm-eval-pdd make-controlled and decisions -------------------------------------------------------


def test_make_controlled_keeps_an_existing_output_directory(tiny_model, tmp_path):
    output = tmp_path / "mine"
    output.mkdir()
    (output / "thesis.tex").write_text("years of work")
    pool = write_jsonl(tmp_path / "pool.jsonl", [{"input": t} for t in MEMBERS + NON_MEMBERS])
    process = run_pdd(["make-controlled", "--model", tiny_model, "--pool", pool, "--output", output, "--no-progress"], tmp_path)  # fmt: skip
    assert_refused(process, "already exists and holds 1 entries (thesis.tex)", "pass --force")
    assert (output / "thesis.tex").read_text() == "years of work"


@pytest.mark.parametrize(
    "pool_size, limit, fragments",
    [(12, "1", ["--limit 1: 1 texts; the pool needs at least 4", "--limit 4 or more"]), (3, None, ["3 distinct texts; the pool needs at least 4"])],
    ids=["limit-1", "pool-of-3"],
)  # fmt: skip
def test_make_controlled_with_too_few_texts_is_refused(tiny_model, tmp_path, pool_size, limit, fragments):
    pool = write_jsonl(tmp_path / "pool.jsonl", [{"input": t} for t in (MEMBERS + NON_MEMBERS)[:pool_size]])
    command = ["make-controlled", "--model", tiny_model, "--pool", pool, "--output", tmp_path / "c", "--no-progress"]
    process = run_pdd([*command, *(["--limit", limit] if limit else [])], tmp_path)
    assert_refused(process, *fragments)
    assert not (tmp_path / "c").exists()


@pytest.mark.parametrize("command", ["make-controlled", "make-ordered"])
def test_tuning_commands_cut_training_texts_at_the_models_context(tmp_path, command):
    # Training texts were cut at 512 (make-controlled) or 1024 (make-ordered) tokens, past the
    # 256 positions of this model: an IndexError in the position embedding.
    from transformers import AutoConfig

    model = build_tiny_model(tmp_path / "model", n_positions=256)
    assert AutoConfig.from_pretrained(model).n_positions == 256
    texts = [" ".join(row["input"] for row in wikimia_rows(128)[i : i + 4]) for i in range(0, 16, 4)]
    data = write_jsonl(tmp_path / "long.jsonl", [{"input": t, "text": t} for t in texts])
    output = tmp_path / "out"
    args = [command, "--model", model, "--output", output, "--epochs", "1", "--no-progress"]
    if command == "make-controlled":
        args += ["--pool", data, "--batch-size", "2"]
    else:
        args += ["--data", data, "--examples", "4", "--block-examples", "4"]
    process = run_pdd(args, tmp_path)
    assert process.returncode == 0, process.stderr[-3000:]
    training = json.loads((output / "manifest.json").read_text())["training"]
    assert training["max_tokens_used"] == 256 and training["texts_cut"] >= 1


def test_decisions_into_a_missing_directory_is_named(unlabelled_run, tmp_path):
    process = run_pdd(["decisions", unlabelled_run, "--output", tmp_path / "no" / "such" / "d.jsonl"], tmp_path)
    assert_refused(process, "does not exist; create it first")


def test_decisions_does_not_replace_a_file_without_force(unlabelled_run, tmp_path):
    output = tmp_path / "d.jsonl"
    output.write_text("keep me")
    assert_refused(run_pdd(["decisions", unlabelled_run, "--output", output], tmp_path), "already exists; pass --force")
    assert output.read_text() == "keep me"
    assert run_pdd(["decisions", unlabelled_run, "--output", output, "--force"], tmp_path).returncode == 0
    assert len(output.read_text().splitlines()) == 3


def test_decisions_of_a_labelled_run_is_named(tiny_model, tiny_table, tmp_path):
    data = write_jsonl(tmp_path / "t.jsonl", labelled())
    lm_eval_custom(tiny_model, data, tmp_path / "out", {"freq_table": str(tiny_table)}, extra=["--log_samples"])
    process = run_pdd(["decisions", tmp_path / "out"], tmp_path)
    assert_refused(process, "was not an unlabelled run")


def test_zh_snippets_names_a_bad_byte(tmp_path):
    source = tmp_path / "zh.jsonl"
    source.write_bytes('{"text": "\u4e2d\u6587"}\n'.encode() + b'{"text": "\xff"}\n')
    process = run_pdd(["zh-snippets", "--input", source, "--output", tmp_path / "out.jsonl"], tmp_path)
    assert_refused(process, "zh.jsonl:2: byte 0xff", "not UTF-8")


def test_metric_inputs_are_checked_not_dropped():
    # The documented behaviour behind every AUC above: NaN scores raise, they are never dropped.
    from pdd_metrics import roc_auc

    with pytest.raises(ValueError, match=r"1 of 4 scores are not finite \(NaN or inf\).*none is dropped silently"):
        roc_auc(np.array([0.1, np.nan, 0.3, 0.4]), np.array([1, 0, 1, 0]))


# -- lm-eval-pdd: numbers out of range, refused by argparse (status 2, one line) before any work ---


@pytest.mark.parametrize(
    "command, option, value, expected",
    [
        (["blind", "pdd_custom"], "--bootstrap-iters", "-5", "0 (no standard errors) or a number of draws >= 2"),
        (["blind", "pdd_custom"], "--bootstrap-iters", "1", "0 (no standard errors) or a number of draws >= 2"),
        (["make-controlled"], "--limit", "-1", "a whole number >= 1"),
        (["make-controlled"], "--batch-size", "0", "a whole number >= 1"),
        (["make-controlled"], "--epochs", "-2", "a whole number >= 1"),
        (["make-controlled"], "--seed", "-1", "a seed from 0 to"),
        (["make-controlled"], "--learning-rate", "-1e-4", "a finite number > 0"),
        (["make-controlled"], "--learning-rate", "nan", "a finite number > 0"),
        (["make-ordered", "--output", "o"], "--examples", "-3", "a whole number >= 1"),
        (["make-ordered", "--output", "o"], "--block-examples", "0", "a whole number >= 1"),
        (["make-ordered", "--output", "o"], "--epochs", "0", "a whole number >= 1"),
        (["make-ordered", "--output", "o"], "--batch-size", "-4", "a whole number >= 1"),
        (["make-ordered", "--output", "o"], "--seed", "-7", "a seed from 0 to"),
        (["make-ordered", "--output", "o"], "--learning-rate", "0", "a finite number > 0"),
        (["build-table", "--tokenizer", "t", "--input", "c.jsonl"], "--limit-docs", "-1", "a whole number >= 1"),
        (["build-table", "--tokenizer", "t", "--input", "c.jsonl"], "--batch-size", "0", "a whole number >= 1"),
        (["build-table", "--tokenizer", "t", "--input", "c.jsonl"], "--num-shards", "0", "a whole number >= 1"),
        (["build-table", "--tokenizer", "t", "--input", "c.jsonl"], "--shard-index", "-1", "a whole number >= 0"),
        (["build-table", "--tokenizer", "t", "--input", "c.jsonl"], "--docs-per-part", "-5", "a whole number >= 1"),
        (
            ["build-table", "--tokenizer", "t", "--input", "c.jsonl"],
            "--max-tokens-per-doc",
            "-3",
            "a whole number >= 1",
        ),
        (["build-table", "--tokenizer", "t", "--input", "c.jsonl"], "--limit-tokens", "-1G", "a size like 15GB"),
        (["estimate-table", "--tokenizer", "t", "--from", "wordfreq"], "--scale", "-1e9", "a finite number > 0"),
        (["inspect-table", "t.npz"], "--top", "-5", "a whole number >= 0"),
        (["zh-snippets", "--input", "i.jsonl", "--output", "o.jsonl"], "--words", "0", "a whole number >= 1"),
    ],
)
def test_a_number_out_of_range_is_refused_by_the_argument_parser(tmp_path, command, option, value, expected):
    process = run_pdd([*command, f"{option}={value}"], tmp_path)
    assert process.returncode == 2, process.stderr[-2000:]
    assert "Traceback" not in process.stderr
    last = process.stderr.strip().splitlines()[-1]
    assert f"argument {option}: expected {expected}" in last and value in last, process.stderr[-2000:]
    assert list(tmp_path.iterdir()) == []  # nothing written


def test_blind_without_bootstrap_prints_no_standard_errors(tmp_path):
    data = write_jsonl(tmp_path / "t.jsonl", labelled(6))
    metadata = json.dumps({"data_files": str(data)})
    process = run_pdd(["blind", "pdd_custom", "--metadata", metadata, "--bootstrap-iters", "0", "--json"], tmp_path)
    assert process.returncode == 0, process.stderr[-3000:]
    (result,) = json.loads(process.stdout)
    assert result["tpr@fpr<5%_stderr"] is None and result["auc_stderr"] > 0
    process = run_pdd(["blind", "pdd_custom", "--metadata", metadata, "--bootstrap-iters", "0"], tmp_path)
    assert " ± n/a" in process.stdout and "nan" not in process.stdout


def test_blind_on_two_texts_a_class_shows_no_interval_and_warns_as_table_does(tmp_path):
    """Issue 43 item 4: 2 + 2 texts gave ``1.000 [1.000, 1.000]`` where ``table`` shows "no interval"."""
    data = write_jsonl(tmp_path / "t.jsonl", labelled(2))
    metadata = json.dumps({"data_files": str(data)})
    process = run_pdd(["blind", "pdd_custom", "--metadata", metadata, "--bootstrap-iters", "0"], tmp_path)
    assert process.returncode == 0, process.stderr[-3000:]
    assert " [no interval] |" in process.stdout and "[1.000, 1.000]" not in process.stdout, process.stdout
    assert "no interval: no standard error could be computed" in process.stdout
    assert "**Too few texts** in pdd_custom: 2 members and 2 non-members, fewer than" in process.stdout
    process = run_pdd(["blind", "pdd_custom", "--metadata", metadata, "--bootstrap-iters", "0", "--json"], tmp_path)
    (result,) = json.loads(process.stdout)
    assert result["auc_ci95"] is None and "no evidence of membership" in result["too_few_texts"]


def test_blind_names_an_unknown_task_and_a_listing_command_that_works(tmp_path):
    process = run_pdd(["blind", "pdd_no_such_task"], tmp_path)
    assert process.returncode != 0 and "Traceback" not in process.stderr
    assert "no task or group 'pdd_no_such_task' among the pdd tasks" in process.stderr
    assert '`lm_eval ls tasks --include_path "$(lm-eval-pdd tasks-path)"` lists them' in process.stderr


@pytest.mark.parametrize("extra", [[], ["--work-dir", "parts", "--keep-parts"]], ids=["default", "kept-parts"])
def test_build_table_counts_a_filled_in_empty_input(tiny_model, tmp_path, extra):
    # An empty corpus is refused ("0 documents"); filled in, the same command counts its content,
    # not a count kept from the empty file (work folder, manifest, parts).
    corpus = write_jsonl(tmp_path / "corpus.jsonl", [])
    command = [
        "build-table",
        "--tokenizer",
        tiny_model,
        "--input",
        corpus,
        "--output",
        "t.npz",
        "--no-progress",
        *extra,
    ]
    assert_refused(run_pdd(command, tmp_path), "counted no token in 0 documents")
    write_jsonl(corpus, [{"text": text} for text in MEMBERS])
    process = run_pdd(command, tmp_path)
    assert process.returncode == 0, process.stderr[-3000:]
    assert f"in {len(MEMBERS)} documents" in process.stderr
