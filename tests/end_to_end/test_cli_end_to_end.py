"""End to end through the real ``lm_eval`` command line with a tiny GPT-2 built in a fixture."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
import torch
from support.harness import (
    PATCHED_LM_EVAL_CLI,
    cpu_float32,
    harness_args,
    read_results,
    read_samples,
    run_lm_eval,
    tasks_path,
    wikimia_rows,
)
from support.standard_tasks import STOCK_TASK
from transformers import AutoModelForCausalLM, AutoTokenizer

from pdd_tasks.freq.tables import FrequencyTable
from pdd_tasks.registry import DEFAULT_METHODS, METHODS, ScoringSettings, TextInputs, extra_requests


LIMIT = 24


def run_pdd(
    model_dir,
    table,
    out,
    task="pdd_wikimia_32",
    batch_size=1,
    limit=LIMIT,
    metadata=None,
    include=None,
    model="hf",
    command=None,
):
    meta = {"freq_table": str(table), **(metadata or {})}
    args = harness_args(
        cpu_float32(model_dir),
        task,
        out,
        model=model,
        include=include,
        batch_size=batch_size,
        metadata=meta,
        limit=limit,
        device="cpu",
    )
    return run_lm_eval(args, cwd=out.parent, command=command)


def direct_token_stats(model, tokenizer, text):
    """log p(x_i | x_<i), mu_i, sigma_i and max_v log p_i(v) from a plain transformers forward pass after
    <|endoftext|>."""
    ids = tokenizer(text, add_special_tokens=False).input_ids
    inputs = torch.tensor([[tokenizer.eos_token_id] + ids])
    with torch.no_grad():
        logp = torch.log_softmax(model(inputs).logits[0, :-1].double(), dim=-1)
    token_logp = logp[torch.arange(len(ids)), torch.tensor(ids)].numpy()
    p = logp.exp()
    mu = (p * logp).sum(-1)
    sigma = ((p * (logp - mu[:, None]) ** 2).sum(-1)).sqrt()
    return np.array(ids), token_logp, mu.numpy(), sigma.numpy(), logp.max(-1).values.numpy()


def scores_by_doc(samples):
    return {s["doc_id"]: {m: s[f"{m}_auc"][0] for m in DEFAULT_METHODS} for s in samples}


@pytest.fixture(scope="module")
def runs(tiny_model, tiny_table, tmp_path_factory):
    out = {}
    for batch_size in (1, 8):
        directory = tmp_path_factory.mktemp(f"bs{batch_size}") / "out"
        run_pdd(tiny_model, tiny_table, directory, batch_size=batch_size)
        out[batch_size] = directory
    return out


def test_log_samples_equal_direct_forward_pass(runs, tiny_model, tiny_table):
    model = AutoModelForCausalLM.from_pretrained(tiny_model, dtype=torch.float32).eval()
    tokenizer = AutoTokenizer.from_pretrained(tiny_model)
    log_freq = FrequencyTable.load(tiny_table).log_frequencies(model.config.vocab_size)
    samples = read_samples(runs[1], "pdd_wikimia_32")
    assert len(samples) == LIMIT
    settings = ScoringSettings()
    for sample in samples:
        text = sample["doc"]["text"]
        ids, logp, mu, sigma, top1 = direct_token_stats(model, tokenizer, text)
        extra = {}  # each default method's extra requests (Lowercase: the lowercased text), scored directly
        for method, context, continuation in extra_requests(text, settings):
            assert not context, "a default method with a prefixed request: score it here after its context"
            extra.setdefault(method, []).append(direct_token_stats(model, tokenizer, continuation)[1])
        inputs = TextInputs(text, logp, ids, mu, sigma, log_freq, extra, top1=top1)
        for method in DEFAULT_METHODS:
            value = METHODS[method].reference(inputs, settings)  # the registry's plain computation
            score, label = sample[f"{method}_auc"]
            assert label == sample["doc"]["label"]
            assert score == pytest.approx(value, abs=1e-4), (method, sample["doc_id"])


def test_scores_do_not_depend_on_batch_size(runs):
    one = scores_by_doc(read_samples(runs[1], "pdd_wikimia_32"))
    eight = scores_by_doc(read_samples(runs[8], "pdd_wikimia_32"))
    assert one.keys() == eight.keys()
    for doc_id in one:
        for method in DEFAULT_METHODS:
            assert eight[doc_id][method] == pytest.approx(one[doc_id][method], abs=1e-5)


def test_batch_size_auto_gives_the_same_scores(runs, tiny_model, tiny_table, tmp_path):
    """``--batch_size auto``: HFLM's batch-size probe reads the pdd requests (it crashed on them once)."""
    out = tmp_path / "out"
    process = run_pdd(tiny_model, tiny_table, out, batch_size="auto")
    assert "Determined largest batch size" in process.stdout  # the probe ran on the pdd requests
    auto = scores_by_doc(read_samples(out, "pdd_wikimia_32"))
    one = scores_by_doc(read_samples(runs[1], "pdd_wikimia_32"))
    assert auto.keys() == one.keys()
    for doc_id in one:
        assert auto[doc_id] == pytest.approx(one[doc_id], abs=1e-5)


def test_hf_pdd_model_name(runs, tiny_model, tiny_table, tmp_path):
    """``--model hf-pdd`` (``python -m pdd_tasks.lm_eval_patches``: lm-eval's CLI with hf-pdd registered) scores as ``--model hf``."""
    out = tmp_path / "out"
    run_pdd(tiny_model, tiny_table, out, batch_size=8, model="hf-pdd", command=PATCHED_LM_EVAL_CLI)
    results = read_results(out)
    assert results["config"]["model"] == "hf-pdd"
    assert results["configs"]["pdd_wikimia_32"]["metadata"]["token_scores"]["backend"] == "hf"
    pdd = scores_by_doc(read_samples(out, "pdd_wikimia_32"))
    stock = scores_by_doc(read_samples(runs[8], "pdd_wikimia_32"))
    assert pdd.keys() == stock.keys()
    assert pdd == stock  # the same code on the same batches: identical numbers


def test_results_json_has_every_method_and_metric(runs, tiny_table):
    results = read_results(runs[8])
    metrics = results["results"]["pdd_wikimia_32"]
    for method in DEFAULT_METHODS:
        for name in ("auc", "tpr@fpr<5%", "tpr@fpr<1%"):
            value = metrics[f"{method}_{name},none"]
            assert 0.0 <= value <= 1.0
    used = results["configs"]["pdd_wikimia_32"]["metadata"]["freq_table_used"]
    assert used["path"] == str(tiny_table)


def test_trained_model_separates_members(trained_tiny, tmp_path):
    """A tiny model trained on some texts tells them from others it never saw."""
    members, non_members = trained_tiny["members"], trained_tiny["unseen"][:40]
    model_dir, table = trained_tiny["model"], trained_tiny["table"]
    data = tmp_path / "texts.jsonl"
    data.write_text(
        "".join(json.dumps({"text": t, "label": 1}) + "\n" for t in members)
        + "".join(json.dumps({"text": t, "label": 0}) + "\n" for t in non_members)
    )
    out = tmp_path / "out"
    run_pdd(model_dir, table, out, task="pdd_custom", batch_size=8, limit=None, metadata={"data_files": str(data)})
    metrics = read_results(out)["results"]["pdd_custom"]
    for method in ("loss", "min_k", "min_k_pp", "dcpdd"):
        assert metrics[f"{method}_auc,none"] > 0.8, (method, metrics[f"{method}_auc,none"])


def test_stock_task_answers_unchanged_by_plugin(tiny_model, tiny_table, tmp_path):
    rows = wikimia_rows(32)[:12]
    data = tmp_path / "choice.jsonl"
    data.write_text(
        "".join(
            json.dumps(
                {"question": r["input"][:60], "choices": [r["input"][60:100], " the end.", " and so on"], "answer": 0}
            )
            + "\n"
            for r in rows
        )
    )
    stock_only = tmp_path / "stock_tasks"
    stock_only.mkdir()
    (stock_only / "local_choice.yaml").write_text(STOCK_TASK.format(data=data))
    mixed = tmp_path / "mixed_tasks"
    shutil.copytree(tasks_path(), mixed, ignore=shutil.ignore_patterns("__pycache__", "*.py"))
    (mixed / "local_choice.yaml").write_text(STOCK_TASK.format(data=data))

    for batch_size in (1, 4):
        alone = tmp_path / f"alone{batch_size}" / "out"
        alone.parent.mkdir()
        run_lm_eval(
            harness_args(
                cpu_float32(tiny_model), "local_choice", alone, include=stock_only, batch_size=batch_size, device="cpu"
            ),
            cwd=alone.parent,
            process=True,  # lm-eval as it is without the plugin: a process that never loaded a pdd task
        )
        together = tmp_path / f"together{batch_size}" / "out"
        together.parent.mkdir()
        run_pdd(
            tiny_model,
            tiny_table,
            together,
            task="local_choice,pdd_wikimia_32",
            batch_size=batch_size,
            limit=12,
            include=mixed,
        )
        assert read_samples(together, "pdd_wikimia_32")  # the plugin really ran in this process
        resps_alone = [s["resps"] for s in read_samples(alone, "local_choice")]
        resps_together = [s["resps"] for s in read_samples(together, "local_choice")]
        assert resps_alone == resps_together
