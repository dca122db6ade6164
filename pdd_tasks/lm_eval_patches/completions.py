"""The patches of lm-eval's completions clients (``lm_eval/models/openai_completions.py``): per-token
requests answered from a /v1/completions server's echoed log-probs, and refused with the fix by a
chat-completions client."""

from __future__ import annotations

from pdd_tasks.backends.completions import refuse_chat_completions, score_per_token_api
from pdd_tasks.lm_eval_patches.core import Patch, _routing_to, register


def _refusing_per_token_requests(stock):
    """Replacement of a chat-completions client's ``loglikelihood``: per-token requests refused with
    the fix (:func:`refuse_chat_completions`), the others to the stock method."""

    def loglikelihood(self, requests, *args, **kwargs):
        refuse_chat_completions(self, requests)
        return stock(self, requests, *args, **kwargs)

    return loglikelihood


def _completions() -> list[type]:
    from lm_eval.models.openai_completions import LocalCompletionsAPI

    return [LocalCompletionsAPI]


def _chat_completions() -> list[type]:
    from lm_eval.models.openai_completions import LocalChatCompletion, OpenAIChatCompletion

    return [LocalChatCompletion, OpenAIChatCompletion]


register(
    Patch(
        name="completions-loglikelihood",
        purpose=(
            "--model local-completions (and openai-completions, its subclass) answers PerTokenRequests "
            "from a /v1/completions server's echoed log-probs, after a probe of the server "
            "(score_per_token_api); other requests reach the stock method unchanged"
        ),
        changes="models/openai_completions.py: LocalCompletionsAPI.loglikelihood (inherited from api/model.py TemplateLM)",
        when="always",
        targets=lambda: [(cls, "loglikelihood") for cls in _completions()],
        replacement=_routing_to(score_per_token_api),
    ),
    Patch(
        name="chat-completions-refusal",
        purpose=(
            "--model local-chat-completions / openai-chat-completions refuse PerTokenRequests with a message "
            "naming the backend that can answer them (a chat API returns no prompt log-probs)"
        ),
        changes="models/openai_completions.py: LocalChatCompletion.loglikelihood, OpenAIChatCompletion.loglikelihood",
        when="always",
        targets=lambda: [(cls, "loglikelihood") for cls in _chat_completions()],
        replacement=_refusing_per_token_requests,
    ),
)
