"""Per-token log-prob capture for OpenAI-compatible completions servers (``--model local-completions``).

lm-eval's ``LocalCompletionsAPI`` asks a ``/v1/completions`` server for a loglikelihood with
``echo: true, logprobs: 1, max_tokens: 1`` (the prompt sent as token ids), sums the echoed prompt
log-probs and discards them. :func:`score_per_token_api` answers the pdd tasks'
:class:`~pdd_tasks.backends.base.PerTokenRequest` s with a :class:`~pdd_tasks.backends.base.TokenScores`
(its ``loglikelihood`` routes them here: patch ``completions-loglikelihood`` of
:mod:`pdd_tasks.lm_eval_patches`):

* one request per text (batches of ``batch_size`` texts per HTTP request and ``num_concurrent``
  requests in flight, as the stock client sends them), the same payload with ``logprobs`` = k
  (task setting ``topk_logprobs``, default 20), the prompt = start token + text tokens exactly as
  stock ``TemplateLM.loglikelihood`` builds it for an empty context;
* the log-prob of every text token from ``token_logprobs`` (exact), and the k alternatives of
  ``top_logprobs`` at the same position, from which Min-K%++'s mu/sigma are estimated
  (:func:`pdd_metrics.topk.approximate_mu_sigma`: the unreported mass spread uniformly over the rest
  of the vocabulary). Loss, Zlib, Lowercase, Min-K% and DC-PDD are therefore exact; Min-K%++ is an
  approximation, recorded as such in the results JSON. Gap-K%'s top-1 log-prob is the largest
  reported value (exact: the most likely token is among the k >= 1 alternatives); its sigma is the
  same estimate.

Before the first text is scored, :func:`check_server` sends one short probe and stops the run with a
message naming the fault when the server cannot give correct prompt log-probs: no ``echo`` log-probs
(chat-only APIs), prompts given as token ids refused, or log-probs that do not belong to the
position they are reported at (llama-cpp-python's stock server shifts them by one position,
abetlen/llama-cpp-python#1983). A broken server never yields a table of chance-level numbers.
:func:`check_context` refuses a client ``max_length`` above the context the server reports
(``max_model_len`` in ``/v1/models``); a request that fails later is named with its document, as a
too-long prompt (the server's context error) or a server that stopped answering (resume with
``--use_cache``), by :func:`_request_failed`.

Every other request of the run goes to the stock method unchanged. The chat-completions clients
cannot give prompt log-probs at all: :func:`refuse_chat_completions` says so (patch
``chat-completions-refusal``).
"""

from __future__ import annotations

import contextlib
import logging
import math
import re
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np

from pdd_metrics.topk import approximate_mu_sigma
from pdd_tasks.backends.base import (
    ContextLimit,
    EncodedText,
    ModelInfo,
    PerTokenRequest,
    TokenScores,
    answer_groups,
    answer_per_token,
    cached_model_info,
    refuse_gradients,
)
from pdd_tasks.errors import UserError


logger = logging.getLogger(__name__)

#: A short text an LM predicts well in places (counting, a repeated sentence): at those positions the
#: most likely alternative *is* the next prompt token, which shows whether log-probs are aligned.
PROBE_TEXT = (
    "One, two, three, four, five, six, seven, eight, nine, ten, eleven, twelve. "
    "Monday, Tuesday, Wednesday, Thursday, Friday, Saturday, Sunday. "
    "The cat sat on the mat. The cat sat on the mat. The cat sat on the mat."
)

#: Two log-probs of the same token at the same position (token_logprobs vs top_logprobs) must agree
#: to this (nats); servers print float32 values, so rounding is far below it.
CONSISTENCY_TOLERANCE = 1e-3

GOOD_SERVERS = (
    "vLLM (`vllm serve <model>`), llama.cpp's `llama-server`, or lm-eval-pdd's "
    "`python -m pdd_tasks.tools.gguf_server --model <file.gguf>`"
)


class ServerCheckError(UserError, RuntimeError):
    """The completions server cannot give correct prompt log-probs; the message names the fault."""


class ServerContextError(UserError):
    """The client's ``max_length`` exceeds the server's context; the message names both numbers."""


class ServerFailedError(UserError, RuntimeError):
    """The server stopped answering mid-run; the message names the request and how to resume."""


@dataclass(frozen=True)
class ProbeReport:
    """What the probe found: positions checked, alignment counts, alternatives per position."""

    positions: int
    aligned: int  # positions whose most likely alternative is the prompt token there
    ahead: int  # ... is the *next* prompt token (a shifted server)
    alternatives_min: int
    alternatives_max: int


def refuse_chat_completions(lm, requests: list) -> None:
    """Refuse per-token requests sent to a chat-completions client (``local-chat-completions``,
    ``openai-chat-completions``) with a message naming the backend that can answer them.

    Raises:
        ServerCheckError: a request is a :class:`PerTokenRequest`.
    """
    if any(isinstance(request, PerTokenRequest) for request in requests):
        raise ServerCheckError(
            f"--model {_backend_name(lm)}: a chat-completions API returns no prompt log-probs "
            f"(echo), so chat-only APIs cannot be used for pretraining-data detection. Use "
            f"--model local-completions with a /v1/completions server: {GOOD_SERVERS}."
        )


def _backend_name(lm) -> str:
    from lm_eval.models.openai_completions import (
        LocalChatCompletion,
        LocalCompletionsAPI,
        OpenAIChatCompletion,
        OpenAICompletionsAPI,
    )

    names = {
        LocalCompletionsAPI: "local-completions",
        OpenAICompletionsAPI: "openai-completions",
        LocalChatCompletion: "local-chat-completions",
        OpenAIChatCompletion: "openai-chat-completions",
    }
    return names.get(type(lm), type(lm).__name__)


def _check_client(lm) -> None:
    """Settings of the harness client the capture needs (before anything is sent)."""
    from lm_eval.models.openai_completions import LocalCompletionsAPI

    cls = type(lm)
    if (
        cls._create_payload is not LocalCompletionsAPI._create_payload
        or cls.parse_logprobs is not LocalCompletionsAPI.parse_logprobs
    ):
        raise ServerCheckError(
            f"--model {_backend_name(lm)}: this client builds its own request format; lm-eval-pdd reads "
            f"per-token log-probs from OpenAI-format /v1/completions responses only (--model local-completions)."
        )
    if lm.tokenizer_backend != "huggingface" or not hasattr(lm.tokenizer, "get_vocab"):
        raise ServerCheckError(
            f"--model {_backend_name(lm)} with tokenizer_backend={lm.tokenizer_backend}: lm-eval-pdd needs the "
            f"model's own tokenizer on this machine (token ids for DC-PDD and its frequency table). Pass "
            f"--model_args ...,tokenizer=<HF name or directory of the served model>,tokenizer_backend=huggingface"
        )
    if not lm.tokenized_requests:
        raise ServerCheckError(
            f"--model {_backend_name(lm)} with tokenized_requests=False: lm-eval-pdd sends prompts as token ids, "
            f"so that each returned log-prob belongs to a known token (a server re-tokenizing text may split it "
            f"differently or add its own start token). Remove tokenized_requests=False, and use a server that "
            f"accepts token-id prompts: {GOOD_SERVERS}."
        )


def api_model_info(lm, k: int) -> ModelInfo:
    """Identity of the served model as the client knows it (its name, the local tokenizer)."""

    def describe() -> dict:
        vocab_size = len(lm.tokenizer)
        try:  # the output layer may be padded beyond the tokenizer (Pythia: 50277 tokens, 50304 outputs)
            from transformers import AutoConfig

            vocab_size = max(vocab_size, int(AutoConfig.from_pretrained(lm.tokenizer.name_or_path).vocab_size))
        except Exception as error:  # noqa: BLE001 - a tokenizer without a model config: keep len(tokenizer)
            logger.debug("No model config next to tokenizer %r: %s", lm.tokenizer.name_or_path, error)
        return dict(
            name=str(lm.model or lm.base_url),
            backend=_backend_name(lm),
            vocab_size=vocab_size,
            distribution_stats=f"top-k approximation (k={k}, uniform tail)",
        )

    return cached_model_info(lm, k, describe)


def _models_url(lm) -> str:
    """The ``/v1/models`` address next to the client's ``base_url`` (``.../v1/completions``)."""
    base = str(lm.base_url).rstrip("/")
    return (base[: -len("/completions")] if base.endswith("/completions") else base) + "/models"


def server_context(lm) -> int | None:
    """The context length (tokens) the server says it serves, or None where it does not say.

    Read once per client from ``GET /v1/models``: the served model's ``max_model_len`` (vLLM's
    ``vllm serve`` and lm-eval-pdd's ``gguf_server`` report it; llama.cpp's ``llama-server`` and
    hosted APIs do not). Any failure to read it is None: the server's own context-length error is
    then translated when a prompt is too long (:func:`_request_failed`).
    """
    if "_pdd_server_context" not in lm.__dict__:
        import requests

        context = None
        try:
            response = requests.get(
                _models_url(lm), headers=lm.header, verify=lm.verify_certificate, timeout=min(lm.timeout, 30)
            )
            entries = response.json().get("data") if response.ok else None
            if isinstance(entries, list):
                named = [e for e in entries if isinstance(e, dict) and e.get("id") == lm.model] or entries[:1]
                value = named[0].get("max_model_len") if named and isinstance(named[0], dict) else None
                if isinstance(value, int) and not isinstance(value, bool) and value > 0:
                    context = value
        except Exception as error:  # noqa: BLE001 - an unreadable /v1/models: the context stays unknown
            logger.debug("Could not read the context length from %s: %s", _models_url(lm), error)
        lm.__dict__["_pdd_server_context"] = context
    return lm.__dict__["_pdd_server_context"]


def _max_length_setting(lm) -> int:
    """The ``max_length`` of ``--model_args`` (lm-eval's client keeps one token less for the prompt)."""
    return lm.max_length + 1


def check_context(lm) -> None:
    """Refuse a client ``max_length`` above the context the server reports (before anything is scored).

    Raises:
        ServerContextError: ``max_length`` (from ``--model_args``, lm-eval's default 2048 when not given)
            is larger than the server's ``max_model_len``.
    """
    context = server_context(lm)
    if context is not None and _max_length_setting(lm) > context:
        raise ServerContextError(
            f"--model {_backend_name(lm)}: max_length is {_max_length_setting(lm)} tokens (--model_args "
            f"max_length; lm-eval's default is 2048 when it is not given), but the server at {lm.base_url} serves "
            f"a context of {context} tokens (max_model_len in its /v1/models), so texts longer than the server's "
            f"context would be sent and refused. Pass --model_args ...,max_length={context} (or start the server "
            f"with a larger context)."
        )


def _context_limit(lm) -> ContextLimit:
    """How many text tokens fit a prompt: the client's ``max_length`` already keeps one token for the
    generated one, and the start token takes another."""
    return ContextLimit(
        room=lm.max_length - 1,
        limit=f"fit the client's max_length ({lm.max_length + 1} tokens, one kept for the generated token "
        f"and one for the start token)",
        fixes="Pass the server's context length with --model_args ...,max_length=<n>, score shorter texts",
        window=f"max_length ({lm.max_length + 1} tokens)",
    )


def _payload(lm, prompts: list[list[int]], k: int) -> dict:
    """The stock client's loglikelihood payload for these prompts, asking for k alternatives."""
    payload = lm._create_payload(lm.create_message(prompts), generate=False, seed=lm._seed)
    payload["logprobs"] = k
    return payload


def _post(lm, payload: dict, retries: bool = True) -> dict:
    import requests
    from tenacity import retry, retry_if_exception, stop_after_attempt, wait_exponential

    def send():
        response = requests.post(
            lm.base_url, json=payload, headers=lm.header, verify=lm.verify_certificate, timeout=lm.timeout
        )
        if not response.ok:
            logger.warning("API request failed (HTTP %s): %s", response.status_code, response.text[:500])
        response.raise_for_status()
        return response.json()

    if not retries:
        return send()
    return retry(
        stop=stop_after_attempt(lm.max_retries),
        wait=wait_exponential(multiplier=0.5, min=1, max=10),
        retry=retry_if_exception(_worth_retrying),
        reraise=True,
    )(send)()


def _worth_retrying(error: BaseException) -> bool:
    """A refusal of the request itself (HTTP 4xx but 408 and 429) is answered the same every time."""
    import requests

    if isinstance(error, requests.HTTPError) and error.response is not None:
        status = error.response.status_code
        return not (400 <= status < 500) or status in (408, 429)
    return True


def _choices(response: dict, expected: int) -> list[dict]:
    choices = response.get("choices") if isinstance(response, dict) else None
    if not isinstance(choices, list) or len(choices) != expected:
        raise ServerCheckError(
            f"the server answered a request for {expected} prompt(s) with "
            f"{'no choices' if not isinstance(choices, list) else f'{len(choices)} choices'}: "
            f"{str(response)[:300]}"
        )
    return sorted(choices, key=lambda choice: choice.get("index", 0))


def _prompt_logprobs(choice: dict, length: int) -> tuple[list, list, list | None]:
    """(token_logprobs, top_logprobs, tokens) of the first ``length`` (prompt) positions; errors name
    what is missing."""
    logprobs = choice.get("logprobs")
    values = logprobs.get("token_logprobs") if isinstance(logprobs, dict) else None
    if not isinstance(values, list) or len(values) < length:
        got = "no log-probs" if not isinstance(values, list) else f"log-probs for {len(values)} positions"
        raise ServerCheckError(
            f"this server returns no prompt log-probs (echo): asked for a {length}-token prompt with "
            f"echo=true and logprobs, it returned {got}. Chat-only APIs cannot be used; use a /v1/completions "
            f"server that echoes prompt log-probs: {GOOD_SERVERS}."
        )
    tops = logprobs.get("top_logprobs")
    if (
        not isinstance(tops, list)
        or len(tops) < length
        or any(not isinstance(t, dict) or not t for t in tops[1:length])
    ):
        raise ServerCheckError(
            "this server returns prompt log-probs but not the top-k alternatives (top_logprobs) at every prompt "
            "position, which Min-K%++ needs. Use a server that returns them with echo=true: " + GOOD_SERVERS + "."
        )
    tokens = logprobs.get("tokens")
    return (
        values[:length],
        tops[:length],
        tokens[:length] if isinstance(tokens, list) and len(tokens) >= length else None,
    )


def check_server(lm, k: int) -> ProbeReport:
    """Send one probe and raise :class:`ServerCheckError` naming the fault unless the server returns
    prompt log-probs that belong to the positions they are reported at.

    Checks, in order: the server accepts the stock client's loglikelihood request (token-id prompt,
    ``echo``, ``logprobs`` = k); it returns a finite log-prob <= 0 for every prompt token but the
    first, and top-k alternatives there; where the prompt token is among its own position's
    alternatives, the two values agree; and at the positions the model predicts confidently, the
    most likely alternative at position i is prompt token i, not token i + 1 (a server that reports
    the next position's distribution, as llama-cpp-python's stock server does, fails here).

    Args:
        lm: the ``LocalCompletionsAPI`` client (its URL, tokenizer and request settings are used).
        k: the number of top alternatives per position to ask for.

    Returns:
        What the probe found (:class:`ProbeReport`).

    Raises:
        ServerCheckError: the server cannot be reached, refuses the request, or fails a check.
    """
    ids = [lm.prefix_token_id, *lm.tok_encode(PROBE_TEXT, add_special_tokens=False)]
    where = f"the completions server at {lm.base_url}"
    response = _send_probe(lm, ids, k, where)
    try:
        report = _probe_values(response, ids, k, lm.tokenizer)
    except ServerCheckError as error:
        raise ServerCheckError(f"{where} cannot be used: {error}") from error
    if report.alternatives_max < k:
        logger.warning(
            "%s returned at most %d alternatives per token although %d were asked for; Min-K%%++ is "
            "approximated from those.",
            where,
            report.alternatives_max,
            k,
        )
    logger.info("%s passed the prompt log-prob check: %s", where, report)
    return report


def _send_probe(lm, ids: list[int], k: int, where: str) -> dict:
    """The server's answer to the probe prompt ``ids``; a connection failure or a refusal is a
    :class:`ServerCheckError` that names the fault (see :func:`_diagnose_refusal`)."""
    import requests

    try:
        return _post(lm, _payload(lm, [ids], k), retries=False)
    except requests.ConnectionError as error:
        raise ServerCheckError(f"cannot reach {where} ({error}). Start the server or fix base_url.") from error
    except requests.HTTPError as error:
        raise _diagnose_refusal(lm, ids, k, where, error) from error


def _diagnose_refusal(lm, ids: list[int], k: int, where: str, error) -> ServerCheckError:
    """Why the server refused the probe: the same probe sent as text tells a refusal of token-id
    prompts from a refusal of the request itself (echo, logprobs), and shows whether the text answer
    has faults of its own."""
    import requests

    refusal = f"HTTP {error.response.status_code}: {_error_text(error.response)}"
    text_payload = _payload(lm, [ids], k)
    text_payload["prompt"] = lm.tokenizer.decode(ids)
    try:
        text_response = _post(lm, text_payload, retries=False)
    except requests.RequestException:
        return ServerCheckError(
            f"{where} refused the loglikelihood request (echo=true, logprobs={k}, max_tokens=1; {refusal}). "
            f"If it limits the number of log-probs, ask for fewer with --metadata '{{\"topk_logprobs\": 5}}'; "
            f"a server that rejects echo, or a chat-only API, cannot give prompt log-probs. Servers that work: "
            f"{GOOD_SERVERS}."
        )
    faults = [
        f"it refuses prompts given as token ids ({refusal}), which is how the harness sends them "
        f"(with tokenized_requests=False the server would re-tokenize text and the log-probs could not be "
        f"matched to tokens)"
    ]
    try:
        _probe_values(text_response, None, k)
    except ServerCheckError as second:
        faults.append(str(second))
    return ServerCheckError(
        f"{where} cannot be used: " + "; and ".join(faults) + ". "
        f"llama-cpp-python's stock server (python -m llama_cpp.server) has both faults "
        f"(abetlen/llama-cpp-python#1983). Use a server that accepts token-id prompts and returns correct prompt "
        f"log-probs: {GOOD_SERVERS}."
    )


def _error_text(response, limit: int = 160) -> str:
    """The first line of a server's error message (OpenAI format ``{"error": {"message": ...}}``)."""
    try:
        message = response.json()["error"]["message"]
    except Exception:  # noqa: BLE001 - not the OpenAI error format
        message = response.text
    line = " ".join(str(message).split()) or "(empty body)"
    return line if len(line) <= limit else line[: limit - 3] + "..."


def _probe_values(response: dict, ids: list[int] | None, k: int, tokenizer=None) -> ProbeReport:
    """The probe's checks on one response; ``ids`` None: a text prompt (length from the response).

    Args:
        response: the server's JSON answer to the probe.
        ids: the probe's token ids, or None for a probe sent as text.
        k: the number of alternatives asked for.
        tokenizer: decodes ``ids`` when the server returns no token strings.

    Returns:
        What the probe found.

    Raises:
        ServerCheckError: the first check that fails, naming the fault.
    """
    (choice,) = _choices(response, 1)
    length = len(ids) if ids is not None else _text_prompt_length(response, choice)
    values, tops, tokens = _prompt_logprobs(choice, length)
    if tokens is None:
        if tokenizer is None:
            raise ServerCheckError("it returns no token strings (logprobs.tokens) with its log-probs")
        tokens = [tokenizer.decode([t]) for t in ids]
    _check_logprob_values(values, length)
    _check_consistency(values, tops, tokens, length)
    aligned, ahead = _check_alignment(tops, tokens, length)
    sizes = [len(t) for t in tops[1:length]]
    return ProbeReport(length - 1, aligned, ahead, min(sizes), max(sizes))


def _text_prompt_length(response: dict, choice: dict) -> int:
    """Tokens of a prompt sent as text: the server's own count, else all echoed tokens but the generated one."""
    logprobs = choice.get("logprobs") if isinstance(choice.get("logprobs"), dict) else {}
    usage = response.get("usage") if isinstance(response.get("usage"), dict) else {}
    return usage.get("prompt_tokens") or len(logprobs.get("tokens") or []) - 1


def _check_logprob_values(values: list, length: int) -> None:
    """Every prompt token after the first has a finite log-prob <= 0, and not all of them are 0."""
    bad = [
        i
        for i in range(1, length)
        if not isinstance(values[i], (int, float)) or not math.isfinite(values[i]) or values[i] > 1e-4
    ]
    if bad:
        raise ServerCheckError(
            f"it returns invalid prompt log-probs (position {bad[0]}: {values[bad[0]]!r}); expected a finite "
            f"natural-log probability <= 0 for every prompt token after the first"
        )
    if all(values[i] == 0 for i in range(1, length)):
        raise ServerCheckError("it returns a log-prob of 0.0 for every prompt token (no real prompt log-probs)")


def _check_consistency(values: list, tops: list[dict], tokens: list[str], length: int) -> None:
    """At each position, the prompt token's log-prob agrees with its own entry among the alternatives
    (when listed) and is no larger than the best alternative."""
    inconsistent = []
    for i in range(1, length):
        own = tops[i].get(tokens[i])
        best = max(tops[i].values())
        if (own is not None and abs(own - values[i]) > CONSISTENCY_TOLERANCE) or values[
            i
        ] > best + CONSISTENCY_TOLERANCE:
            inconsistent.append(i)
    if inconsistent:
        i = inconsistent[0]
        raise ServerCheckError(
            f"its token_logprobs disagree with its own top_logprobs at {len(inconsistent)} of {length - 1} prompt "
            f"positions (position {i}, token {tokens[i]!r}: {values[i]:.4f} vs alternatives "
            f"{dict(sorted(tops[i].items(), key=lambda kv: -kv[1])[:3])})"
        )


def _check_alignment(tops: list[dict], tokens: list[str], length: int) -> tuple[int, int]:
    """``(aligned, ahead)``: positions whose most likely alternative is the prompt token there, and
    those where it is the next prompt token; a shifted server (ahead well above aligned) is an error.

    "Ahead" counts only positions whose next token differs from the previous one: a model that
    predicts its last input token again (as small random-weight models with tied embeddings do) would
    otherwise look shifted on the probe's comma-separated lists (``two , three``: the token after
    ``two`` is the one before it)."""
    top1 = [None] + [max(tops[i].items(), key=lambda kv: kv[1])[0] for i in range(1, length)]
    aligned = sum(top1[i] == tokens[i] for i in range(1, length))
    ahead = sum(top1[i] == tokens[i + 1] != tokens[i - 1] for i in range(1, length - 1))
    if ahead >= 3 and ahead > 2 * aligned:
        raise ServerCheckError(
            f"its prompt log-probs are shifted by one position: at {ahead} of {length - 1} prompt positions the "
            f"most likely alternative it reports for token i is token i+1 (and token i itself at only {aligned}), "
            f"i.e. each token is given a log-prob from the next position's distribution"
        )
    if aligned < 3:
        logger.warning(
            "Prompt log-prob check: the model's most likely alternative matched the probe text at only %d of %d "
            "positions; alignment could not be confirmed (a weak model, or a faulty server).",
            aligned,
            length - 1,
        )
    return aligned, ahead


def token_scores_from_choice(
    choice: dict, prompt: list[int], context_length: int, info: ModelInfo, truncated: int = 0
) -> TokenScores:
    """Per-token values of one prompt's echoed log-probs: positions ``context_length..len(prompt)-1``
    (the text tokens; any generated token after the prompt is left out)."""
    values, tops, _ = _prompt_logprobs(choice, len(prompt))
    scored = values[context_length:]
    if any(v is None for v in scored):
        raise ServerCheckError(f"the server returned null log-probs for text tokens: {scored[:10]}")
    token_logprobs = np.asarray(scored, dtype=np.float64)
    alternatives = [np.fromiter(t.values(), dtype=np.float64, count=len(t)) for t in tops[context_length:]]
    mu, sigma = approximate_mu_sigma(alternatives, token_logprobs, info.vocab_size)
    is_greedy = all(v >= alt.max() - 1e-6 for v, alt in zip(token_logprobs, alternatives, strict=True))
    top1 = [max(float(v), float(alt.max(initial=-np.inf))) for v, alt in zip(token_logprobs, alternatives, strict=True)]
    return TokenScores(
        token_logprobs.sum(), is_greedy, prompt[context_length:], token_logprobs, mu, sigma, info, truncated, top1=top1
    )


def _answer_batch(
    lm, batch: list[EncodedText], cuts: list[int], k: int, info: ModelInfo, requests: list[PerTokenRequest]
) -> list[TokenScores]:
    """One HTTP request for a batch of prompts (``logprobs`` = k); each text's values from its choice.
    ``requests``: the group the batch's items index into (named when the request fails)."""
    import requests as http

    prompts = [item.context + item.tokens for item in batch]
    try:
        response = _post(lm, _payload(lm, prompts, k))
    except http.RequestException as error:
        raise _request_failed(lm, error, [requests[item.index] for item in batch], prompts) from error
    return [
        token_scores_from_choice(choice, prompt, len(item.context), info, cut)
        for item, prompt, cut, choice in zip(batch, prompts, cuts, _choices(response, len(batch)), strict=True)
    ]


#: How servers word a prompt longer than their context (vLLM and OpenAI, gguf_server; llama.cpp's server).
_CONTEXT_ERROR = re.compile(r"maximum context length|context size|context length|n_ctx", re.IGNORECASE)
_CONTEXT_NUMBER = re.compile(r"maximum context length is (\d+)", re.IGNORECASE)


def _request_failed(lm, error, failed: list[PerTokenRequest], prompts: list[list[int]]) -> UserError:
    """What a failed scoring request tells the user: a prompt longer than the server's context
    (:class:`ServerContextError`, with ``max_length`` and the server's number), or a server that stopped
    answering (:class:`ServerFailedError`, naming the documents and how to resume with ``--use_cache``)."""
    first = failed[0]
    docs = f"{first.task_name} doc {first.doc_id}" + (
        f" (and {len(failed) - 1} other text(s) of the same request)" if len(failed) > 1 else ""
    )
    response = getattr(error, "response", None)
    message = _error_text(response, limit=300) if response is not None else f"{type(error).__name__}: {error}"
    if response is not None and response.status_code == 400 and _CONTEXT_ERROR.search(response.text or ""):
        number = _CONTEXT_NUMBER.search(response.text or "")
        try:
            number = number.group(1) if number else response.json().get("error", {}).get("n_ctx")
        except Exception:  # noqa: BLE001 - not JSON
            number = None
        context = f"its context of {number} tokens" if number else "its context"
        return ServerContextError(
            f"the server at {lm.base_url} refused {docs}: a prompt of {max(map(len, prompts))} tokens is longer "
            f"than {context} (HTTP 400: {message}), but the client's max_length is {_max_length_setting(lm)} tokens "
            f"(--model_args max_length; lm-eval's default is 2048 when it is not given). Pass --model_args "
            f"...,max_length={number or '<the server context>'} (longer texts are then refused before they are "
            f"sent, or cut with --metadata '{{\"truncate\": true}}'), or start the server with a larger context."
        )
    cache = getattr(getattr(lm, "cache_hook", None), "dbdict", None)
    if cache is not None:
        resume = (
            f"The answers received so far are saved in {getattr(cache, 'filename', 'the --use_cache file')}: "
            f"restart the server and re-run the same command (same --use_cache); only the texts not yet answered "
            f"are sent again."
        )
    else:
        resume = (
            "Restart the server and re-run the command with --use_cache <path> (e.g. --use_cache cache/run): "
            "answers are then saved as they arrive, and after another failure a re-run with the same --use_cache "
            "sends only the texts not yet answered. This run had no --use_cache, so its answers are not saved."
        )
    return ServerFailedError(
        f"the completions server at {lm.base_url} failed while scoring {docs}, after "
        f"{lm.max_retries if _worth_retrying(error) else 1} attempt(s): {message}. {resume}"
    )


def score_per_token_api(lm, requests: list[PerTokenRequest], disable_tqdm: bool = False) -> list[TokenScores]:
    """Answer per-token requests with one prompt each, after one server check per k.

    Args:
        lm: lm-eval's ``LocalCompletionsAPI`` (or ``OpenAICompletionsAPI``).
        requests: the per-token requests; grouped by the number of top-k log-probs they ask for.
        disable_tqdm: hide the progress bar.

    Returns:
        One :class:`TokenScores` per request, in request order. Prompts are sorted, batched
        (``batch_size`` per HTTP request) and sent concurrently (``num_concurrent``) as the stock
        ``TemplateAPI._loglikelihood_tokens`` does.

    Raises:
        GradientsUnavailableError: a request asks for gradient norms (GradNorm: HF backend only).
    """
    refuse_gradients(requests, _backend_name(lm))
    _check_client(lm)
    check_context(lm)
    checked = lm.__dict__.setdefault("_pdd_server_checked", set())

    def answer_group(k: int, group: list[PerTokenRequest]) -> list[TokenScores]:
        if k not in checked:
            check_server(lm, k)
            checked.add(k)
        info = api_model_info(lm, k)
        sent = []  # one entry per HTTP request (list.append is atomic across the pool's threads)

        def answer_batch(batch, cuts):
            sent.append(len(batch))
            return _answer_batch(lm, batch, cuts, k, info, group)

        concurrent = lm._concurrent > 1
        with ThreadPoolExecutor(max_workers=lm._concurrent) if concurrent else contextlib.nullcontext() as pool:
            answers = answer_per_token(
                lm,
                group,
                _context_limit(lm),
                answer_batch,
                desc="Scoring texts (per-token log-probs, API)",
                disable_tqdm=disable_tqdm,
                batches=lambda order: list(order.get_batched(n=lm._batch_size)),
                map_batches=pool.map if concurrent else map,
            )
        lm._pdd_http_requests = getattr(lm, "_pdd_http_requests", 0) + len(sent)
        logger.info("local-completions: %d texts scored with %d requests (k=%d).", len(group), len(sent), k)
        return answers

    return answer_groups(requests, lambda request: request.topk_logprobs, answer_group)
