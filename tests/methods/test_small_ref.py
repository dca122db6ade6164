"""Small-Ref: the pure score, and the reference model the task loads, batches and caches itself,
through the real ``lm_eval`` command line with two fixture models of different tokenizers (the
target: the tiny GPT-2 of conftest, start token <|endoftext|> = EOS; the reference: a tiny Llama
whose tokenizer adds BOS <s>)."""

from __future__ import annotations

import json
import os
import shutil

import numpy as np
import pytest
import torch
from support.harness import cpu_float32, harness_args, read_results, read_samples, run_lm_eval, wikimia_rows
from support.models import build_table_for, build_tiny_model, train_on
from transformers import AutoModelForCausalLM, AutoTokenizer

from pdd_metrics import loss_score, small_ref_score
from pdd_tasks.registry import DEFAULT_METHODS, ScoringSettings, SettingError, label


TASK = "pdd_wikimia_32"
LIMIT = 12


# -- the pure function ---------------------------------------------------------------------------


def test_small_ref_score_hand_values():
    # target mean -1.5, reference mean -3 (three tokens of its own tokenizer): -1.5 - (-3) = 1.5
    assert small_ref_score(np.array([-1.0, -2.0]), np.array([-3.0, -2.0, -4.0])) == 1.5
    # the same model as reference: 0; a reference that finds the text easier: negative
    assert small_ref_score(np.array([-2.0, -4.0]), np.array([-3.0])) == 0.0
    assert small_ref_score(np.array([-5.0]), np.array([-1.0, -1.0])) == -4.0


@pytest.mark.parametrize(
    ("target", "reference", "message"),
    [
        (np.array([-1.0]), np.array([]), "reference_logprobs: got 0 tokens"),
        (np.array([-1.0]), np.array([np.nan]), "reference_logprobs has 1 non-finite"),
        (np.array([]), np.array([-1.0]), "token_logprobs: got 0 tokens"),
    ],
)
def test_small_ref_score_refuses_empty_and_nan(target, reference, message):
    with pytest.raises(ValueError, match=message):
        small_ref_score(target, reference)


def test_small_ref_is_off_unless_a_reference_model_is_named():
    assert "small_ref" not in DEFAULT_METHODS
    settings = ScoringSettings.from_metadata({"small_ref_model": "EleutherAI/pythia-70m"})
    assert "small_ref" in settings.methods
    assert label("small_ref", settings) == "Small-Ref (pythia-70m)"
    with pytest.raises(SettingError, match="small_ref_dtype='float8'"):
        ScoringSettings.from_metadata({"small_ref_dtype": "float8"})


# -- a direct computation, for the target and for the tiny Llama (another tokenizer) ------------


def direct_mean_logprob(model_dir, text):
    """mean log p of the text's tokens after the tokenizer's BOS (else EOS), a plain forward pass."""
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32).eval()
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    start = tokenizer.bos_token_id if tokenizer.bos_token_id is not None else tokenizer.eos_token_id
    ids = tokenizer(text, add_special_tokens=False).input_ids
    with torch.no_grad():
        logp = torch.log_softmax(model(torch.tensor([[start] + ids])).logits[0, :-1].double(), dim=-1)
    return float(logp[torch.arange(len(ids)), torch.tensor(ids)].mean())


def run(target, table, out, home, metadata, check=True, model_args="", task=TASK, limit=LIMIT):
    """An lm_eval run of the target on the first ``limit`` texts, with LM_EVAL_PDD_HOME=home."""
    metadata = {"freq_table": str(table), "small_ref_device": "cpu", "small_ref_batch_size": 5, **metadata}
    model_args = cpu_float32(target) + model_args
    args = harness_args(model_args, task, out, batch_size=4, metadata=metadata, limit=limit, device="cpu")
    previous = os.environ.get("LM_EVAL_PDD_HOME")
    os.environ["LM_EVAL_PDD_HOME"] = str(home)
    try:
        return run_lm_eval(args, cwd=out.parent, check=check)
    finally:
        if previous is None:
            del os.environ["LM_EVAL_PDD_HOME"]
        else:
            os.environ["LM_EVAL_PDD_HOME"] = previous


def small_ref_scores(out):
    return {s["doc_id"]: (s["doc"]["text"], s["small_ref_auc"][0], s["loss_auc"][0]) for s in read_samples(out, TASK)}


@pytest.fixture(scope="module")
def runs(tiny_model, tiny_table, tiny_llama, tmp_path_factory):
    """Run 1 scores with the reference; run 2 reads its cache; then the reference is fine-tuned in
    place and run 3 must score again (same path, new files)."""
    base = tmp_path_factory.mktemp("small-ref")
    reference = shutil.copytree(tiny_llama, base / "tiny-llama")
    home = base / "home"
    outs, expected = {}, {}
    for name in ("first", "second"):
        outs[name] = base / name / "out"
        outs[name].parent.mkdir()
        run(tiny_model, tiny_table, outs[name], home, {"small_ref_model": str(reference)})
    texts = [text for text, _, _ in small_ref_scores(outs["first"]).values()]
    expected["before"] = {text: direct_mean_logprob(reference, text) for text in texts}
    train_on(reference, texts[:4], steps=30)
    outs["tuned"] = base / "tuned" / "out"
    outs["tuned"].parent.mkdir()
    run(tiny_model, tiny_table, outs["tuned"], home, {"small_ref_model": str(reference)})
    expected["after"] = {text: direct_mean_logprob(reference, text) for text in texts}
    return {"outs": outs, "expected": expected, "reference": reference, "home": home, "base": base}


def test_small_ref_equals_a_direct_computation_with_two_tokenizers(runs, tiny_model):
    target_tokenizer = AutoTokenizer.from_pretrained(tiny_model)
    reference_tokenizer = AutoTokenizer.from_pretrained(runs["reference"])
    scores = small_ref_scores(runs["outs"]["first"])
    assert len(scores) == LIMIT
    lengths_differ = False
    for text, score, loss in scores.values():
        target = direct_mean_logprob(tiny_model, text)
        assert loss == pytest.approx(target, abs=1e-4)
        assert score == pytest.approx(target - runs["expected"]["before"][text], abs=1e-4)
        assert score == pytest.approx(loss_score(np.array([loss])) - runs["expected"]["before"][text], abs=1e-4)
        lengths_differ |= len(target_tokenizer(text).input_ids) != len(
            reference_tokenizer(text, add_special_tokens=False).input_ids
        )
    assert lengths_differ  # the two tokenizers really split the texts differently


def test_results_json_has_the_metric_and_names_the_reference_model(runs):
    results = read_results(runs["outs"]["first"])
    assert 0.0 <= results["results"][TASK]["small_ref_auc,none"] <= 1.0
    used = results["configs"][TASK]["metadata"]["small_ref_used"]
    assert used["model"] == str(runs["reference"])
    assert used["start_token"] == "<s>"  # the reference's own BOS, not the target's <|endoftext|>
    assert used["dtype"] == "float32" and used["device"] == "cpu"
    assert (used["texts_scored"], used["texts_from_cache"]) == (LIMIT, 0)
    assert used["cache"].startswith(str(runs["home"] / "small_ref"))


def test_the_table_shows_small_ref_with_its_reference(runs, capsys):
    from pdd_tasks.tools.cli import main

    assert main(["table", str(runs["outs"]["first"])]) == 0
    metrics = read_results(runs["outs"]["first"])["results"][TASK]
    row = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("| Small-Ref (tiny-llama) |"))
    assert f"{metrics['small_ref_auc,none']:.3f} ± {metrics['small_ref_auc_stderr,none']:.3f}" in row


def test_second_run_reads_the_cache(runs):
    first, second = (read_results(runs["outs"][name])["configs"][TASK]["metadata"] for name in ("first", "second"))
    assert (second["small_ref_used"]["texts_scored"], second["small_ref_used"]["texts_from_cache"]) == (0, LIMIT)
    assert second["small_ref_used"]["fingerprint"] == first["small_ref_used"]["fingerprint"]
    assert small_ref_scores(runs["outs"]["second"]) == small_ref_scores(runs["outs"]["first"])


def test_a_model_changed_in_place_is_scored_again(runs):
    tuned = read_results(runs["outs"]["tuned"])["configs"][TASK]["metadata"]["small_ref_used"]
    first = read_results(runs["outs"]["first"])["configs"][TASK]["metadata"]["small_ref_used"]
    assert tuned["fingerprint"] != first["fingerprint"]
    assert (tuned["texts_scored"], tuned["texts_from_cache"]) == (LIMIT, 0)
    for text, score, loss in small_ref_scores(runs["outs"]["tuned"]).values():
        assert runs["expected"]["after"][text] != pytest.approx(runs["expected"]["before"][text], abs=1e-3)
        assert score == pytest.approx(loss - runs["expected"]["after"][text], abs=1e-4)


def test_a_cache_file_of_another_model_is_refused(runs, tiny_model, tiny_table, tmp_path):
    cache = read_results(runs["outs"]["first"])["configs"][TASK]["metadata"]["small_ref_used"]["cache"]
    copy = tmp_path / "cache.jsonl"
    shutil.copy(cache, copy)
    out = tmp_path / "out"
    metadata = {"small_ref_model": str(tiny_model), "small_ref_cache": str(copy)}
    process = run(tiny_model, tiny_table, out, runs["home"], metadata, check=False)
    assert process.returncode != 0
    assert "ReferenceCacheError" in process.stderr and "was written for reference model" in process.stderr
    assert str(runs["reference"]) in process.stderr and "small_ref_cache" in process.stderr
    assert "Traceback" not in process.stderr
    assert copy.read_bytes() == open(cache, "rb").read()  # left as it was


def test_a_missing_reference_model_is_a_clear_error(tiny_model, tiny_table, tmp_path):
    out = tmp_path / "out"
    missing = tmp_path / "no-such-model"
    process = run(tiny_model, tiny_table, out, tmp_path / "home", {"small_ref_model": str(missing)}, check=False)
    assert process.returncode != 0
    assert "ReferenceModelError" in process.stderr and f"small_ref_model={str(missing)!r}" in process.stderr
    assert "Traceback" not in process.stderr
    assert not list(out.parent.rglob("results_*.json"))


def test_a_directory_without_a_model_is_a_clear_error(tiny_model, tiny_table, tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "notes.json").write_text(json.dumps({"not": "a model"}))
    process = run(
        tiny_model, tiny_table, tmp_path / "out", tmp_path / "home", {"small_ref_model": str(empty)}, check=False
    )
    assert process.returncode != 0
    assert "ReferenceModelError" in process.stderr and "holds no causal LM" in process.stderr
    assert "Traceback" not in process.stderr


def test_a_masked_lm_as_the_reference_model_is_refused(tiny_model, tiny_table, bert_mlm, tmp_path):
    # AutoModelForCausalLM would load the BertForMaskedLM as a BertLMHeadModel and report small_ref_auc.
    out = tmp_path / "out"
    process = run(tiny_model, tiny_table, out, tmp_path / "home", {"small_ref_model": str(bert_mlm)}, check=False)
    assert process.returncode != 0, process.stderr[-2000:]
    assert "ReferenceModelError" in process.stderr and "Traceback" not in process.stderr
    assert "holds a BertForMaskedLM (model type 'bert'), not a causal LM" in process.stderr
    assert "Scoring" not in process.stderr and not list(out.parent.rglob("results_*.json"))


# -- truncation ----------------------------------------------------------------------------------


def with_context_window(model_dir, directory, window):
    """A copy of a Llama directory whose config declares a context window of ``window`` tokens."""
    copy = shutil.copytree(model_dir, directory)
    config = json.loads((copy / "config.json").read_text())
    config["max_position_embeddings"] = window
    (copy / "config.json").write_text(json.dumps(config))
    return copy


def test_under_truncation_the_reference_scores_what_the_target_scored(tiny_model, tiny_table, tiny_llama, tmp_path):
    """truncate: the target (context 16) scores each text's first 16 tokens; the reference scores
    the same beginning of the text (up to the end of the target's 16th token), in its own tokens."""
    out = tmp_path / "out"
    metadata = {"small_ref_model": str(tiny_llama), "truncate": True}
    run(tiny_model, tiny_table, out, tmp_path / "home", metadata, model_args=",max_length=16")
    tokenizer = AutoTokenizer.from_pretrained(tiny_model)
    scores = small_ref_scores(out)
    assert len(scores) == LIMIT  # every text is checked, none vacuously
    for text, score, loss in scores.values():
        encoded = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
        assert len(encoded.input_ids) > 16  # every text was cut
        prefix = text[: encoded.offset_mapping[15][1]]
        assert loss == pytest.approx(direct_mean_logprob(tiny_model, prefix), abs=1e-4)
        assert score == pytest.approx(loss - direct_mean_logprob(tiny_llama, prefix), abs=1e-4)


def test_a_text_longer_than_the_reference_window_is_an_error_without_truncation(
    tiny_model, tiny_table, tiny_llama, tmp_path
):
    reference = with_context_window(tiny_llama, tmp_path / "short-llama", 16)
    process = run(
        tiny_model, tiny_table, tmp_path / "out", tmp_path / "home", {"small_ref_model": str(reference)}, check=False
    )
    assert process.returncode != 0
    assert "TextTooLongError" in process.stderr
    assert "the Small-Ref reference model's context window of 16 tokens" in process.stderr
    assert '"truncate": true' in process.stderr and "Traceback" not in process.stderr


# -- the fine-tuning reference attack on pdd_controlled ------------------------------------------


def test_pdd_controlled_with_the_untuned_base_as_reference(tmp_path):
    """The classic use: the target fine-tuned on half a pool, the untuned base model as reference."""
    from pdd_tasks.tools.builders.controlled import make_controlled
    from pdd_tasks.tools.builders.fine_tuning import TuningSettings

    base = build_tiny_model(tmp_path / "base", seed=3)
    pool = tmp_path / "pool.jsonl"
    pool.write_text("".join(json.dumps({"text": row["input"]}) + "\n" for row in wikimia_rows(32)[:48]))
    settings = TuningSettings(seed=0, learning_rate=3e-3, batch_size=4, epochs=25)
    benchmark = make_controlled(
        tmp_path / "benchmark", base, pool=str(pool), text_field="text", settings=settings, progress=False
    )
    table = build_table_for(base, tmp_path / "table.npz")
    out = tmp_path / "out"
    metadata = {"controlled_dir": str(benchmark), "small_ref_model": str(base)}
    run(benchmark / "model", table, out, tmp_path / "home", metadata, task="pdd_controlled", limit=None)
    results = read_results(out)
    assert results["results"]["pdd_controlled"]["small_ref_auc,none"] > 0.8
    used = results["configs"]["pdd_controlled"]["metadata"]["small_ref_used"]
    assert used["model"] == str(base) and used["texts_scored"] == 48


def test_a_small_ref_cache_that_names_a_users_file_is_refused_and_left_alone(tmp_path):
    """small_ref_cache naming a file that is no Small-Ref cache (a user's data) is an error naming the
    fix, before anything is appended to it."""
    from pdd_tasks.prepare.small_ref import ReferenceCache, ReferenceCacheError

    data = tmp_path / "texts.jsonl"
    data.write_text('{"text": "a user\'s own row"}\n', encoding="utf-8")
    with pytest.raises(
        ReferenceCacheError, match=r"is not a Small-Ref cache file.*Name another file with small_ref_cache"
    ):
        ReferenceCache(data, "some-model", "0" * 64)
    assert data.read_text(encoding="utf-8") == '{"text": "a user\'s own row"}\n'
