"""The vLLM capture (pdd_tasks.backends.vllm) on vLLM's data structures, against the HF capture.

vLLM needs a GPU, so its engine is played by ``support.vllm.EmulatedLLM``: the tiny GPT-2's
log-probs packed exactly as vLLM 0.33.0 packs prompt log-probs. Where the ``vllm`` package imports
(CPU, ``--no-deps``), vLLM's own classes and lm-eval's real ``VLLM`` class are used; otherwise
stand-ins recorded from their source (see tests/support/vllm.py). ``REAL_VLLM`` says which ran.
"""

from __future__ import annotations

import logging

import numpy as np
import pytest
import torch
from lm_eval.api.instance import Instance
from support.harness import wikimia_rows
from support.vllm import REAL_VLLM, EmulatedLLM, SamplingParams, StandInVLLM, make_vllm_lm, real_vllm_class

from pdd_metrics import approximate_mu_sigma
from pdd_tasks import lm_eval_patches
from pdd_tasks.backends.base import PerTokenRequest, TextTooLongError, TokenScores
from pdd_tasks.backends.vllm import (
    ARRAYS_KEY,
    VLLM_MODULE,
    WORKER_STATS_KEY,
    EngineLimitError,
    LogprobRequest,
    PromptLogprobArrays,
    _log_exact_form,
    mu_sigma_from_listed,
    parse_prompt_logprobs,
    prompt_stats_rows,
    sampling_params,
    score_per_token_vllm,
    top1_from_listed,
    wants_prompt_logprob_arrays,
)


TEXTS = [row["input"] for row in wikimia_rows(32)[:6]]


def per_token(text: str, doc_id: int = 0, **settings) -> PerTokenRequest:
    return PerTokenRequest(
        request_type="loglikelihood",
        doc={"text": text},
        arguments=("", text),
        idx=0,
        metadata=("pdd_test", doc_id, 1),
        **settings,
    )


def score(lm, requests):
    return score_per_token_vllm(lm, requests, disable_tqdm=True, sampling_params_cls=SamplingParams)


@pytest.fixture(scope="module")
def hf_scores(tiny_model):
    """The reference: the HF capture's answers for TEXTS (exact mu/sigma over the full vocabulary)."""
    from lm_eval.models.huggingface import HFLM

    lm_eval_patches.apply()
    lm = HFLM(pretrained=str(tiny_model), batch_size=2, device="cpu")
    return lm.loglikelihood([per_token(text, i) for i, text in enumerate(TEXTS)], disable_tqdm=True)


@pytest.fixture()
def vllm_lm(tiny_model):
    return make_vllm_lm(tiny_model, max_model_len=256)


def full_logprobs(tiny_model, token_ids: list[int]) -> torch.Tensor:
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(tiny_model).eval()
    with torch.no_grad():
        return torch.log_softmax(model(torch.tensor([token_ids])).logits[0].float(), -1)


def test_which_vllm_classes_ran():
    # Recorded in the test log: vLLM's own classes (REAL_VLLM) or the recorded stand-ins; where vLLM is
    # installed, lm-eval's VLLM class must import beside it (else the tests below ran on stand-ins only)
    print(f"REAL_VLLM={REAL_VLLM}, lm-eval VLLM class: {real_vllm_class()}")
    assert (real_vllm_class() is not None) == bool(REAL_VLLM)


def test_prompt_is_the_stock_empty_context_encoding(vllm_lm):
    """One prompt per text: [start token] + text tokens, as TemplateLM.loglikelihood builds them."""
    from lm_eval.api.model import TemplateLM

    built = []

    class Recorder(TemplateLM):  # the stock encoding, recorded instead of scored
        tokenizer = vllm_lm.tokenizer
        tok_encode = vllm_lm.tok_encode.__func__
        prefix_token_id = vllm_lm.prefix_token_id
        eot_token_id = vllm_lm.tokenizer.eos_token_id

        def _loglikelihood_tokens(self, requests, **kwargs):
            built.extend(context + continuation for _, context, continuation in requests)
            return [(0.0, False)] * len(requests)

        def generate_until(self, requests):
            raise NotImplementedError

        def loglikelihood_rolling(self, requests):
            raise NotImplementedError

    recorder = Recorder()
    recorder.custom_prefix_token_id = None
    recorder.add_bos_token = None
    recorder.loglikelihood([Instance("loglikelihood", {}, ("", text), 0) for text in TEXTS], disable_tqdm=True)
    score(vllm_lm, [per_token(text, i) for i, text in enumerate(TEXTS)])
    ((sent, params),) = vllm_lm.model.calls
    assert sorted(map(tuple, sent)) == sorted(map(tuple, built))
    assert all(prompt[0] == vllm_lm.tokenizer.bos_token_id for prompt in sent)
    assert sorted(sent, key=len, reverse=True) == sent  # longest first, as the stock path sorts
    assert {p.prompt_logprobs for p in params} == {20} and {p.max_tokens for p in params} == {1}


@pytest.mark.parametrize("form", ["worker", "arrays", "lists"])
def test_exact_mode_equals_the_hf_capture(tiny_model, hf_scores, form, caplog):
    """Computed by vLLM's worker (patch vllm-worker-prompt-stats), read from the arrays patch
    vllm-prompt-logprob-arrays keeps, or from vLLM's own lists (another vLLM, data-parallel replicas;
    with a warning about the cost): the same values as the HF capture."""
    worker = form == "worker"
    lm = make_vllm_lm(tiny_model, max_model_len=256, max_logprobs=-1, keeps_arrays=form != "lists", on_worker=worker)
    _log_exact_form.cache_clear()  # said once per process
    with caplog.at_level(logging.INFO, logger="pdd_tasks.backends.vllm"):
        answers = score_per_token_vllm(
            lm,
            [per_token(text, i, exact_mu_sigma=True) for i, text in enumerate(TEXTS)],
            disable_tqdm=True,
            sampling_params_cls=SamplingParams,
            worker_stats=lambda model: worker,
        )
    warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert warnings == ([] if form != "lists" else [warnings[0]])
    said = {"worker": "computed on vLLM's worker", "arrays": "kept as arrays", "lists": "per-value lists"}
    assert [form for form, text in said.items() if text in caplog.text] == [form]
    vocab = lm.model.llm_engine.model_config.get_vocab_size()
    ((_, params),) = lm.model.calls
    assert {p.prompt_logprobs for p in params} == {-1}
    assert {p.extra_args[ARRAYS_KEY] for p in params} == {True}  # marked for the patch
    assert {p.extra_args.get(WORKER_STATS_KEY, False) for p in params} == {worker}  # and for the worker's
    if worker:  # 4 values per position came back, not |V| + 1
        assert all(
            answer.model.distribution_stats.startswith("exact (full vocabulary, computed on vLLM's worker")
            for answer in answers
        )
    for got, want in zip(answers, hf_scores, strict=True):
        assert isinstance(got, TokenScores)
        np.testing.assert_array_equal(got.token_ids, want.token_ids)
        np.testing.assert_allclose(got.logprobs, want.logprobs, atol=1e-5)
        np.testing.assert_allclose(got.mu, want.mu, atol=1e-5)
        np.testing.assert_allclose(got.sigma, want.sigma, atol=1e-5)
        np.testing.assert_allclose(got.top1, want.top1, atol=1e-5)
        assert got[0] == pytest.approx(want[0], abs=1e-4) and got[1] == want[1]
        assert got.model.backend == "vllm" and got.model.vocab_size == vocab
        assert got.model.distribution_stats.startswith("exact")
        assert got.model.tokenizer_fingerprint == want.model.tokenizer_fingerprint


@pytest.mark.parametrize("k", [1, 5, 20])
def test_topk_mode_is_the_documented_approximation(tiny_model, vllm_lm, hf_scores, k):
    answers = score(vllm_lm, [per_token(text, i, topk_logprobs=k) for i, text in enumerate(TEXTS)])
    vocab = vllm_lm.model.llm_engine.model_config.get_vocab_size()
    for got, want in zip(answers, hf_scores, strict=True):
        np.testing.assert_allclose(got.logprobs, want.logprobs, atol=1e-5)  # token log-probs stay exact
        np.testing.assert_allclose(got.top1, want.top1, atol=1e-5)  # so does the top-1 (Gap-K%), at any k
        # independent: the k largest of the full distribution, plus the actual token
        rows = full_logprobs(tiny_model, [vllm_lm.prefix_token_id] + list(want.token_ids))[:-1].double().numpy()
        top = [np.sort(row)[::-1][:k] for row in rows]
        mu, sigma = approximate_mu_sigma(top, want.logprobs, vocab)
        np.testing.assert_allclose(got.mu, mu, atol=2e-5)
        np.testing.assert_allclose(got.sigma, sigma, atol=2e-5)
        assert np.all(got.mu <= want.mu + 1e-4)  # the uniform tail never raises mu (max entropy)
        assert got.model.distribution_stats.startswith(f"top-{k} approximation")
        if k == 1:
            assert not np.allclose(got.mu, want.mu, atol=1e-3)  # an approximation, not the exact value


@pytest.mark.parametrize("flat", [True, False])
def test_both_vllm_output_forms_parse_alike(tiny_model, flat):
    """vLLM returns list[dict[id, Logprob]] or FlatLogprobs (x_i listed first, and again if in the top k)."""
    engine = make_vllm_lm(tiny_model, max_model_len=256).model
    tokens = [0] + np.random.default_rng(0).integers(1, engine.hf_model.config.vocab_size, 12).tolist()
    params = SamplingParams(temperature=0, max_tokens=1, detokenize=False, prompt_logprobs=5, flat_logprobs=flat)
    (output,) = engine.generate([{"prompt_token_ids": tokens}], sampling_params=params)
    assert (type(output.prompt_logprobs).__name__ == "FlatLogprobs") is flat
    parsed = parse_prompt_logprobs(output.prompt_token_ids, output.prompt_logprobs, start=1)
    rows = full_logprobs(tiny_model, tokens)[:-1]
    np.testing.assert_allclose(parsed.logprobs, rows[torch.arange(12), tokens[1:]].numpy(), atol=1e-6)
    for position, values in enumerate(parsed.listed):
        token_in_top = tokens[position + 1] in torch.topk(rows[position], 5).indices.tolist()
        assert values.size == (5 if token_in_top else 6)  # x_i counted once
    assert parsed.is_greedy is bool((rows.argmax(-1) == torch.tensor(tokens[1:])).all())


def test_flat_logprobs_asked_for_where_vllm_has_them():
    params = sampling_params(SamplingParams, LogprobRequest(topk=20, exact=False))
    assert params.prompt_logprobs == 20 and params.max_tokens == 1 and params.temperature == 0
    assert params.flat_logprobs is True
    assert not params.extra_args  # top-k requests are not marked: vLLM's own output processing
    assert not wants_prompt_logprob_arrays(params, detokenizes=False)


def test_only_exact_requests_without_token_strings_are_kept_as_arrays():
    exact = sampling_params(SamplingParams, LogprobRequest(topk=0, exact=True))
    assert exact.prompt_logprobs == -1 and exact.extra_args == {ARRAYS_KEY: True}
    assert wants_prompt_logprob_arrays(exact, detokenizes=False)
    assert not wants_prompt_logprob_arrays(exact, detokenizes=True)  # the arrays hold no token strings
    unmarked = SamplingParams(temperature=0, max_tokens=1, detokenize=False, prompt_logprobs=-1)
    assert not wants_prompt_logprob_arrays(unmarked, detokenizes=False)  # another program's request


def test_worker_rows_give_the_full_rows_values(tiny_model):
    """What vLLM's worker sends under patch vllm-worker-prompt-stats (prompt_stats_rows: 4 values per
    position) parses to the values the full rows of the same logits give (the arrays path), and a
    vocabulary of 3 tokens, whose full rows are 4 wide too, is not taken for them."""
    tokens = [0] + np.random.default_rng(2).integers(1, 1000, 11).tolist()
    logits = torch.randn(len(tokens) - 1, 1000, generator=torch.Generator().manual_seed(3)) * 4
    logits[2, tokens[3]] = 50.0  # x_3 the most likely token at its position
    targets = torch.tensor(tokens[1:])
    stats, full = PromptLogprobArrays(), PromptLogprobArrays()
    stats.append_chunk(*prompt_stats_rows(logits, targets))
    rows = torch.log_softmax(logits, -1)
    top = torch.topk(rows, rows.shape[1])
    full.append_chunk(
        torch.cat([targets[:, None], top.indices], 1),
        torch.cat([rows.gather(1, targets[:, None]), top.values], 1),
        (rows >= rows.gather(1, targets[:, None])).sum(1),
    )
    exact = LogprobRequest(topk=0, exact=True)
    for start in (1, 5):
        got, want = (parse_prompt_logprobs(tokens, arrays, start) for arrays in (stats, full))
        assert got.worker_stats is not None and want.worker_stats is None
        np.testing.assert_array_equal(got.token_ids, want.token_ids)
        np.testing.assert_array_equal(got.logprobs, want.logprobs)
        assert got.is_greedy == want.is_greedy
        for a, b in zip(mu_sigma_from_listed(got, 1000, exact), mu_sigma_from_listed(want, 1000, exact), strict=True):
            np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-6)
        np.testing.assert_array_equal(top1_from_listed(got), top1_from_listed(want))
    np.testing.assert_array_equal(stats.ranks, full.ranks)
    small = PromptLogprobArrays()  # |V| = 3: x_i and then 3 token ids per row
    ids = torch.tensor([[1, 2, 0, 1], [2, 2, 1, 0]])
    small.append_chunk(ids, torch.log_softmax(torch.randn(2, 4), -1), torch.tensor([2, 1]))
    assert parse_prompt_logprobs([0, 1, 2], small, 1).worker_stats is None


def test_an_engine_without_the_worker_extension_reads_the_full_log_probs(tiny_model, caplog):
    """vllm_worker_prompt_stats: an engine not made with worker_extension_cls gets the full prompt
    log-probs, with one warning naming the engine argument that fixes it; suspending the patch asks
    for the stock worker output whatever the engine."""
    lm = make_vllm_lm(tiny_model, max_model_len=256, max_logprobs=-1)
    with caplog.at_level(logging.WARNING):
        assert not lm_eval_patches.vllm_worker_prompt_stats(lm)
        assert not lm_eval_patches.vllm_worker_prompt_stats(lm)
    (warning,) = [r.getMessage() for r in caplog.records if "worker_extension_cls" in r.getMessage()]
    assert f"worker_extension_cls={lm_eval_patches.VLLM_WORKER_EXTENSION}" in warning
    lm._pdd_worker_prompt_stats = True  # as after the worker applied the patch
    with lm_eval_patches.WORKER_PROMPT_STATS.suspended():
        assert not lm_eval_patches.vllm_worker_prompt_stats(lm)


def test_prompt_logprob_arrays_parse_as_vllm_lists(tiny_model):
    """The arrays of an exact request (in chunks) give what vLLM's FlatLogprobs of the same request give."""
    engine = make_vllm_lm(tiny_model, max_model_len=256, max_logprobs=-1).model
    tokens = [0] + np.random.default_rng(1).integers(1, engine.hf_model.config.vocab_size, 9).tolist()
    exact = sampling_params(SamplingParams, LogprobRequest(topk=0, exact=True))
    (arrays,) = engine.generate([{"prompt_token_ids": tokens}], sampling_params=exact)
    engine.keeps_arrays = False
    (lists,) = engine.generate([{"prompt_token_ids": tokens}], sampling_params=exact)
    assert isinstance(arrays.prompt_logprobs, PromptLogprobArrays) and len(arrays.prompt_logprobs) == len(tokens)
    assert type(lists.prompt_logprobs).__name__ == "FlatLogprobs"
    for start in (1, 4):
        got = parse_prompt_logprobs(tokens, arrays.prompt_logprobs, start)
        want = parse_prompt_logprobs(tokens, lists.prompt_logprobs, start)
        np.testing.assert_array_equal(got.token_ids, want.token_ids)
        np.testing.assert_array_equal(got.logprobs, want.logprobs)
        assert got.is_greedy == want.is_greedy
        for row, values in zip(got.listed, want.listed, strict=True):
            np.testing.assert_array_equal(np.sort(row), np.sort(values))
    with pytest.raises(ValueError, match="do not begin with the prompt tokens"):
        parse_prompt_logprobs([tokens[0], tokens[1] + 1, *tokens[2:]], arrays.prompt_logprobs, 1)


def test_engine_limits_are_refused_before_scoring_with_the_fix(vllm_lm):
    """A user's mistake (UserError: the lm_eval command shows the message alone), refused before any
    text is sent, also when another group of requests (another task's setting) is within the limit."""
    with pytest.raises(EngineLimitError, match=r"max_logprobs=-1 to --model_args"):
        score(vllm_lm, [per_token(TEXTS[1]), per_token(TEXTS[0], exact_mu_sigma=True)])
    message = r"topk_logprobs=50 is more than the vLLM engine allows \(max_logprobs=20\)"
    with pytest.raises(EngineLimitError, match=message):
        score(vllm_lm, [per_token(TEXTS[1], topk_logprobs=5), per_token(TEXTS[0], topk_logprobs=50)])
    assert vllm_lm.model.calls == []


def test_long_text_error_and_truncation_leave_room_for_the_generated_token(tiny_model):
    lm = make_vllm_lm(tiny_model, max_model_len=12)
    text = TEXTS[0]
    n = len(lm.tok_encode(text, add_special_tokens=False))
    assert n > 10
    with pytest.raises(TextTooLongError, match="truncate"):
        score(lm, [per_token(text)])
    (answer,) = score(lm, [per_token(text, truncate=True)])
    assert answer.token_ids.size == 10 and answer.truncated_tokens == n - 10  # 1 start + 10 + 1 generated = 12
    ((sent, _),) = lm.model.calls
    assert len(sent[0]) == 11


def test_mixed_settings_in_one_batch_keep_request_order(vllm_lm):
    requests = [
        per_token(TEXTS[0], 0, topk_logprobs=1),
        per_token(TEXTS[1], 1, topk_logprobs=5),
        per_token(TEXTS[2], 2),
    ]
    answers = score(vllm_lm, requests)
    assert [a.model.distribution_stats.split()[0] for a in answers] == ["top-1", "top-5", "top-20"]
    for request, answer in zip(requests, answers, strict=True):
        assert list(answer.token_ids) == vllm_lm.tok_encode(request.args[1], add_special_tokens=False)


def test_patched_loglikelihood_answers_per_token_requests_and_passes_others_on(tiny_model, monkeypatch):
    import sys
    from types import SimpleNamespace

    cls = real_vllm_class() or StandInVLLM
    if cls is StandInVLLM:  # lm-eval's vLLM module cannot be imported here: the stand-in plays it
        monkeypatch.setitem(sys.modules, VLLM_MODULE, SimpleNamespace(VLLM=StandInVLLM))
    lm_eval_patches.apply()
    patched = cls.loglikelihood
    lm_eval_patches.apply()  # idempotent
    assert cls.loglikelihood is patched and "vllm-loglikelihood" in lm_eval_patches.applied()
    lm = make_vllm_lm(tiny_model, max_model_len=256)
    answers = lm.loglikelihood([per_token(TEXTS[0]), Instance("loglikelihood", {}, ("The", " end"), 0)])
    assert isinstance(answers[0], TokenScores) and not isinstance(answers[1], TokenScores)
    assert len(answers[1]) == 2 and answers[1][0] <= 0  # the stock (sum, is_greedy) answer
    assert answers[0][0] == pytest.approx(float(answers[0].logprobs.sum()), abs=1e-4)


def test_the_patch_is_a_no_op_without_the_vllm_backend(monkeypatch):
    import sys

    monkeypatch.delitem(sys.modules, VLLM_MODULE, raising=False)
    lm_eval_patches.apply()  # nothing imported, nothing patched, no error
    assert VLLM_MODULE not in sys.modules
    assert "vllm-loglikelihood" not in lm_eval_patches.applied()


def test_outputs_out_of_order_are_refused(vllm_lm):
    generate = vllm_lm.model.generate

    def reversed_generate(prompts, **kwargs):
        return generate(prompts, **kwargs)[::-1]

    vllm_lm.model.generate = reversed_generate
    with pytest.raises(RuntimeError, match="another prompt"):
        score(vllm_lm, [per_token(TEXTS[0], 0), per_token(TEXTS[1], 1)])


def test_emulated_engine_packs_like_vllm(tiny_model):
    """Position 0 empty; then the prompt token first (its rank = how many log-probs are >= its own)
    and the top k with ranks 1..k (vllm/logprobs.py append_logprobs_for_next_position)."""
    from transformers import AutoModelForCausalLM

    tokens = [0, 5, 6, 7]
    engine = EmulatedLLM(AutoModelForCausalLM.from_pretrained(tiny_model), 64)
    params = SamplingParams(temperature=0, max_tokens=1, detokenize=False, prompt_logprobs=3, flat_logprobs=False)
    (output,) = engine.generate([{"prompt_token_ids": tokens}], sampling_params=params)
    rows = full_logprobs(tiny_model, tokens)
    assert output.prompt_logprobs[0] is None and len(output.prompt_logprobs) == 4
    for position in range(1, 4):
        entry, row = output.prompt_logprobs[position], rows[position - 1]
        assert next(iter(entry)) == tokens[position]
        assert entry[tokens[position]].rank == int((row >= row[tokens[position]]).sum())
        top = torch.topk(row, 3).indices.tolist()
        assert [entry[t].rank for t in top] == [1, 2, 3]
