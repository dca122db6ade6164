"""The ``convention`` setting: ``"reference-code"`` scores what the authors' scripts score.

The Min-K%++ script (zjysteven/mink-plus-plus ``run.py``) and DC-PDD's (zhang-wei-chao/DC-PDD
``com_pro_dis.py``, ``com_det_sco.py``) run the model on ``tokenizer.encode(text)`` (the tokenizer's
default special tokens) and score logits ``[:-1]`` against ids ``[1:]``: the first id is never
scored. Here, against a direct transformers computation of exactly that and the scripts' formulas
(written out below from the scripts, not from ``pdd_metrics``), through the real ``lm_eval`` command
line, for a tokenizer without BOS (the tiny GPT-2 of conftest.py: the first text token is not
scored) and one with BOS (the same architecture, its tokenizer's post-processor adds ``<s>``, as
LLaMA's does: every text token is scored after BOS, as in the default convention). Then the vLLM and
completions paths on their recorded structures, context requests, and the errors.
"""

from __future__ import annotations

import json
import zlib
from pathlib import Path

import numpy as np
import pytest
import torch
from support.harness import cpu_float32, harness_args, read_results, read_samples, run_lm_eval, wikimia_rows
from transformers import AutoModelForCausalLM, AutoTokenizer

from pdd_tasks.backends.base import EmptyTextError, PerTokenRequest, encode_text, split_after_start_token
from pdd_tasks.freq.tables import FrequencyTable
from pdd_tasks.registry import DEFAULT_METHODS, ScoringSettings, SettingError
from pdd_tasks.tools.report.tables import method_table


LIMIT = 12
TASK = "pdd_wikimia_32"
DCPDD_A = 0.01
TOLERANCE = 1e-4  # float32 capture vs float64 reference


# -- fixtures -------------------------------------------------------------------------------------


def run(model_dir: Path, table: Path, out: Path, convention: str | None, extra: list[str] = ()) -> Path:
    metadata = {"freq_table": str(table), **({"convention": convention} if convention else {})}
    args = harness_args(cpu_float32(model_dir), TASK, out, batch_size=4, metadata=metadata, limit=LIMIT, device="cpu")
    run_lm_eval([*args, *extra], cwd=out.parent)
    return out


@pytest.fixture(scope="module")
def no_bos_runs(tiny_model, tiny_table, tmp_path_factory) -> dict[str, Path]:
    """``convention`` absent (the default, "paper", written to a --use_cache file) and "reference-code"."""
    root = tmp_path_factory.mktemp("no-bos")
    return {
        "paper": run(tiny_model, tiny_table, root / "paper", None, ["--use_cache", str(root / "cache")]),
        "reference-code": run(tiny_model, tiny_table, root / "reference", "reference-code"),
        "cache": root / "cache",
    }


@pytest.fixture(scope="module")
def bos_runs(bos_model, bos_table, tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("bos")
    return {convention: run(bos_model, bos_table, root / convention, convention) for convention in CONVENTIONS}


CONVENTIONS = ("paper", "reference-code")


# -- the scripts' computation, written out ----------------------------------------------------------


def script_token_values(model, tokenizer, text: str):
    """Min-K%++ ``run.py`` (and DC-PDD ``com_pro_dis.py``'s ``cal_ppl``): ``input_ids =
    tokenizer.encode(text)``; log-softmax of ``logits[0, :-1]``; the log-prob of ``input_ids[1:]``;
    ``mu = sum p log p``; ``sigma = sum p (log p)^2 - mu^2`` (a variance: the scripts take its sqrt)."""
    input_ids = torch.tensor(tokenizer.encode(text)).unsqueeze(0)
    with torch.no_grad():
        logits = model(input_ids).logits.double()
    probs = torch.softmax(logits[0, :-1], dim=-1)
    log_probs = torch.log_softmax(logits[0, :-1], dim=-1)
    scored = input_ids[0][1:]
    token_log_probs = log_probs.gather(dim=-1, index=scored.unsqueeze(-1)).squeeze(-1)
    mu = (probs * log_probs).sum(-1)
    variance = (probs * torch.square(log_probs)).sum(-1) - torch.square(mu)
    return scored.numpy(), token_log_probs.numpy(), mu.numpy(), variance.numpy()


def script_gap_k(model, tokenizer, text: str, window: int = 3, ratio: float = 0.2) -> float:
    """Gap-K% as the authors' ``wikimia.py`` (meaoww/gap-k) computes it: the same tokens as ``run.py``;
    ``gap = log p(x_i) - log p(argmax logits)``, divided by ``sqrt(clamp(sum p (log p)^2 - mu^2, 1e-8))``;
    ``window_lowmean``: ``np.convolve`` with a box of ``window`` ones / ``window`` (mode ``valid``; the
    raw gaps when fewer than ``window``), then the mean of the ``max(1, int(len * ratio))`` lowest."""
    input_ids = torch.tensor(tokenizer.encode(text)).unsqueeze(0)
    with torch.no_grad():
        logits = model(input_ids).logits[0, :-1].double()
    probs, log_probs = torch.softmax(logits, dim=-1), torch.log_softmax(logits, dim=-1)
    token_log_probs = log_probs.gather(dim=-1, index=input_ids[0, 1:].unsqueeze(-1)).squeeze(-1)
    mu = (probs * log_probs).sum(-1)
    variance = torch.clamp((probs * torch.square(log_probs)).sum(-1) - torch.square(mu), min=1e-8)
    top1 = log_probs.gather(dim=-1, index=torch.argmax(logits, dim=-1).unsqueeze(-1)).squeeze(-1)
    gaps = ((token_log_probs - top1) / variance.sqrt()).numpy()
    smoothed = gaps if gaps.size < window else np.convolve(gaps, np.ones(window) / window, mode="valid")
    return float(np.mean(np.sort(smoothed)[: max(1, int(len(smoothed) * ratio))]))


def script_scores(model, tokenizer, text: str, counts: np.ndarray) -> dict[str, float]:
    """Each default method's score of ``text`` as the scripts compute it, oriented higher = member.

    Loss, Zlib, Min-K% (k=0.2), Min-K%++ (k=0.2): ``run.py`` (its scores are larger for members).
    Gap-K% (k=0.2, window 3): the Gap-K% authors' ``wikimia.py`` (larger for members), :func:`script_gap_k`.
    Lowercase and DC-PDD: ``com_det_sco.py`` ``cal_met``, whose scores are larger for non-members
    (``roc_curve(x, -score)``): Lowercase here is the reciprocal of its ``log(tar_ppl)/log(low_ppl)``,
    DC-PDD the negative of its ``-mean(ce)``. The reference frequencies are the script's smoothed
    ``fre_dis_smo = (counts + 1) / (sum(counts) + len(counts))`` of the fixture's table counts.
    """
    ids, lp, mu, variance = script_token_values(model, tokenizer, text)
    _, low_lp, _, _ = script_token_values(model, tokenizer, text.lower())
    ll = lp.mean()
    k = int(len(lp) * 0.2)
    assert k >= 1, "the fixture texts are long enough for the scripts' k"
    mink_plus = (lp - mu) / np.sqrt(variance)
    tar_ppl, low_ppl = np.exp(-np.mean(lp)), np.exp(-np.mean(low_lp))
    indexes, seen = [], []
    for i, input_id in enumerate(ids.tolist()):  # "tokens with first occurance in text"
        if input_id not in seen:
            indexes.append(i)
            seen.append(input_id)
    frequencies = (counts + 1) / (counts.sum() + len(counts))
    ce = np.exp(lp)[indexes] * np.log(1 / frequencies[ids[indexes]])
    ce[ce > DCPDD_A] = DCPDD_A
    return {
        "loss": ll,
        "zlib": ll / len(zlib.compress(bytes(text, "utf-8"))),
        "min_k": np.mean(np.sort(lp)[:k]),
        "min_k_pp": np.mean(np.sort(mink_plus)[:k]),
        "gap_k": script_gap_k(model, tokenizer, text),
        "lowercase": 1 / (np.log(tar_ppl) / np.log(low_ppl)),
        "dcpdd": np.mean(ce),  # the script's pred["DC-PDD"] = -np.mean(ce), larger for non-members
    }


def assert_scores_equal_the_scripts(output: Path, model_dir: Path, table: Path) -> None:
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32).eval()
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    counts = np.asarray(FrequencyTable.load(table).counts, dtype=np.float64)
    samples = read_samples(output, TASK)
    assert len(samples) == LIMIT
    for sample in samples:
        expected = script_scores(model, tokenizer, sample["doc"]["text"], counts)
        assert set(expected) <= set(DEFAULT_METHODS)
        for method in expected:  # the methods the scripts compute
            got = sample[f"{method}_auc"][0]
            assert got == pytest.approx(expected[method], abs=TOLERANCE), (method, sample["doc_id"])


def per_doc(output: Path) -> dict[int, dict[str, float]]:
    return {s["doc_id"]: {m: s[f"{m}_auc"][0] for m in DEFAULT_METHODS} for s in read_samples(output, TASK)}


# -- through lm_eval --------------------------------------------------------------------------------


def test_without_bos_reference_code_scores_as_the_scripts(no_bos_runs, tiny_model, tiny_table):
    assert_scores_equal_the_scripts(no_bos_runs["reference-code"], tiny_model, tiny_table)


def test_without_bos_the_conventions_differ_by_the_first_token(no_bos_runs, tiny_model):
    """The default scores the text's first token after <|endoftext|>; the scripts do not score it."""
    tokenizer = AutoTokenizer.from_pretrained(tiny_model)
    assert tokenizer.encode("Some text") == tokenizer("Some text", add_special_tokens=False).input_ids  # no BOS
    paper, reference = per_doc(no_bos_runs["paper"]), per_doc(no_bos_runs["reference-code"])
    assert paper.keys() == reference.keys()
    for doc_id in paper:
        for method in ("loss", "min_k_pp", "dcpdd"):
            assert paper[doc_id][method] != pytest.approx(reference[doc_id][method], abs=1e-6), (method, doc_id)


def test_with_bos_reference_code_scores_as_the_scripts(bos_runs, bos_model, bos_table):
    assert_scores_equal_the_scripts(bos_runs["reference-code"], bos_model, bos_table)


def test_with_bos_both_conventions_score_the_same_tokens(bos_runs):
    """A tokenizer that adds BOS (LLaMA): the scripts score every text token after BOS, as the default."""
    paper, reference = per_doc(bos_runs["paper"]), per_doc(bos_runs["reference-code"])
    assert paper.keys() == reference.keys()
    for doc_id in paper:
        for method in DEFAULT_METHODS:
            assert paper[doc_id][method] == pytest.approx(reference[doc_id][method], abs=1e-6), (method, doc_id)


def test_convention_is_recorded_and_noted_under_the_table(no_bos_runs):
    for convention in CONVENTIONS:
        results = read_results(no_bos_runs[convention])
        assert results["configs"][TASK]["metadata"]["convention"] == convention  # also the default, unasked
        table = method_table(results)
        assert table.splitlines()[0].startswith("| method |")
        assert ("reference-code" in table) == (convention == "reference-code"), table
        assert "Loss" in table and "DC-PDD (a=0.01)" in table


def test_a_cache_of_the_other_convention_is_refused(no_bos_runs, tiny_model, tiny_table, tmp_path):
    """lm-eval's --use_cache key is the request's text alone; an answer of the other convention would
    silently give the other convention's scores."""
    args = harness_args(
        cpu_float32(tiny_model),
        TASK,
        tmp_path / "out",
        batch_size=4,
        metadata={"freq_table": str(tiny_table), "convention": "reference-code"},
        limit=LIMIT,
        device="cpu",
    )
    process = run_lm_eval([*args, "--use_cache", str(no_bos_runs["cache"])], cwd=tmp_path, check=False)
    assert process.returncode != 0
    assert "Traceback" not in process.stderr, process.stderr[-3000:]
    assert "scored with convention 'paper', but this run asks for 'reference-code'" in process.stderr
    assert "use a cache file per convention" in process.stderr


def test_a_bad_convention_is_refused_with_the_values(tiny_model, tiny_table, tmp_path):
    args = harness_args(
        cpu_float32(tiny_model),
        TASK,
        tmp_path / "out",
        metadata={"freq_table": str(tiny_table), "convention": "reference"},
        limit=2,
        device="cpu",
    )
    process = run_lm_eval(args, cwd=tmp_path, check=False)
    assert process.returncode != 0
    assert "Traceback" not in process.stderr, process.stderr[-3000:]
    assert "metadata convention='reference': expected one of 'paper', 'reference-code'" in process.stderr


@pytest.mark.parametrize("value", ["Paper", "reference_code", None, 1, True])
def test_the_setting_accepts_exactly_the_two_values(value):
    with pytest.raises(SettingError, match="expected one of 'paper', 'reference-code'"):
        ScoringSettings.from_metadata({"convention": value})
    assert ScoringSettings.from_metadata({}).convention == "paper"
    assert ScoringSettings.from_metadata({"convention": "reference-code"}).convention == "reference-code"


# -- the request's tokens on each backend -----------------------------------------------------------


def request(text: str, context: str = "", convention: str = "reference-code", **settings) -> PerTokenRequest:
    return PerTokenRequest(
        request_type="loglikelihood",
        doc={"text": text},
        arguments=(context, text),
        idx=0,
        metadata=("pdd_test", 0, 1),
        convention=convention,
        **settings,
    )


TEXTS = [row["input"] for row in wikimia_rows(32)[:4]]


@pytest.fixture(scope="module", params=["no-bos", "bos"])
def model_dir(request, tiny_model, bos_model) -> Path:
    return tiny_model if request.param == "no-bos" else bos_model


@pytest.fixture(scope="module")
def hflm(model_dir):
    from lm_eval.models.huggingface import HFLM

    from pdd_tasks import lm_eval_patches

    lm_eval_patches.apply()
    return HFLM(pretrained=str(model_dir), batch_size=1, device="cpu")


def test_hf_split_is_the_default_encoding_without_its_first_token(hflm):
    for text in TEXTS:
        ids = hflm.tokenizer.encode(text)
        assert split_after_start_token(hflm, request(text)) == (ids[:1], ids[1:])


def test_context_request_is_the_two_default_encodings_as_recalls_script(hflm):
    """ReCaLL's ``get_conditional_ll``: ``cat(tokenizer(prefix), tokenizer(text))``, every text token scored."""
    prefix, text = TEXTS[1] + " ", TEXTS[0]
    context, tokens = split_after_start_token(hflm, request(text, context=prefix))
    assert context == hflm.tokenizer.encode(prefix)
    assert tokens == hflm.tokenizer.encode(text)


def test_one_token_text_has_nothing_to_score(hflm):
    word = next(
        w for w in ("the", "The", " the", "a") if len(hflm.tokenizer(w, add_special_tokens=False).input_ids) == 1
    )
    ids = hflm.tokenizer.encode(word)
    if len(ids) == 2:  # with BOS: BOS, then the word, which is scored
        assert split_after_start_token(hflm, request(word)) == ([ids[0]], [ids[1]])
        return
    with pytest.raises(EmptyTextError, match='convention "reference-code" never scores the first of them'):
        split_after_start_token(hflm, request(word))
    assert split_after_start_token(hflm, request(word, convention="paper"))[1] == ids  # the default scores it


def test_hf_capture_values_equal_the_scripts(hflm, model_dir):
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32).eval()
    answers = hflm.loglikelihood([request(text) for text in TEXTS], disable_tqdm=True)
    for text, answer in zip(TEXTS, answers, strict=True):
        ids, lp, mu, variance = script_token_values(model, hflm.tokenizer, text)
        assert answer.convention == "reference-code"
        np.testing.assert_array_equal(answer.token_ids, ids)
        np.testing.assert_allclose(answer.logprobs, lp, atol=1e-5)
        np.testing.assert_allclose(answer.mu, mu, atol=1e-5)
        np.testing.assert_allclose(answer.sigma, np.sqrt(variance), atol=1e-5)


def test_truncation_room_counts_the_default_encoding(hflm):
    """With truncation the scored tokens are cut so that the whole prompt fits as under the default."""
    from pdd_tasks.backends.base import ContextLimit

    text = TEXTS[0]
    ids = hflm.tokenizer.encode(text)
    fit = ContextLimit(room=5, limit="5", fixes="fix", window="5")
    context, tokens, cut = encode_text(hflm, request(text, truncate=True), fit)
    assert context == ids[:1] and tokens == ids[1:6] and cut == len(ids) - 6


def test_vllm_prompts_are_the_default_encoding(model_dir):
    from support.vllm import SamplingParams, make_vllm_lm

    from pdd_tasks.backends.vllm import score_per_token_vllm

    lm = make_vllm_lm(model_dir, max_model_len=256, max_logprobs=-1)
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32).eval()
    requests = [request(text, exact_mu_sigma=True) for text in TEXTS]
    answers = score_per_token_vllm(lm, requests, disable_tqdm=True, sampling_params_cls=SamplingParams)
    ((sent, _),) = lm.model.calls
    assert sorted(map(tuple, sent)) == sorted(tuple(lm.tokenizer.encode(text)) for text in TEXTS)
    for text, answer in zip(TEXTS, answers, strict=True):
        ids, lp, mu, variance = script_token_values(model, lm.tokenizer, text)
        np.testing.assert_array_equal(answer.token_ids, ids)
        np.testing.assert_allclose(answer.logprobs, lp, atol=1e-5)
        np.testing.assert_allclose(answer.mu, mu, atol=1e-5)
        np.testing.assert_allclose(answer.sigma, np.sqrt(variance), atol=1e-5)


def test_completions_prompt_and_answer_are_the_default_encoding(model_dir):
    """The local-completions client (lm-eval's real class, no server needed to build it) sends
    ``tokenizer.encode(text)`` as the prompt, and reads the values of ``ids[1:]`` from the echo."""
    from lm_eval.models.openai_completions import LocalCompletionsAPI

    from pdd_tasks.backends.completions import _context_limit, api_model_info, token_scores_from_choice

    lm = LocalCompletionsAPI(
        base_url="http://127.0.0.1:9/v1/completions",
        model="tiny",
        tokenizer=str(model_dir),
        tokenizer_backend="huggingface",
        max_length=256,
    )
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32).eval()
    for text in TEXTS:
        context, tokens, _ = encode_text(lm, request(text), _context_limit(lm))
        prompt = context + tokens
        assert prompt == lm.tokenizer.encode(text)
        with torch.no_grad():  # the server's echo: per prompt position, the token's log-prob and the top 5
            rows = torch.log_softmax(model(torch.tensor([prompt])).logits[0].double(), -1)
        top = [torch.topk(rows[i - 1], 5) for i in range(1, len(prompt))]
        choice = {
            "logprobs": {
                "tokens": [lm.tokenizer.decode([t]) for t in prompt],
                "token_logprobs": [None] + [float(rows[i - 1, prompt[i]]) for i in range(1, len(prompt))],
                "top_logprobs": [None]
                + [
                    {
                        f"{lm.tokenizer.decode([int(t)])}#{int(t)}": float(v)
                        for t, v in zip(k.indices, k.values, strict=True)
                    }
                    for k in top
                ],
            }
        }
        answer = token_scores_from_choice(choice, prompt, len(context), api_model_info(lm, 5))
        ids, lp, _, _ = script_token_values(model, lm.tokenizer, text)
        np.testing.assert_array_equal(answer.token_ids, ids)
        np.testing.assert_allclose(answer.logprobs, lp, atol=1e-6)


def test_cached_answers_keep_their_convention():
    import pickle

    from pdd_tasks.backends.base import ModelInfo, TokenScores

    info = ModelInfo("m", "hf", 4, "f", "exact")
    scores = TokenScores(-1.0, False, [1], [-1.0], [-1.0], [0.5], info, 0, "reference-code")
    assert pickle.loads(pickle.dumps(scores)).convention == "reference-code"
    assert json.loads(json.dumps(list(scores))) == [-1.0, False]


def test_local_completions_server_scores_the_default_encoding(gguf_server_url, tmp_path):
    """A real completions server on 127.0.0.1 (lm-eval-pdd's llama.cpp front on the default model's
    GGUF, Q4_1) under "reference-code": one prompt per text (text and lowercased copy) plus the
    probe, and each document's Loss is the scripts' Loss on the same weights in float32 (within the
    quantization tolerance of test_completions_server.py), not the default convention's."""
    from support.completions import TOLERANCES, completions_model_args, default_model, server_stats

    model_dir, limit, url = default_model(), 4, gguf_server_url
    before = server_stats(url)
    out = tmp_path / "api"
    metadata = {"convention": "reference-code"}
    args = harness_args(
        completions_model_args(url, model_dir), TASK, out, model="local-completions", limit=limit, metadata=metadata
    )
    run_lm_eval(args, cwd=tmp_path)
    assert server_stats(url)["prompts"] - before["prompts"] == 2 * limit + 1
    assert read_results(out)["configs"][TASK]["metadata"]["convention"] == "reference-code"
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32).eval()
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    to_script, to_paper = [], []
    for sample in read_samples(out, TASK):
        text, got = sample["doc"]["text"], sample["loss_auc"][0]
        _, script_lp, _, _ = script_token_values(model, tokenizer, text)
        ids = [tokenizer.bos_token_id] + tokenizer(text, add_special_tokens=False).input_ids
        with torch.no_grad():  # the default convention: every text token after the start token
            rows = torch.log_softmax(model(torch.tensor([ids])).logits[0, :-1].double(), -1)
        to_paper.append(abs(got - rows[torch.arange(len(ids) - 1), torch.tensor(ids[1:])].mean().item()))
        to_script.append(abs(got - float(script_lp.mean())))
    # Q4_1 noise: mean 0.012, max 0.054 per document; the conventions differ by 0.02-0.17 on these texts.
    assert max(to_script) <= TOLERANCES["loss"][0] and np.mean(to_script) < np.mean(to_paper) / 2, (to_script, to_paper)
