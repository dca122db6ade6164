"""The capture's contract with lm-eval, short of a model run (those are in test_cli_end_to_end)."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
from lm_eval.models.huggingface import HFLM
from lm_eval.tasks import TaskManager
from support.harness import tasks_path

from pdd_tasks.backends.base import ModelInfo, TokenScores
from pdd_tasks.tasks.base import BackendWithoutTokenLogprobs


INFO = ModelInfo(name="m", backend="hf", vocab_size=10, tokenizer_fingerprint="f", distribution_stats="exact")


def token_scores(top1=(-0.5, -0.7, -0.5)):
    return TokenScores(-3.5, False, [1, 2, 3], [-1.0, -2.0, -0.5], [-1.2, -1.1, -1.0], [0.5, 0.4, 0.3], INFO, top1=top1)


def test_token_scores_is_the_stock_answer_tuple():
    scores = token_scores()
    assert scores == (-3.5, False)
    logprob, is_greedy = scores  # what stock tasks unpack
    assert (logprob, is_greedy) == (-3.5, False)
    assert repr(scores) == "(-3.5, False)"  # --log_samples stringifies resps: no arrays in the log


def test_token_scores_survive_pickling_for_use_cache():
    restored = pickle.loads(pickle.dumps(token_scores()))
    assert isinstance(restored, TokenScores)
    assert restored == (-3.5, False)
    np.testing.assert_array_equal(restored.token_ids, [1, 2, 3])
    np.testing.assert_array_equal(restored.logprobs, np.float32([-1.0, -2.0, -0.5]))
    np.testing.assert_array_equal(restored.sigma, np.float32([0.5, 0.4, 0.3]))
    assert restored.model == INFO
    np.testing.assert_array_equal(restored.top1, np.float32([-0.5, -0.7, -0.5]))


def test_a_cached_answer_without_top1_is_refused_by_gap_k():
    """An answer pickled before TokenScores carried top1 (9 arguments) loads with top1 None, and the
    task refuses it naming the cache file as the cause, instead of failing inside Gap-K%."""
    from pdd_tasks.tasks.base import AnswersWithoutTop1

    old_arguments = token_scores().__reduce__()[1][:9]  # what an older pickle stored: no top1
    restored = TokenScores(*old_arguments)  # what unpickling it calls
    assert restored.top1 is None and restored == (-3.5, False)
    task = TaskManager(include_path=tasks_path()).load("pdd_wikimia_32")["tasks"]["pdd_wikimia_32"]
    with pytest.raises(AnswersWithoutTop1, match="--use_cache file written by an earlier lm-eval-pdd"):
        task.process_results({"text": "a b c", "label": 1}, [restored, restored])


def test_hf_pdd_is_a_registered_hflm_subclass():
    from lm_eval.api.registry import get_model

    from pdd_tasks.backends.hf import PerTokenHFLM

    assert get_model("hf-pdd") is PerTokenHFLM
    assert issubclass(PerTokenHFLM, HFLM)
    assert get_model("hf") is HFLM  # registering hf-pdd leaves lm-eval's own names in place
    assert "loglikelihood" in vars(PerTokenHFLM) and {"rank", "world_size"} <= set(vars(PerTokenHFLM))


def test_mixed_requests_keep_their_order_and_stock_answers(tiny_model):
    """Per-token and stock requests in one call: stock answers as HFLM gives them alone, in order."""
    from lm_eval.api.instance import Instance

    from pdd_tasks.backends.base import PerTokenRequest
    from pdd_tasks.backends.hf import STOCK_LOGLIKELIHOOD, PerTokenHFLM

    lm = PerTokenHFLM(pretrained=str(tiny_model), batch_size=2, device="cpu")
    meta = ("t", 0, 1)
    stock = [
        Instance("loglikelihood", {}, ("The cat", " sat on the mat."), 0, meta),
        Instance("loglikelihood", {}, ("One, two,", " three."), 0, meta),
    ]
    texts = ["A short text to score.", "Another, somewhat longer, text to score after the start token."]
    per_token = [PerTokenRequest("loglikelihood", {}, ("", text), 0, meta) for text in texts]
    mixed = [per_token[0], stock[0], per_token[1], stock[1]]
    answers = lm.loglikelihood(mixed, disable_tqdm=True)
    assert [type(a) is TokenScores for a in answers] == [True, False, True, False]
    assert STOCK_LOGLIKELIHOOD.__module__ == "lm_eval.models.huggingface"  # HFLM's own method, not a graft
    assert answers[1::2] == STOCK_LOGLIKELIHOOD(lm, stock, disable_tqdm=True)
    for answer, text in zip(answers[0::2], texts, strict=True):
        assert answer.token_ids.tolist() == lm.tok_encode(text, add_special_tokens=False)


def test_backend_without_token_logprobs_is_named():
    task = TaskManager(include_path=tasks_path()).load("pdd_wikimia_32")["tasks"]["pdd_wikimia_32"]
    doc = next(iter(task.test_docs()))
    with pytest.raises(BackendWithoutTokenLogprobs, match=r"without per-token log-probs.*--model hf"):
        task.process_results(doc, [(-12.0, False), (-13.0, False)])


def test_a_context_request_scores_the_texts_own_tokens_after_the_context(tiny_model):
    """An extra request with a context (ReCaLL's prefix) scores the same tokens as the text alone,
    after ``[start] + context``: equal to a direct forward pass of that sequence."""
    import torch

    from pdd_tasks.backends.base import PerTokenRequest
    from pdd_tasks.backends.hf import PerTokenHFLM

    lm = PerTokenHFLM(pretrained=str(tiny_model), batch_size=2, device="cpu", dtype="float32")
    meta = ("t", 0, 1)
    context, text = "A prefix of known texts.\n", "The text to score, after it."
    alone, after = lm.loglikelihood(
        [
            PerTokenRequest("loglikelihood", {}, ("", text), 0, meta),
            PerTokenRequest("loglikelihood", {}, (context, text), 1, meta),
        ],
        disable_tqdm=True,
    )
    tokens = lm.tok_encode(text, add_special_tokens=False)
    assert alone.token_ids.tolist() == after.token_ids.tolist() == tokens
    prompt = [lm.prefix_token_id] + lm.tok_encode(context, add_special_tokens=False) + tokens
    with torch.no_grad():
        logits = lm.model(torch.tensor([prompt])).logits[0].float()
    expected = torch.log_softmax(logits, -1)[len(prompt) - len(tokens) - 1 : -1].gather(
        -1, torch.tensor(tokens)[:, None]
    )
    np.testing.assert_allclose(after.logprobs, expected[:, 0].numpy(), atol=1e-5)
    assert not np.allclose(after.logprobs, alone.logprobs)  # the context changed the predictions
