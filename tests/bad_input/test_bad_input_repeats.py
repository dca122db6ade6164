"""Repeated texts in a membership run's inputs (issue 32, item 1), through the real ``lm_eval`` command
line on the tiny GPT-2 of ``conftest.py``: each distinct text is scored once by default, so the numbers
equal those of the same texts given once; ``keep_duplicates: true`` scores every copy; either way the log,
the results JSON (``configs.<task>.metadata.repeats``) and ``lm-eval-pdd table`` / ``report`` say how many
and where. The same text under two roles that exclude each other is refused."""

from __future__ import annotations

import json
import math

import pytest
from sklearn.metrics import roc_auc_score
from support.harness import (
    cpu_float32,
    harness_args,
    read_results,
    read_samples,
    run_lm_eval,
    run_lm_eval_pdd,
    wikimia_rows,
)


MEMBERS = [row["input"] for row in wikimia_rows(32) if row["label"] == 1][:12]
NON_MEMBERS = [row["input"] for row in wikimia_rows(32) if row["label"] == 0][:12]
LABELLED = [{"text": t, "label": 1} for t in MEMBERS] + [{"text": t, "label": 0} for t in NON_MEMBERS]


def write_jsonl(path, rows):
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def run(model_dir, out, metadata, task="pdd_custom", check=True):
    out.parent.mkdir(parents=True, exist_ok=True)
    args = harness_args(cpu_float32(model_dir), task, out, device="cpu", batch_size=8, metadata=metadata)
    return run_lm_eval(args, cwd=out.parent, check=check)


def task_results(out, task="pdd_custom") -> tuple[dict, dict, int]:
    """(the task's metrics, its metadata, how many texts it scored) of a run's results JSON."""
    results = read_results(out)
    return (
        results["results"][task],
        results["configs"][task]["metadata"],
        results["n-samples"][task]["effective"],
    )


def assert_refused(process, *fragments):
    assert process.returncode != 0, process.stderr[-3000:]
    assert "Traceback" not in process.stderr, process.stderr[-3000:]
    assert "Running loglikelihood requests" not in process.stderr  # refused before any scoring
    for fragment in fragments:
        assert fragment in process.stderr, f"{fragment!r} not in:\n{process.stderr[-3000:]}"


# -- a labelled file whose texts each appear 4 times --------------------------------------------------


@pytest.fixture(scope="module")
def four_times(tiny_model, tiny_table, tmp_path_factory):
    """The same 24 labelled texts (12 + 12) given once, and each 4 times (the file 4 times over)."""
    tmp = tmp_path_factory.mktemp("four-times")
    once = write_jsonl(tmp / "once.jsonl", LABELLED)
    four = write_jsonl(tmp / "four.jsonl", LABELLED * 4)
    table = {"freq_table": str(tiny_table)}
    runs = {
        "once": run(tiny_model, tmp / "once", {"data_files": str(once), **table}),
        "four": run(tiny_model, tmp / "four", {"data_files": str(four), **table}),
    }
    return {"tmp": tmp, "four": four, "runs": runs, "model": tiny_model, "table": table}


@pytest.fixture(scope="module")
def kept_four_times(four_times):
    """The file of each text 4 times, with keep_duplicates."""
    metadata = {"data_files": str(four_times["four"]), "keep_duplicates": True, **four_times["table"]}
    return run(four_times["model"], four_times["tmp"] / "kept", metadata)


def test_each_distinct_text_is_scored_once_and_the_numbers_equal_those_of_one_copy(four_times):
    """Before: 96 texts scored, loss-AUC standard error halved and the blind baseline's AUC inflated (its
    copies fall on both sides of its cross-validation folds); now the same numbers as the texts given once."""
    once, _, n_once = task_results(four_times["tmp"] / "once")
    four, metadata, n_four = task_results(four_times["tmp"] / "four")
    assert n_once == n_four == 24
    for key in ("loss_auc", "dcpdd_auc", "min_k_pp_auc", "blind_auc", "blind_tpr@fpr<5%"):
        assert four[f"{key},none"] == once[f"{key},none"], key
        assert four[f"{key}_stderr,none"] == once[f"{key}_stderr,none"], key
    path = four_times["four"]
    assert metadata["repeats"] == {
        "texts": 96,
        "distinct": 24,
        "repeated_texts": 24,
        "extra_copies": 72,
        "largest_group": 4,
        "by_role": {"1": {"texts": 48, "distinct": 12}, "0": {"texts": 48, "distinct": 12}},
        "across_roles": 0,
        "scored": 24,
        "keep_duplicates": False,
        "examples": [[f"{path} row {i + 24 * k}" for k in range(4)] for i in range(3)],
    }
    warning = four_times["runs"]["four"].stderr
    assert "pdd_custom: 96 texts hold 24 distinct texts: 24 text(s) repeated, 72 extra copies" in warning
    assert f"{path} row 0 = {path} row 24 = {path} row 48 = {path} row 72" in warning
    assert "each distinct text is scored once" in warning and '{"keep_duplicates": true}' in warning


def test_keep_duplicates_scores_every_copy_and_says_so(four_times, kept_four_times):
    once, _, _ = task_results(four_times["tmp"] / "once")
    kept, metadata, n_kept = task_results(four_times["tmp"] / "kept")
    assert n_kept == 96
    assert metadata["repeats"]["scored"] == 96 and metadata["repeats"]["keep_duplicates"] is True
    assert metadata["keep_duplicates"] is True
    # What the default protects from: the same AUC, with about half the standard error (DeLong, 4x the texts).
    assert kept["loss_auc,none"] == pytest.approx(once["loss_auc,none"])
    assert kept["loss_auc_stderr,none"] < 0.75 * once["loss_auc_stderr,none"]
    assert "every copy is scored (keep_duplicates: true)" in kept_four_times.stderr


def test_a_file_without_repeats_records_none_and_warns_of_none(four_times):
    _, metadata, _ = task_results(four_times["tmp"] / "once")
    assert metadata["repeats"]["extra_copies"] == 0 and metadata["repeats"]["distinct"] == 24
    assert "distinct texts" not in four_times["runs"]["once"].stderr


def test_table_and_report_say_how_many_repeats(four_times, kept_four_times, tmp_path):
    table = run_lm_eval_pdd(["table", str(four_times["tmp"] / "four")])
    assert table.returncode == 0, table.stderr
    assert "Repeated texts in pdd_custom: 96 texts hold 24 distinct (72 extra copies, at most 4 of one" in table.stdout
    assert "each distinct text scored once (24 texts" in table.stdout
    kept = run_lm_eval_pdd(["table", str(four_times["tmp"] / "kept")])
    assert "every copy scored (keep_duplicates: true)" in kept.stdout
    once = run_lm_eval_pdd(["table", str(four_times["tmp"] / "once")])
    assert once.returncode == 0 and "Repeated texts" not in once.stdout
    report = run_lm_eval_pdd(["report", str(four_times["tmp"] / "four"), "--out", str(tmp_path / "report")])
    assert report.returncode == 0, report.stderr
    assert "Repeated texts in pdd_custom: 96 texts hold 24 distinct" in (tmp_path / "report" / "report.md").read_text()


# -- unlabelled: suspects and references ---------------------------------------------------------------


@pytest.fixture(scope="module")
def unlabelled(tiny_model, tiny_table, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("unlabelled")
    texts = [row["input"] for row in wikimia_rows(32)]
    suspect = write_jsonl(tmp / "suspect.jsonl", [{"text": t} for t in texts[:10]])
    reference = write_jsonl(tmp / "ref.jsonl", [{"text": t} for t in texts[100:140]])
    return {"tmp": tmp, "suspect": suspect, "reference": reference, "model": tiny_model, "table": str(tiny_table)}


def test_reference_files_naming_the_same_file_twice_scores_its_40_texts_once(unlabelled):
    """Before: 80 reference texts scored, the p-values moved; now 40, the numbers of the file named once."""
    tmp, ref = unlabelled["tmp"], str(unlabelled["reference"])
    common = {"data_files": str(unlabelled["suspect"]), "freq_table": unlabelled["table"], "target_fpr": 0.1}
    twice = run(unlabelled["model"], tmp / "twice", {**common, "reference_files": [ref, ref]})
    run(unlabelled["model"], tmp / "once", {**common, "reference_files": ref})
    metrics, metadata, scored = task_results(tmp / "twice")
    expected, _, _ = task_results(tmp / "once")
    samples = read_samples(tmp / "twice", "pdd_custom")
    assert scored == 50 and len(samples) == 50
    assert sum(sample["doc"]["role"] == "reference" for sample in samples) == 40
    for key in ("zlib_pvalue", "loss_pvalue", "dcpdd_threshold", "loss_identified", "dataset_inference_pvalue"):
        assert metrics[f"{key},none"] == expected[f"{key},none"], key
    repeats = metadata["repeats"]
    assert repeats["texts"] == 90 and repeats["distinct"] == 50 and repeats["scored"] == 50
    assert repeats["by_role"] == {"suspect": {"texts": 10, "distinct": 10}, "reference": {"texts": 80, "distinct": 40}}
    assert repeats["examples"][0] == [f"{ref} (listing 1) row 0", f"{ref} (listing 2) row 0"]
    assert f"{ref} (listing 1) row 0 = {ref} (listing 2) row 0" in twice.stderr


def test_one_reference_text_thirty_times_is_refused_before_scoring(unlabelled):
    """Before: thresholds, U tests and PTDI computed on one distinct reference text."""
    tmp = unlabelled["tmp"]
    one = write_jsonl(tmp / "one.jsonl", [{"text": "The one known non-member, given thirty times."}] * 30)
    metadata = {
        "data_files": str(unlabelled["suspect"]),
        "reference_files": str(one),
        "freq_table": unlabelled["table"],
    }
    process = run(unlabelled["model"], tmp / "one", metadata, check=False)
    assert_refused(
        process,
        f"{one} holds 1 distinct text (30 rows); a threshold and a rank test need at least 2 known non-members",
        "Add texts to it",
        "40 texts hold 11 distinct texts",  # the warning before it says where the copies are
    )


def test_a_suspect_text_among_the_references_is_refused(unlabelled):
    tmp, suspect = unlabelled["tmp"], str(unlabelled["suspect"])
    metadata = {"data_files": suspect, "reference_files": suspect, "freq_table": unlabelled["table"]}
    process = run(unlabelled["model"], tmp / "same", metadata, check=False)
    assert_refused(
        process,
        f"pdd_custom: {suspect} row 0 and {suspect} row 0 hold the same text (10 texts are so; this is the first), "
        "as a suspect text (data_files) and as a known non-member (reference_files)",
        "Remove it from one of the files",
        "do data_files and reference_files name the same file?",
    )


def test_repeated_suspects_are_scored_once(unlabelled):
    tmp = unlabelled["tmp"]
    texts = [row["input"] for row in wikimia_rows(32)][:10]
    doubled = write_jsonl(tmp / "doubled.jsonl", [{"text": t} for t in texts + texts[:3]])
    metadata = {"data_files": str(doubled), "reference_files": str(unlabelled["reference"])}
    run(unlabelled["model"], tmp / "doubled", {**metadata, "freq_table": unlabelled["table"]})
    _, repeats_metadata, scored = task_results(tmp / "doubled")
    assert scored == 50
    assert repeats_metadata["repeats"]["by_role"]["suspect"] == {"texts": 13, "distinct": 10}
    assert repeats_metadata["repeats"]["examples"][0] == [f"{doubled} row 0", f"{doubled} row 10"]


# -- EM-MIA on 2 + 2 texts each given twice ---------------------------------------------------------------


def test_em_mia_on_texts_given_twice_scores_the_distinct_texts(tiny_model, tiny_table, tmp_path):
    """Before: 8 texts, each one's copy among its prefixes (a prefix that predicts it perfectly): AUC 1.0 ± 0.
    Now: the 4 distinct texts, the numbers of a run on them; with keep_duplicates the prefixes are still the
    4 distinct texts and each copy gets its text's final score."""
    rows = LABELLED[:2] + LABELLED[12:14]
    twice = write_jsonl(tmp_path / "twice.jsonl", rows + rows)
    once = write_jsonl(tmp_path / "once.jsonl", rows)
    common = {"freq_table": str(tiny_table), "em_mia": True}
    run(tiny_model, tmp_path / "twice", {"data_files": str(twice), **common})
    run(tiny_model, tmp_path / "once", {"data_files": str(once), **common})
    metrics, metadata, scored = task_results(tmp_path / "twice")
    expected, _, _ = task_results(tmp_path / "once")
    assert scored == 4 and metadata["repeats"]["extra_copies"] == 4
    for key in ("em_mia_auc", "em_mia_auc_stderr", "em_mia_tpr@fpr<5%"):
        assert metrics[f"{key},none"] == expected[f"{key},none"], key
    samples = read_samples(tmp_path / "twice", "pdd_custom")
    assert all(len(sample["em_mia_auc"][1]) == 4 for sample in samples)

    run(tiny_model, tmp_path / "kept", {"data_files": str(twice), "keep_duplicates": True, **common})
    kept, _, n_kept = task_results(tmp_path / "kept")
    samples = sorted(read_samples(tmp_path / "kept", "pdd_custom"), key=lambda sample: sample["doc_id"])
    assert n_kept == 8 and len(samples) == 8
    texts = [row["text"] for row in rows]
    for sample in samples:
        prefixes = [a["arg_0"] for a in sample["arguments"].values()][-4:]
        assert prefixes == texts and len(sample["arguments"]) == 2 + 4  # the text, Lowercase, 4 prefixes
        assert sample["em_mia_auc"][0] == texts.index(sample["doc"]["text"])
    once_samples = {s["doc"]["text"]: s["em_mia_score"] for s in read_samples(tmp_path / "once", "pdd_custom")}
    assert [s["em_mia_score"] for s in samples] == [once_samples[s["doc"]["text"]] for s in samples]
    labels = [s["doc"]["label"] for s in samples]
    assert kept["em_mia_auc,none"] == pytest.approx(roc_auc_score(labels, [s["em_mia_score"] for s in samples]))


# -- benchmark loaders and pdd_controlled -----------------------------------------------------------------


def test_a_benchmark_file_with_repeats_after_its_cut_is_scored_once(tiny_model, tiny_table, tmp_path):
    """pdd_wikimia_32 from a local copy cut to its first 5 words: rows 0 and 1 differ after their fifth word
    only, so they are one text to score; the warning and the record name their rows."""
    first = MEMBERS[0].split()
    rows = [
        {"input": " ".join(first), "label": 1},
        {"input": " ".join(first[:5] + ["something", "else"]), "label": 1},
        *({"input": t, "label": 1} for t in MEMBERS[1:4]),
        *({"input": t, "label": 0} for t in NON_MEMBERS[:4]),
    ]
    data = write_jsonl(tmp_path / "wikimia.jsonl", rows)
    metadata = {"data_source": str(data), "max_words": 5, "freq_table": str(tiny_table)}
    process = run(tiny_model, tmp_path / "out", metadata, task="pdd_wikimia_32")
    _, recorded, scored = task_results(tmp_path / "out", "pdd_wikimia_32")
    assert scored == 8
    assert recorded["repeats"]["examples"] == [["row 0", "row 1"]] and recorded["repeats"]["scored"] == 8
    assert "pdd_wikimia_32: 9 texts hold 8 distinct texts" in process.stderr and "row 0 = row 1" in process.stderr


def test_a_cut_that_makes_a_member_and_a_non_member_one_text_is_refused(tiny_model, tiny_table, tmp_path):
    first = MEMBERS[0].split()
    rows = [
        {"input": " ".join(first), "label": 1},
        {"input": " ".join(first[:5] + ["something", "else"]), "label": 0},
        *({"input": t, "label": 1} for t in MEMBERS[1:3]),
        *({"input": t, "label": 0} for t in NON_MEMBERS[:2]),
    ]
    data = write_jsonl(tmp_path / "wikimia.jsonl", rows)
    metadata = {"data_source": str(data), "max_words": 5, "freq_table": str(tiny_table)}
    process = run(tiny_model, tmp_path / "out", metadata, task="pdd_wikimia_32", check=False)
    assert_refused(
        process,
        f"{data}: rows 0 and 1 hold the same text once cut to their first 5 whitespace words (max_words) with "
        f"label 1 and 0",
        "a text cannot be both a member and a non-member",
        '"max_words": N}\' with N > 5, or null for whole texts',
    )


def test_pdd_controlled_with_repeated_rows_scores_each_text_once(tiny_model, tiny_table, tmp_path):
    directory = tmp_path / "controlled"
    directory.mkdir()
    (directory / "model").symlink_to(tiny_model, target_is_directory=True)
    write_jsonl(directory / "data.jsonl", LABELLED[:4] + LABELLED[12:16] + LABELLED[:2])
    metadata = {"controlled_dir": str(directory), "freq_table": str(tiny_table)}
    out = tmp_path / "out"
    args = harness_args(f"pretrained={directory / 'model'},dtype=float32", "pdd_controlled", out, device="cpu")
    process = run_lm_eval(args + ["--metadata", json.dumps(metadata)], cwd=tmp_path)
    _, recorded, scored = task_results(out, "pdd_controlled")
    assert scored == 8
    assert recorded["repeats"]["examples"] == [["row 0", "row 8"], ["row 1", "row 9"]]
    assert "pdd_controlled: 10 texts hold 8 distinct texts" in process.stderr
    assert not math.isnan(read_results(out)["results"]["pdd_controlled"]["loss_auc,none"])
