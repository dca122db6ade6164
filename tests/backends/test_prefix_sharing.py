"""Prefix sharing in the per-token capture (``share_prefixes``, on by default): a request whose tokens
begin a longer request's, after the same start token, is answered from the longer request's pass.

The grouping (:func:`shared_prefixes`) on token ids; the shared answering loop with the real HF
backend on a tiny GPT-2 (what is forwarded, what the cache hook gets, what is never shared); and the
real ``lm_eval`` command on WikiMIA's first texts of two splits, with sharing and without.

Tolerance: a shared answer comes from a pass over a longer sequence in another batch, so its float32
values are computed with other matrix shapes and padding than the text's own pass; they agree to
float32 rounding (on 16 texts of each of two splits with the tiny GPT-2, batch size 4: at most 4.8e-7
on log-probs and 2.4e-6 on mu, values of magnitude ~7). The tests allow 1e-5 absolute, the tolerance
the suite already allows between batch sizes
(``test_cli_end_to_end.test_scores_do_not_depend_on_batch_size``), far below any score difference
that matters and far above float32 rounding.
"""

from __future__ import annotations

import logging

import numpy as np
import pytest
from support.harness import cpu_float32, harness_args, read_samples, run_lm_eval, wikimia_rows

from pdd_tasks.backends.base import (
    PerTokenRequest,
    TokenScores,
    answer_per_token,
    answer_prefix,
    shared_prefixes,
)
from pdd_tasks.registry import DEFAULT_METHODS


TOLERANCE = 1e-5
START = [0]


# -- the grouping, on token ids ---------------------------------------------------------------


def test_a_sequence_without_a_longer_one_is_forwarded():
    assert shared_prefixes([(START, [1, 2]), (START, [2, 1]), (START, [3])]) == [0, 1, 2]


def test_identical_sequences_share_one_pass():
    owners = shared_prefixes([(START, [5, 6, 7]), (START, [1]), (START, [5, 6, 7]), (START, [5, 6, 7])])
    assert owners[1] == 1
    assert owners[0] == owners[2] == owners[3] in (0, 2, 3)
    assert owners[owners[0]] == owners[0]  # the one forwarded answers itself


def test_nested_prefixes_are_answered_by_the_longest():
    a, b, c = [4, 1], [4, 1, 9], [4, 1, 9, 9, 2]
    assert shared_prefixes([(START, b), (START, c), (START, a)]) == [1, 1, 1]
    assert shared_prefixes([(START, c), (START, a), (START, b)]) == [0, 0, 0]


def test_a_prefix_of_two_diverging_texts_is_answered_by_one_of_them():
    owners = shared_prefixes([(START, [1, 2]), (START, [1, 2, 3]), (START, [1, 2, 4, 4])])
    assert owners[1:] == [1, 2] and owners[0] in (1, 2)


def test_another_start_token_is_not_shared():
    assert shared_prefixes([([7], [1, 2]), ([8], [1, 2, 3]), ([8, 1], [2, 3])]) == [0, 1, 2]


def test_requests_that_take_no_part_are_forwarded_and_never_answer_others():
    assert shared_prefixes([(START, [1]), None, (START, [1, 2]), None]) == [2, 1, 2, 3]
    assert shared_prefixes([(START, [1]), None]) == [0, 1]
    assert shared_prefixes([]) == []


def test_a_prefix_at_the_string_level_only_is_not_shared(tiny_model):
    """``"... th"`` begins ``"... the"`` as a string, but encodes to another last token."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny_model)
    short, long = "It was one of th", "It was one of the"
    a, b = (tokenizer(text, add_special_tokens=False).input_ids for text in (short, long))
    assert long.startswith(short) and b[: len(a)] != a  # the case under test
    assert shared_prefixes([(START, a), (START, b)]) == [0, 1]


def test_an_answer_cut_to_a_prefix():
    info = object()
    full = TokenScores(-6.0, False, [3, 4, 5], [-1.0, -2.0, -3.0], [1, 2, 3], [4, 5, 6], info, top1=[-1.0, -2.0, -0.5])
    full.convention = "reference-code"
    cut = answer_prefix(full, 2)
    assert tuple(cut) == (-3.0, True)  # sum of the two kept log-probs; both are their position's top
    assert cut.token_ids.tolist() == [3, 4] and cut.logprobs.tolist() == [-1.0, -2.0]
    assert cut.mu.tolist() == [1, 2] and cut.sigma.tolist() == [4, 5] and cut.top1.tolist() == [-1.0, -2.0]
    assert cut.model is info and cut.convention == "reference-code" and cut.grad_norms is None
    assert tuple(answer_prefix(full, 3)) == (-6.0, False)
    not_top = TokenScores(-3.0, False, [3, 4], [-1.0, -2.0], [0, 0], [0, 0], info, top1=[-1.0, -1.5])
    assert answer_prefix(not_top, 1)[1] and not answer_prefix(not_top, 2)[1]


# -- the answering loop, with the real HF backend ----------------------------------------------


@pytest.fixture(scope="module")
def hf_lm(tiny_model):
    from lm_eval.models.huggingface import HFLM

    return HFLM(pretrained=str(tiny_model), dtype="float32", device="cpu", batch_size=2)


class CacheHook:
    """Records what the loop gives lm-eval's cache hook (``--use_cache``)."""

    def __init__(self):
        self.added = []

    def add_partial(self, kind, args, answer):
        self.added.append((kind, args, answer))


def request(text, context="", share=True, gradients=False, doc_id=0):
    return PerTokenRequest(
        request_type="loglikelihood",
        doc={"text": text},
        arguments=(context, text),
        idx=0,
        metadata=("test", doc_id, 1),
        share_prefixes=share,
        gradients=gradients,
    )


def answer(lm, requests):
    """The HF capture's answers through :func:`answer_per_token`, and the batches it forwarded."""
    from pdd_tasks.backends import hf
    from pdd_tasks.backends.gradients import gradient_norms

    info, forwarded = hf.hf_model_info(lm), []

    def answer_batch(batch, cuts):
        forwarded.append([item.index for item in batch])
        answers = hf._answer_batch(lm, info, batch, cuts)
        for item, one in zip(batch, answers, strict=True):
            if requests[item.index].gradients:  # as hf.score_per_token_hf
                one.grad_norms = gradient_norms(lm.model, item, lm.device)
        return answers

    lm.cache_hook = CacheHook()
    answers = answer_per_token(
        lm, requests, hf._context_limit(lm), answer_batch, desc="test", batches=hf._hf_batches(lm), disable_tqdm=True
    )
    return answers, forwarded, lm.cache_hook.added


def assert_same_values(shared: TokenScores, alone: TokenScores):
    assert shared.token_ids.tolist() == alone.token_ids.tolist()
    for name in ("logprobs", "mu", "sigma", "top1"):
        np.testing.assert_allclose(getattr(shared, name), getattr(alone, name), rtol=0, atol=TOLERANCE, err_msg=name)
    assert shared[0] == pytest.approx(alone[0], abs=TOLERANCE * len(alone.logprobs))
    assert shared[1] == alone[1] and shared.truncated_tokens == alone.truncated_tokens


def test_prefixes_and_duplicates_are_answered_from_the_longer_pass(hf_lm, caplog):
    """Two splits' first texts (the 64-word ones extend the 32-word ones), a duplicate, a context
    request (ReCaLL's shape) and a GradNorm request: the shared ones are not forwarded, every request
    gets its answer and one cache-hook entry, and the values are those of its own pass."""
    short, long = [row["input"] for row in wikimia_rows(32)[:3]], [row["input"] for row in wikimia_rows(64)[:3]]
    assert all(b.startswith(a) for a, b in zip(short, long, strict=True))
    texts = [*short, *long, short[0]]
    requests = [request(text, doc_id=i) for i, text in enumerate(texts)]
    requests.append(request(short[1], context=long[0]))  # a context: never shared
    requests.append(request(short[2], gradients=True))  # GradNorm's pass is the text's own
    with caplog.at_level(logging.INFO, logger="pdd_tasks.backends.base"):
        shared, forwarded, cached = answer(hf_lm, requests)
    assert sorted(i for batch in forwarded for i in batch) == [3, 4, 5, 7, 8]
    assert [len(batch) for batch in forwarded] == [2, 2, 1]  # batch_size 2, over the forwarded requests
    assert sorted(args for _, args, _ in cached) == sorted(r.args for r in requests)  # one entry per request
    lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith("share_prefixes:")]
    assert len(lines) == 1 and lines[0].startswith("share_prefixes: 4 of 9 texts answered from a longer text's pass")
    assert shared[8].grad_norms is not None and all(a.grad_norms is None for a in shared[:8])

    alone, forwarded_alone, _ = answer(hf_lm, [request(r.args[1], r.args[0], False, r.gradients) for r in requests])
    assert sorted(i for batch in forwarded_alone for i in batch) == list(range(9))
    for one, other in zip(shared, alone, strict=True):
        assert_same_values(one, other)


def test_every_request_gets_its_own_cache_hook_entry(hf_lm):
    texts = [row["input"] for row in wikimia_rows(32)[:2]] + [row["input"] for row in wikimia_rows(64)[:2]]
    requests = [request(text, doc_id=i) for i, text in enumerate(texts)]
    answers, forwarded, cached = answer(hf_lm, requests)
    assert sorted(i for batch in forwarded for i in batch) == [2, 3]
    by_args = {args: entry for _, args, entry in cached}
    assert len(cached) == len(by_args) == 4
    for one in requests:
        assert by_args[one.args] is answers[requests.index(one)]


def test_sharing_off_forwards_every_request_and_logs_nothing(hf_lm, caplog):
    texts = [wikimia_rows(32)[0]["input"], wikimia_rows(64)[0]["input"], wikimia_rows(64)[0]["input"]]
    with caplog.at_level(logging.INFO, logger="pdd_tasks.backends.base"):
        _, forwarded, cached = answer(hf_lm, [request(text, share=False) for text in texts])
    assert sorted(i for batch in forwarded for i in batch) == [0, 1, 2] and len(cached) == 3
    assert not [r for r in caplog.records if "share_prefixes" in r.getMessage()]


def test_a_prefix_sorted_into_another_batch(hf_lm):
    """batch_size 1: without sharing, a 32-word text and the 64-word text it begins are two batches;
    with sharing, the 32-word text's answer comes from the 64-word text's batch."""
    hf_lm.batch_size_per_gpu = 1
    try:
        texts = [wikimia_rows(64)[1]["input"], wikimia_rows(32)[5]["input"], wikimia_rows(32)[1]["input"]]
        shared, forwarded, _ = answer(hf_lm, [request(text) for text in texts])
        alone, forwarded_alone, _ = answer(hf_lm, [request(text, share=False) for text in texts])
    finally:
        hf_lm.batch_size_per_gpu = 2
    assert forwarded == [[0], [1]] and len(forwarded_alone) == 3
    for one, other in zip(shared, alone, strict=True):
        assert_same_values(one, other)


# -- the real lm_eval command -----------------------------------------------------------------


def test_lm_eval_scores_with_and_without_sharing(tiny_model, tiny_table, tmp_path, caplog):
    """``pdd_wikimia_32`` and ``pdd_wikimia_64``, first 6 texts each (4 of the 64-word texts begin
    with one of the 32-word ones, and so do their lowercased copies): the same per-text scores of every
    default method, with ``share_prefixes`` (default) and without."""
    samples = {}
    for share in (True, False):
        out = tmp_path / ("shared" if share else "alone") / "out"
        out.parent.mkdir()
        metadata = {"freq_table": str(tiny_table), **({} if share else {"share_prefixes": False})}
        args = harness_args(
            cpu_float32(tiny_model),
            "pdd_wikimia_32,pdd_wikimia_64",
            out,
            batch_size=4,
            metadata=metadata,
            limit=6,
            device="cpu",
        )
        caplog.clear()
        with caplog.at_level(logging.INFO, logger="pdd_tasks.backends.base"):
            run_lm_eval(args, cwd=out.parent)
        lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith("share_prefixes:")]
        if share:  # 24 texts: 12 and their lowercased copies; 4 + 4 begin a 64-word text
            assert len(lines) == 1 and lines[0].startswith("share_prefixes: 8 of 24 texts answered"), lines
        else:
            assert lines == []
        samples[share] = {task: read_samples(out, task) for task in ("pdd_wikimia_32", "pdd_wikimia_64")}
    for task, shared in samples[True].items():
        alone = {sample["doc_id"]: sample for sample in samples[False][task]}
        assert sorted(alone) == sorted(sample["doc_id"] for sample in shared) == list(range(6))
        for sample in shared:
            for method in DEFAULT_METHODS:
                score, label = sample[f"{method}_auc"]
                assert label == alone[sample["doc_id"]][f"{method}_auc"][1]
                assert score == pytest.approx(alone[sample["doc_id"]][f"{method}_auc"][0], abs=TOLERANCE), (
                    task,
                    sample["doc_id"],
                    method,
                )


# -- the other captures: the same loop, fewer prompts -----------------------------------------


def test_vllm_capture_sends_only_the_longer_prompts(tiny_model):
    """The vLLM capture (engine played by ``support.vllm.EmulatedLLM``, as in
    test_capture_vllm.py): the prompts vLLM gets are the forwarded texts only, and every text's values
    are those it gets with sharing off."""
    from support.vllm import SamplingParams, make_vllm_lm

    from pdd_tasks.backends.vllm import score_per_token_vllm

    texts = [wikimia_rows(32)[0]["input"], wikimia_rows(64)[0]["input"], wikimia_rows(32)[0]["input"]]
    lm = make_vllm_lm(tiny_model, max_model_len=256)
    runs = {}
    for share in (True, False):
        lm.model.calls.clear()
        answers = score_per_token_vllm(
            lm, [request(text, share=share) for text in texts], disable_tqdm=True, sampling_params_cls=SamplingParams
        )
        runs[share] = answers, [prompt for prompts, _ in lm.model.calls for prompt in prompts]
    (shared, sent), (alone, sent_alone) = runs[True], runs[False]
    assert len(sent) == 1 and sent[0][1:] == shared[1].token_ids.tolist()  # the 64-word text alone
    assert len(sent_alone) == 3
    for one, other in zip(shared, alone, strict=True):
        assert_same_values(one, other)


def test_completions_capture_sends_only_the_longer_prompts(gguf_server_url):
    """``--model local-completions`` against lm-eval-pdd's llama.cpp front on the default model: the
    server receives one prompt for a 32-word text, the 64-word text it begins and a duplicate, and the
    values are those of three prompts with sharing off (llama.cpp scores each prompt of a request alone;
    its values for a prefix may differ from the longer prompt's at float32 rounding)."""
    from lm_eval.models.openai_completions import LocalCompletionsAPI
    from support.completions import N_CTX, default_model, server_stats

    from pdd_tasks import lm_eval_patches

    lm_eval_patches.apply()
    client = LocalCompletionsAPI(
        model="smollm2",
        base_url=gguf_server_url,
        tokenizer=str(default_model()),
        tokenizer_backend="huggingface",
        max_length=N_CTX,
    )
    texts = [wikimia_rows(32)[0]["input"], wikimia_rows(64)[0]["input"], wikimia_rows(32)[0]["input"]]
    runs = {}
    for share in (True, False):
        before = server_stats(gguf_server_url)
        answers = client.loglikelihood([request(text, share=share) for text in texts], disable_tqdm=True)
        after = server_stats(gguf_server_url)
        runs[share] = answers, after["prompts"] - before["prompts"]
    (shared, prompts), (alone, prompts_alone) = runs[True], runs[False]
    assert (prompts, prompts_alone) == (1 + 1, 3)  # the first call also sends the server check's probe
    for one, other in zip(shared, alone, strict=True):
        assert one.token_ids.tolist() == other.token_ids.tolist()
        np.testing.assert_allclose(one.logprobs, other.logprobs, rtol=0, atol=1e-4)
