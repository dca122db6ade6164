"""Bad input gives a clear message, never a traceback from deep inside or a silent number."""

from __future__ import annotations

import pytest
from support.bad_input import lm_eval_custom, rows, write_jsonl
from support.harness import wikimia_rows

from pdd_tasks.loading.benchmark_data import DatasetError, normalise_rows
from pdd_tasks.registry import ScoringSettings


def test_empty_text_names_the_row():
    with pytest.raises(DatasetError, match=r"row 1: the text is empty"):
        normalise_rows(rows(("a member", 1), ("   ", 0)), "x.jsonl", "text", "label")


def test_missing_label_names_the_row_and_the_fix():
    data = rows(("a member", 1), ("a non-member", 0)) + [{"text": "no label here"}]
    with pytest.raises(DatasetError, match=r"row 2: no label \(field 'label'\).*label_field"):
        normalise_rows(data, "x.jsonl", "text", "label")


def test_missing_text_field_lists_the_fields():
    with pytest.raises(DatasetError, match=r"row 0: no field 'text' \(fields: \['input', 'label'\]\)"):
        normalise_rows([{"input": "x", "label": 1}], "x.jsonl", "text", "label")


def test_non_binary_label_is_refused():
    with pytest.raises(DatasetError, match=r"label 2; expected 1 \(member\) or 0"):
        normalise_rows(rows(("a", 1), ("b", 2)), "x.jsonl", "text", "label")


def test_one_class_dataset_is_refused():
    with pytest.raises(DatasetError, match=r"one class \(2 members, 0 non-members\)"):
        normalise_rows(rows(("a", 1), ("b", 1)), "x.jsonl", "text", "label")


@pytest.mark.parametrize(
    "metadata, message",
    [
        ({"min_k": 0}, "min_k=0: expected a fraction"),
        ({"dcpdd_a": -1}, "dcpdd_a=-1"),
        ({"lowercase": "yes"}, "expected true or false"),
    ],
)
def test_bad_settings_are_refused(metadata, message):
    with pytest.raises(ValueError, match=message):
        ScoringSettings.from_metadata(metadata)


def test_frequency_table_of_another_tokenizer_is_refused_before_scoring(tiny_model, tmp_path):
    # No freq_table given: the shipped default table is for SmolLM2's tokenizer, not the tiny model's.
    data = write_jsonl(tmp_path / "t.jsonl", rows(("A text seen in training.", 1), ("A text not seen.", 0)))
    process = lm_eval_custom(tiny_model, data, tmp_path / "out", {}, check=False)
    assert process.returncode != 0
    assert "FrequencyTableMismatchError" in process.stderr
    assert "lm-eval-pdd build-table" in process.stderr
    assert "Scoring texts" not in process.stderr  # refused before any forward pass


def test_one_class_custom_file_fails_through_the_cli(tiny_model, tiny_table, tmp_path):
    data = write_jsonl(tmp_path / "t.jsonl", rows(("one text", 1), ("another text", 1)))
    process = lm_eval_custom(tiny_model, data, tmp_path / "out", {"freq_table": str(tiny_table)}, check=False)
    assert process.returncode != 0
    assert "one class (2 members, 0 non-members)" in process.stderr


def test_text_longer_than_context_is_an_error_unless_truncation_is_asked(tiny_model, tiny_table, tmp_path):
    long_text = " ".join(row["input"] for row in wikimia_rows(128)[:4])  # far more than 256 tokens
    data = write_jsonl(tmp_path / "t.jsonl", rows((long_text, 1), ("A short text.", 0), ("Another short one.", 1)))
    refused = lm_eval_custom(
        tiny_model, data, tmp_path / "refused" / "out", {"freq_table": str(tiny_table)}, check=False
    )
    assert refused.returncode != 0
    assert "more than the model's context window of 256 tokens" in refused.stderr
    assert '"truncate": true' in refused.stderr

    out = tmp_path / "truncated" / "out"
    allowed = lm_eval_custom(tiny_model, data, out, {"freq_table": str(tiny_table), "truncate": True})
    assert "were truncated to their first 256 tokens" in allowed.stderr


def test_target_fdr_on_a_labelled_run_is_named_as_ignored(tmp_path, caplog):
    """Issue 43 item 4: ``target_fdr`` (and ``target_fpr``) set PTDI's identification and the threshold of an
    unlabelled run with references; a labelled run ignored them without a word."""
    import logging

    from pdd_tasks.tasks.custom import read_custom_data

    data = write_jsonl(tmp_path / "labelled.jsonl", rows(("a member text", 1), ("a non-member text", 0)))
    with caplog.at_level(logging.WARNING, logger="pdd_tasks"):
        assert read_custom_data({"data_files": str(data), "target_fdr": 0.01}).labelled
    assert "pdd_custom: target_fdr=0.01 ignored:" in caplog.text and "has labels (field 'label')" in caplog.text
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="pdd_tasks"):
        read_custom_data({"data_files": str(data)})
    assert "ignored" not in caplog.text


def test_pac_on_one_word_texts_and_a_gap_k_window_longer_than_every_text_are_named(tiny_model, tiny_table, tmp_path):
    """Issue 43 item 4: PAC scored one-word texts 0.0 (each swapped copy is the text itself), and a
    ``gap_k_window`` longer than every text was applied to none of them, both without a word."""
    words = ["river", "mountain", "harbour", "lantern", "meadow", "orchard"]
    data = write_jsonl(tmp_path / "t.jsonl", rows(*[(word, index % 2) for index, word in enumerate(words)]))
    metadata = {"freq_table": str(tiny_table), "pac": True, "pac_augmentations": 2, "gap_k_window": 50}
    process = lm_eval_custom(tiny_model, data, tmp_path / "out", metadata)
    assert "pdd_custom: 6 of the 6 texts are one word (no space; e.g. text 0)" in process.stderr
    assert "its PAC score is 0.0 whatever the model saw" in process.stderr
    assert "scored token(s), fewer than gap_k_window=50" in process.stderr
    assert process.stderr.count("fewer than gap_k_window") == 1  # once per run, not once per text
