"""What every per-token capture shares: the request and answer types, and the request routing.

lm-eval backends answer a loglikelihood request with ``(sum_logprob, is_greedy)`` and throw the
per-token values away. The pdd tasks send :class:`PerTokenRequest` s instead, and each backend's
capture (:mod:`pdd_tasks.backends.hf`, :mod:`pdd_tasks.backends.vllm`,
:mod:`pdd_tasks.backends.completions`) answers them with a :class:`TokenScores`: the same tuple,
carrying the arrays as attributes. :func:`wrap_loglikelihood` routes the pdd requests of a run to
the capture and every other request to the stock method, unchanged.
"""

from __future__ import annotations

import importlib.metadata
import logging
from dataclasses import dataclass

import numpy as np
from lm_eval.api.instance import Instance

from pdd_tasks.errors import UserError


logger = logging.getLogger(__name__)

# The capture re-implements the batching of HFLM._loglikelihood_tokens of this release.
SUPPORTED_LM_EVAL_VERSIONS = ("0.4.13",)


@dataclass(frozen=True)
class ModelInfo:
    """What the scores were computed with; the same object is shared by all results of a model."""

    name: str
    backend: str
    vocab_size: int  # size of the model's output distribution (|V| of DC-PDD Eq. 5)
    tokenizer_fingerprint: str
    distribution_stats: str  # how mu/sigma were obtained, e.g. "exact (full vocabulary, float32)"


class TokenScores(tuple):
    """``(sum_logprob, is_greedy)``, as the stock backend answers, plus per-token arrays.

    Attributes (all arrays have one entry per scored token, in text order):
        token_ids: int64, the scored tokens x_1..x_n (the start token x_0 is not included).
        logprobs: float32, log p(x_i | x_<i).
        mu, sigma: float32, mean and standard deviation of log p over the full next-token
            distribution at position i (Min-K%++ Eq. 3-4).
        model: :class:`ModelInfo`.
        truncated_tokens: how many tokens were cut from the end of the text to fit the context.
    """

    def __new__(cls, logprob_sum, is_greedy, token_ids, logprobs, mu, sigma, model, truncated_tokens=0):
        self = super().__new__(cls, (float(logprob_sum), bool(is_greedy)))
        self.token_ids = np.asarray(token_ids, dtype=np.int64)
        self.logprobs = np.asarray(logprobs, dtype=np.float32)
        self.mu = np.asarray(mu, dtype=np.float32)
        self.sigma = np.asarray(sigma, dtype=np.float32)
        self.model = model
        self.truncated_tokens = int(truncated_tokens)
        return self

    def __reduce__(self):  # keeps the arrays through pickling (--use_cache)
        return (
            TokenScores,
            (self[0], self[1], self.token_ids, self.logprobs, self.mu, self.sigma, self.model, self.truncated_tokens),
        )


@dataclass
class PerTokenRequest(Instance):
    """A loglikelihood request whose answer must carry per-token values.

    Arguments are ``("", text)``: an empty context, so the text is scored after the model's start
    token (DC-PDD Eq. 2). ``truncate`` allows cutting a text longer than the context window (the
    beginning is kept); without it such a text is an error. ``topk_logprobs``: how many top
    alternatives per position to ask a server for (backends that only return top-k log-probs).
    """

    truncate: bool = False
    topk_logprobs: int = 20
    exact_mu_sigma: bool = False  # vLLM: ask for the full distribution (prompt_logprobs=-1)


class TextTooLongError(ValueError):
    pass


class EmptyTextError(UserError):
    """A text with no token to score after the start token."""


def check_lm_eval_version() -> None:
    installed = importlib.metadata.version("lm_eval")
    if installed not in SUPPORTED_LM_EVAL_VERSIONS:
        raise RuntimeError(
            f"lm-eval-pdd's per-token capture for the HF backend was written for lm-eval "
            f"{', '.join(SUPPORTED_LM_EVAL_VERSIONS)}, but lm-eval {installed} is installed. "
            f"Install a supported version: pip install 'lm-eval[hf,api]=={SUPPORTED_LM_EVAL_VERSIONS[-1]}'"
        )


def wrap_loglikelihood(cls: type, score_per_token) -> None:
    """Make ``cls.loglikelihood`` answer :class:`PerTokenRequest` s with
    ``score_per_token(lm, requests, disable_tqdm=...)`` (a list of :class:`TokenScores`, in request
    order); every other request goes to the stock method, in one call, unchanged. Idempotent."""
    if getattr(cls.loglikelihood, "_pdd_capture", False):
        return
    stock_loglikelihood = cls.loglikelihood

    def loglikelihood(self, requests, disable_tqdm: bool = False, **kwargs):
        wants_tokens = [isinstance(request, PerTokenRequest) for request in requests]
        if not any(wants_tokens):
            return stock_loglikelihood(self, requests, disable_tqdm=disable_tqdm, **kwargs)
        others = [request for request, wants in zip(requests, wants_tokens, strict=True) if not wants]
        stock = iter(stock_loglikelihood(self, others, disable_tqdm=disable_tqdm, **kwargs) if others else ())
        per_token = [request for request, wants in zip(requests, wants_tokens, strict=True) if wants]
        captured = iter(score_per_token(self, per_token, disable_tqdm=disable_tqdm))
        return [next(captured) if wants else next(stock) for wants in wants_tokens]

    loglikelihood._pdd_capture = True
    loglikelihood.__doc__ = stock_loglikelihood.__doc__
    cls.loglikelihood = loglikelihood


def split_after_start_token(lm, request: PerTokenRequest) -> tuple[list[int], list[int]]:
    """``(context, text tokens)`` as stock ``TemplateLM.loglikelihood`` builds them for an empty
    context: the text after the backend's ``prefix_token_id`` (BOS, else EOS), unless the text's
    own first token is that token. Errors on a non-empty context or a text without tokens."""
    context, text = request.args
    if context != "":
        raise ValueError(
            f"{request.task_name} doc {request.doc_id}: per-token requests are scored after the start "
            f"token and take an empty context, got a context of {len(context)} characters."
        )
    tokens = list(lm.tok_encode(text, add_special_tokens=False))
    if not tokens:
        raise ValueError(
            f"{request.task_name} doc {request.doc_id}: the text has no tokens (empty text); "
            f"remove empty texts from the dataset."
        )
    if lm.prefix_token_id != tokens[0]:
        return [lm.prefix_token_id], tokens
    if len(tokens) == 1:
        raise EmptyTextError(
            f"{request.task_name} doc {request.doc_id}: the text {text!r} is only the model's start token, so no "
            f"token is left to score after it (DC-PDD Eq. 2 scores the tokens after the start token). Remove the row."
        )
    return tokens[:1], tokens[1:]


def fit_text(request: PerTokenRequest, tokens: list[int], room: int, limit: str, fixes: str) -> tuple[list[int], int]:
    """``(tokens, number cut)``: a text's ``tokens`` cut to their first ``room`` if the request allows
    truncation; a longer text is otherwise a :class:`TextTooLongError`, saying that it has "more than"
    ``limit`` and suggesting ``fixes`` or truncation. Shared by the hf, vLLM and API captures."""
    truncated = max(0, len(tokens) - room)
    if truncated and not request.truncate:
        raise TextTooLongError(
            f"{request.task_name} doc {request.doc_id}: the text has {len(tokens)} tokens, more than {limit}. "
            f"{fixes}, or allow truncation with --metadata '{{\"truncate\": true}}' (keeps the first {room} "
            f"tokens of each long text)."
        )
    return (tokens[:room] if truncated else tokens), truncated
