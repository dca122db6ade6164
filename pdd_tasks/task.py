"""The lm-eval task class shared by every pdd benchmark.

A pdd task scores each labelled text with every detection method from one forward pass (plus one
for the lowercased text, for the Lowercase method) and reports, per method, the dataset-level AUC and
TPR at 5% and 1% FPR. Per-text scores are in ``--log_samples`` (each metric's value is the pair
``[score, label]``; higher score = more likely a member).

Method settings are task metadata; a user overrides them from the command line, e.g.
``--metadata '{"dcpdd_a": 10, "freq_table": "my_table.npz"}'``. See :class:`ScoringSettings`.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from lm_eval.api.task import ConfigurableTask

from pdd_metrics import (
    dcpdd_score,
    loss_score,
    lowercase_score,
    min_k_plus_plus_score,
    min_k_score,
    zlib_score,
)
from pdd_tasks import aggregations
from pdd_tasks.capture import ModelInfo, PerTokenRequest, TokenScores, install_hf_capture
from pdd_tasks.capture_api import install_api_capture
from pdd_tasks.capture_vllm import install_vllm_capture
from pdd_tasks.data_loading import DataSpec, load_benchmark
from pdd_tasks.freq_tables import FrequencyTable, find_table, tokenizer_fingerprint


logger = logging.getLogger(__name__)

BASE_METHODS = ("loss", "zlib", "lowercase", "min_k", "min_k_pp", "dcpdd")
ABLATION_METHODS = ("dcpdd_cld", "dcpdd_lup")  # DC-PDD paper's ablations (Sec. 5); dcpdd itself is +SFO


@dataclass(frozen=True)
class ScoringSettings:
    """Method hyperparameters, read from the task's metadata (YAML or ``--metadata``).

    Attributes:
        min_k: k of Min-K% Prob (fraction of lowest-scoring tokens; Shi et al. 2024 use 0.2).
        min_k_pp: k of Min-K%++ (Zhang et al. 2025 use 0.2).
        dcpdd_a: the cap a of DC-PDD Eq. 7 (paper's recommendation 0.01; 10 in its BookMIA table).
        dcpdd_ablations: also report the paper's ablations CLD and +LUP.
        lowercase: score the lowercased text too (one more forward pass per text) for Lowercase.
        freq_table: path of a DC-PDD reference frequency table; default: the table shipped for
            the default model's tokenizer (refused for any other tokenizer).
        truncate: allow texts longer than the model's context window, keeping their beginning
            (without it, such a text is an error).
        topk_logprobs: how many top alternatives per token to ask for from backends that return
            only the top k (``local-completions``; Min-K%++'s mu/sigma are then approximated from
            them); 20 is vLLM's default limit (``--max-logprobs``), OpenAI's API allows at most 5.
        exact_mu_sigma: ``--model vllm`` only: ask vLLM for the full next-token distribution
            (``prompt_logprobs=-1``, |V| values per token; needs ``max_logprobs=-1`` in
            ``--model_args``) so that Min-K%++'s mu/sigma are exact instead of top-k estimates.
    """

    min_k: float = 0.2
    min_k_pp: float = 0.2
    dcpdd_a: float = 0.01
    dcpdd_ablations: bool = False
    lowercase: bool = True
    freq_table: str | None = None
    truncate: bool = False
    topk_logprobs: int = 20
    exact_mu_sigma: bool = False

    @classmethod
    def from_metadata(cls, metadata: dict) -> ScoringSettings:
        values = {}
        for field in dataclasses.fields(cls):
            if field.name not in metadata:
                continue
            value = metadata[field.name]
            if field.name in ("min_k", "min_k_pp"):
                if not isinstance(value, (int, float)) or not 0 < value <= 1:
                    raise ValueError(f"metadata {field.name}={value!r}: expected a fraction in (0, 1], e.g. 0.2.")
                value = float(value)
            elif field.name == "dcpdd_a":
                if not isinstance(value, (int, float)) or value <= 0:
                    raise ValueError(f"metadata dcpdd_a={value!r}: expected a positive number (paper: 0.01 or 10).")
                value = float(value)
            elif field.name == "freq_table":
                value = None if value in (None, "") else str(value)
            elif field.name == "topk_logprobs":
                if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                    raise ValueError(
                        f"metadata topk_logprobs={value!r}: expected a whole number >= 1, e.g. 20 "
                        f"(at most what the server allows: vLLM 20 by default, OpenAI 5)."
                    )
            elif not isinstance(value, bool):
                raise ValueError(f"metadata {field.name}={value!r}: expected true or false.")
            values[field.name] = value
        return cls(**values)

    @property
    def methods(self) -> tuple[str, ...]:
        methods = tuple(m for m in BASE_METHODS if self.lowercase or m != "lowercase")
        return methods + (ABLATION_METHODS if self.dcpdd_ablations else ())


def metric_list(methods: tuple[str, ...]) -> list[dict]:
    """One harness metric per (method, dataset-level metric); values are (score, label) pairs."""
    return [
        {"metric": f"{method}_{name}", "aggregation": aggregate, "higher_is_better": True}
        for method in methods
        for name, aggregate in aggregations.AGGREGATIONS.items()
    ]


def score_text(
    text: str,
    scores: TokenScores,
    lowercase_scores: TokenScores | None,
    log_reference_freq: np.ndarray,
    settings: ScoringSettings,
) -> dict[str, float]:
    """Every method's score of one text (higher = more likely a member)."""
    result = {
        "loss": loss_score(scores.logprobs),
        "zlib": zlib_score(scores.logprobs, text),
        "min_k": min_k_score(scores.logprobs, k=settings.min_k),
        "min_k_pp": min_k_plus_plus_score(scores.logprobs, scores.mu, scores.sigma, k=settings.min_k_pp),
        "dcpdd": dcpdd_score(scores.logprobs, scores.token_ids, log_reference_freq, a=settings.dcpdd_a),
    }
    if lowercase_scores is not None:
        result["lowercase"] = lowercase_score(scores.logprobs, lowercase_scores.logprobs)
    if settings.dcpdd_ablations:
        result["dcpdd_cld"] = dcpdd_score(
            scores.logprobs, scores.token_ids, log_reference_freq, a=None, first_occurrence_only=False
        )
        result["dcpdd_lup"] = dcpdd_score(
            scores.logprobs, scores.token_ids, log_reference_freq, a=settings.dcpdd_a, first_occurrence_only=False
        )
    return result


@functools.lru_cache(maxsize=8)
def _fingerprint_of(tokenizer_name: str) -> str | None:
    """Fingerprint of a tokenizer by name or path, or None where it cannot be loaded here."""
    try:
        from transformers import AutoTokenizer

        return tokenizer_fingerprint(AutoTokenizer.from_pretrained(tokenizer_name))
    except Exception as error:  # offline hub name, GGUF-only directory, ...: checked later instead
        logger.debug("Could not load tokenizer %r for the early table check: %s", tokenizer_name, error)
        return None


class BackendWithoutTokenLogprobs(RuntimeError):
    pass


class MembershipInferenceTask(ConfigurableTask):
    """A labelled membership-inference benchmark (label 1 = member) scored with every method.

    YAML keys used besides the usual ones: ``dataset_path`` (HF Hub id, the documented source),
    ``dataset_name`` (Hub config), ``test_split``, and the data metadata of
    :class:`pdd_tasks.data_loading.DataSpec` (``data_source``: ``hub``, ``package`` or a local file
    or directory; ``text_field``, ``label_field``, ``schema``, ``max_words``, ...).
    """

    def __init__(self, config: dict) -> None:
        config = dict(config)
        config.pop("class", None)
        metadata = dict(config.get("metadata") or {})
        self.settings = ScoringSettings.from_metadata(metadata)
        config["metric_list"] = self.build_metric_list(metadata)
        # Metric values come from process_results below; this stops the harness from looking the
        # metric names up in HF `evaluate`.
        config["process_results"] = self.process_results
        install_hf_capture()
        install_api_capture()
        install_vllm_capture()
        self._log_reference_freq: np.ndarray | None = None
        self._warned_context = False
        super().__init__(config=config)
        self.check_table_before_scoring(metadata)

    def build_metric_list(self, metadata: dict) -> list[dict]:
        """The harness metrics of this task (called before the data is loaded)."""
        return metric_list(self.settings.methods)

    # -- data ------------------------------------------------------------------------------------

    def download(self, dataset_kwargs=None, **kwargs) -> None:
        """Load the split from where metadata ``data_source`` says (``hub`` by default, ``package``
        for WikiMIA's shipped copy, or a local file or directory); see
        :class:`pdd_tasks.data_loading.DataSpec`."""
        split = load_benchmark(DataSpec.from_task_config(self.config))
        self.dataset = {self.config.test_split: split}

    # -- requests --------------------------------------------------------------------------------

    def construct_requests(self, doc: dict, ctx, **kwargs) -> list[PerTokenRequest]:
        if (ctx or kwargs.get("apply_chat_template")) and not self._warned_context:
            logger.warning(
                "%s: few-shot examples, descriptions and chat templates are ignored; every text is "
                "scored on its own after the model's start token (DC-PDD Eq. 2).",
                self.config.task,
            )
            self._warned_context = True
        texts = [doc["text"]]
        if self.settings.lowercase:
            texts.append(doc["text"].lower())
        return [
            PerTokenRequest(
                request_type="loglikelihood",
                doc=doc,
                arguments=("", text),
                idx=index,
                metadata=kwargs.get("metadata", (self.config.task, None, 1)),
                truncate=self.settings.truncate,
                topk_logprobs=self.settings.topk_logprobs,
                exact_mu_sigma=self.settings.exact_mu_sigma,
            )
            for index, text in enumerate(texts)
        ]

    # -- scoring ---------------------------------------------------------------------------------

    def process_results(self, doc: dict, results: list) -> dict[str, tuple[float, int]]:
        for result in results:
            if not isinstance(result, TokenScores):
                raise BackendWithoutTokenLogprobs(
                    f"{self.config.task}: the model backend returned {type(result).__name__} {result!r} "
                    f"without per-token log-probs. lm-eval-pdd captures them from --model hf, --model vllm "
                    f"and --model local-completions (an OpenAI-compatible /v1/completions server that "
                    f"echoes prompt log-probs); this backend does not hand them over."
                )
        scores = self.score_results(doc, results)
        label = int(doc["label"])
        return {
            f"{method}_{name}": (scores[method], label)
            for method in self.settings.methods
            for name in aggregations.AGGREGATIONS
        }

    def score_results(self, doc: dict, results: list) -> dict[str, float]:
        """Every method's score of ``doc["text"]`` from the backend's answers to its requests."""
        self.record_scoring_backend(results[0].model)
        log_freq = self.reference_log_frequencies(results[0].model)
        return score_text(
            doc["text"], results[0], results[1] if self.settings.lowercase else None, log_freq, self.settings
        )

    def record_scoring_backend(self, model: ModelInfo) -> None:
        """Record in the results JSON (``configs.<task>.metadata.token_scores``) which backend gave
        the per-token values and how mu/sigma of Min-K%++ were obtained (exact or approximated)."""
        if "token_scores" not in self.config.metadata:
            self.config.metadata["token_scores"] = {
                "backend": model.backend,
                "model": model.name,
                "mu_sigma": model.distribution_stats,
            }
            logger.info("%s: per-token values from %s", self.config.task, self.config.metadata["token_scores"])

    def freq_table_path(self, fingerprint: str | None = None) -> Path:
        """The DC-PDD reference table: metadata ``freq_table`` if given, else the table installed for
        this tokenizer fingerprint (``lm-eval-pdd install-table``, ``build-table --install``), else
        the shipped default (:func:`pdd_tasks.freq_tables.find_table`)."""
        if self.settings.freq_table:
            return Path(self.settings.freq_table)
        return find_table(fingerprint)[0]

    def check_table_before_scoring(self, metadata: dict) -> None:
        """Refuse a mismatched frequency table before any model work, where the CLI named the model.

        ``lm_eval`` merges ``--model_args`` into task metadata, so ``pretrained`` (or ``tokenizer``)
        is known here for HF models given by name or path. Where the tokenizer cannot be loaded from
        that name, the same check runs when the first text is scored.
        """
        name = metadata.get("tokenizer") or metadata.get("pretrained")
        if not isinstance(name, str):
            return
        fingerprint = _fingerprint_of(name)
        if fingerprint is not None:
            FrequencyTable.load(self.freq_table_path(fingerprint)).check_matches(fingerprint, name)

    def reference_log_frequencies(self, model: ModelInfo) -> np.ndarray:
        """log f(v) of DC-PDD Eq. 5 for the model's vocabulary, from the configured table (once)."""
        if self._log_reference_freq is None:
            fingerprint = model.tokenizer_fingerprint
            path = self.freq_table_path(fingerprint)
            source = "metadata freq_table" if self.settings.freq_table else find_table(fingerprint)[1]
            table = FrequencyTable.load(path)
            table.check_matches(fingerprint, model.name)
            self._log_reference_freq = table.log_frequencies(model.vocab_size)
            used = {
                "path": str(path),
                "source": source,
                "counts_from": table.counts_from,
                "tokenizer": table.tokenizer_name,
                "total_tokens": int(table.total_tokens),
                "corpus": table.corpus,
            }
            self.config.metadata["freq_table_used"] = used
            # Shown at warning level (lm_eval prints those) unless the user named the table.
            log = logger.warning if table.is_estimate or not self.settings.freq_table else logger.info
            log("%s: DC-PDD reference table %s (%s): %s", self.config.task, path, source, table.description)
        return self._log_reference_freq
