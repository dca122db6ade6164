"""The server check and the response parsing of the local-completions capture, on hand-made
OpenAI-format responses (each fault the check must name, and a correct response). The real servers
are exercised in test_completions_server.py."""

from __future__ import annotations

import numpy as np
import pytest

from pdd_metrics.topk import approximate_mu_sigma
from pdd_tasks.backends.base import ModelInfo
from pdd_tasks.backends.completions import ServerCheckError, _probe_values, token_scores_from_choice


WORDS = [f"w{i}" for i in range(12)]  # a 12-token prompt; position 0 is the start token


def response(token_logprobs, top_logprobs, tokens=WORDS, generated=True):
    """An echo response for WORDS, optionally followed by one generated token."""
    tokens = list(tokens) + (["gen"] if generated else [])
    token_logprobs = list(token_logprobs) + ([-0.5] if generated else [])
    top_logprobs = list(top_logprobs) + ([{"gen": -0.5}] if generated else [])
    return {
        "choices": [
            {
                "index": 0,
                "text": "".join(tokens),
                "logprobs": {"tokens": tokens, "token_logprobs": token_logprobs, "top_logprobs": top_logprobs},
            }
        ],
        "usage": {"prompt_tokens": len(WORDS)},
    }


def aligned_response(shift: int = 0):
    """Top alternative at position i is token i + shift (0: correct; 1: the stock server's fault);
    each position's values are consistent with its own alternatives."""
    values, tops = [None], [None]
    for i in range(1, len(WORDS)):
        best = WORDS[min(i + shift, len(WORDS) - 1)]
        top = {best: -0.1, "other": -3.0}
        own = top.get(WORDS[i], -6.0)
        top.setdefault(WORDS[i], own)
        values.append(own)
        tops.append(top)
    return response(values, tops)


IDS = list(range(len(WORDS)))


def test_a_correct_server_passes():
    report = _probe_values(aligned_response(0), IDS, k=2)
    assert (report.positions, report.aligned, report.ahead) == (11, 11, 0)


def test_shifted_prompt_logprobs_are_named():
    with pytest.raises(ServerCheckError, match="shifted by one position: at 10 of 11 prompt positions"):
        _probe_values(aligned_response(1), IDS, k=2)


def test_a_model_repeating_its_last_token_is_not_taken_for_a_shifted_server():
    """A correct server and a model whose top alternative at position i is token i - 1 (small
    random-weight models with tied embeddings repeat their input): on a comma-separated list the
    token after a word is the one before it, which must not count as "ahead" (the vLLM server on the
    tiny test GPT-2 was refused so before)."""
    words = ["w0", ","] + [w for i in range(1, 6) for w in (f"n{i}", ",")]
    values, tops = [None], [None]
    for i in range(1, len(words)):
        top = {words[i - 1]: -0.1, "other": -3.0}
        values.append(top.setdefault(words[i], -6.0))
        tops.append(top)
    report = _probe_values(response(values, tops, tokens=words), list(range(len(words))), k=2)
    assert (report.aligned, report.ahead) == (0, 0)


def test_no_echo_logprobs_is_named():
    chat_like = {"choices": [{"index": 0, "message": {"role": "assistant", "content": "Hi"}}]}
    with pytest.raises(ServerCheckError, match=r"returns no prompt log-probs \(echo\).*Chat-only APIs cannot be used"):
        _probe_values(chat_like, IDS, k=2)
    generated_only = response([-0.5], [{"gen": -0.5}], tokens=[], generated=False)
    with pytest.raises(ServerCheckError, match="it returned log-probs for 1 positions"):
        _probe_values(generated_only, IDS, k=2)


def test_zero_logprobs_are_named():
    zeros = response([None] + [0.0] * 11, [None] + [{w: 0.0} for w in WORDS[1:]])
    with pytest.raises(ServerCheckError, match="log-prob of 0.0 for every prompt token"):
        _probe_values(zeros, IDS, k=1)


def test_missing_alternatives_are_named():
    bare = response([None] + [-1.0] * 11, [None] * 12)
    with pytest.raises(ServerCheckError, match="not the top-k alternatives"):
        _probe_values(bare, IDS, k=2)


def test_logprobs_that_disagree_with_their_own_alternatives_are_named():
    values = [None] + [-1.0] * 11
    tops = [None] + [{w: -2.0, "x": -0.5} for w in WORDS[1:]]  # the token itself listed at -2.0
    with pytest.raises(ServerCheckError, match="disagree with its own top_logprobs at 11 of 11"):
        _probe_values(response(values, tops), IDS, k=2)


def test_token_scores_take_the_text_positions_only():
    info = ModelInfo("m", "local-completions", 100, "fp", "top-k approximation (k=2, uniform tail)")
    resp = aligned_response(0)
    (choice,) = resp["choices"]
    scores = token_scores_from_choice(choice, IDS, context_length=1, info=info)
    values = np.array(choice["logprobs"]["token_logprobs"][1:12])  # not the start token, not "gen"
    assert scores.token_ids.tolist() == IDS[1:]
    np.testing.assert_allclose(scores.logprobs, values, rtol=1e-6)
    assert scores[0] == pytest.approx(values.sum())
    assert scores[1] is True  # every token is its position's top alternative
    alternatives = [np.array(list(t.values())) for t in choice["logprobs"]["top_logprobs"][1:12]]
    mu, sigma = approximate_mu_sigma(alternatives, values, 100)
    np.testing.assert_allclose(scores.mu, mu)
    np.testing.assert_allclose(scores.sigma, sigma)
    np.testing.assert_allclose(scores.top1, [max(*alt, v) for alt, v in zip(alternatives, values, strict=True)])
