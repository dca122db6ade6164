"""The lm-eval task class shared by every pdd benchmark.

A pdd task scores each labelled text with every detection method from one forward pass (plus one
for the lowercased text, for the Lowercase method) and reports, per method, the dataset-level AUC and
TPR at 5%, 1% and 0.1% FPR with their standard errors, and the same metrics of the blind baseline (a
classifier of the texts alone). Per-text scores are in ``--log_samples`` (each metric's value is the
pair ``[score, label]``; higher score = more likely a member).

Method settings are task metadata; a user overrides them from the command line, e.g.
``--metadata '{"dcpdd_a": 10, "freq_table": "my_table.npz"}'``. The settings and methods are
declared in :mod:`pdd_tasks.registry`.
"""

from __future__ import annotations

import functools
import logging
from pathlib import Path

import numpy as np
from lm_eval.api.task import ConfigurableTask

from pdd_tasks import lm_eval_patches
from pdd_tasks.backends.base import ModelInfo, PerTokenRequest, TokenScores, weights_fingerprint
from pdd_tasks.errors import UserError
from pdd_tasks.freq.tables import (
    FrequencyTable,
    FrequencyTableNotFoundError,
    find_table,
    tokenizer_fingerprint,
)
from pdd_tasks.loading.benchmark_data import DataSpec, load_benchmark
from pdd_tasks.loading.repeats import METADATA_KEY as REPEATS_KEY
from pdd_tasks.loading.repeats import distinct_rows
from pdd_tasks.registry import (
    METHODS,
    SETTINGS,
    ScoringSettings,
    TextInputs,
    check_metadata_keys,
    count_setting,
    extra_requests,
    generation_requests,
    planned_requests,
    prepare_hook,
    request_ceiling,
    score_text,
)
from pdd_tasks.tasks.aggregations import AGGREGATIONS
from pdd_tasks.tasks.dataset_methods import DATASET_METHODS


logger = logging.getLogger(__name__)


def metric_list(methods: tuple[str, ...], settings=None) -> list[dict]:
    """The harness metrics of a labelled task: per method of ``methods`` its AUC and TPRs, values
    ``(score, label)`` pairs; then those of each dataset-level method on under ``settings`` (default: every
    setting at its default), values its items (:mod:`pdd_tasks.tasks.dataset_methods`)."""
    settings = ScoringSettings() if settings is None else settings
    return [
        {"metric": f"{method}_{name}", "aggregation": aggregate, "higher_is_better": True}
        for method in methods
        for name, aggregate in AGGREGATIONS.items()
    ] + [
        {"metric": f"{method.prefix}_{name}", "aggregation": aggregate, "higher_is_better": True}
        for method in DATASET_METHODS.values()
        if method.on(settings)
        for name, aggregate in method.aggregations.items()
    ]


@functools.lru_cache(maxsize=8)
def _fingerprint_of(tokenizer_name: str) -> str | None:
    """Fingerprint of a tokenizer by name or path, or None where it cannot be loaded here."""
    tokenizer = _tokenizer(tokenizer_name)  # None: an offline hub name, a GGUF-only directory, ...
    return None if tokenizer is None else tokenizer_fingerprint(tokenizer)


class BackendWithoutTokenLogprobs(RuntimeError):
    pass


class RunOptionError(UserError):
    """An ``lm_eval`` option that a pdd task cannot honour (``--limit 0``, a chat template)."""


def refuse_run_options(task: str, limit=None, apply_chat_template=False, system_instruction=None, **_other) -> None:
    """Refuse the ``lm_eval`` options that make no sense for a pdd task, before any request is built
    (the keyword arguments of lm-eval's ``Task.build_all_requests``; the others are not looked at).

    ``--limit 0`` (or a fraction that rounds to 0 documents) scores nothing. A chat template or a
    system instruction would wrap each text in a conversation: the scores would then measure the
    template as well as the text, and no longer be the membership scores of the papers (every text
    is scored on its own after the model's start token, DC-PDD Eq. 2).

    Raises:
        RunOptionError: naming the option and the fix.
    """
    if limit is not None and limit == 0:
        raise RunOptionError(
            f"{task}: --limit 0 scores no document, so there is nothing to report. Remove --limit to score every "
            f"document, or give a positive number of documents (--limit 100; a value below 1 is a fraction of them)."
        )
    flags = [
        flag
        for flag, given in (
            ("--apply_chat_template", apply_chat_template),
            ("--system_instruction", system_instruction),
        )
        if given
    ]
    if flags:
        raise RunOptionError(
            f"{task}: {' and '.join(flags)} cannot be used with a pdd task. Membership scores are computed on each "
            f"text as the model reads it after its start token (DC-PDD Eq. 2); a chat template or system instruction "
            f"would wrap the text in a conversation, and the scores would measure the template too. Remove "
            f"{' and '.join(flags)} (run chat-formatted benchmarks in a separate lm_eval command)."
        )


def loglikelihood_requests(
    task: str, doc: dict, doc_id: int, arguments: list[tuple[str, str]], share_passes: bool = True, **kwargs
) -> list:
    """Ordinary ``loglikelihood`` requests of one document of ``task`` (a dataset-level test's):
    one per ``(context, continuation)`` in ``arguments``, in that order (``kwargs``: those of
    ``construct_requests``). ``share_passes=False`` marks them to be answered in a call of their own
    (:func:`pdd_tasks.backends.base.stock_in_calls`), sharing no forward pass with the run's other requests."""
    from lm_eval.api.instance import Instance

    requests = [
        Instance(
            request_type="loglikelihood",
            doc=doc,
            arguments=argument,
            idx=index,
            metadata=kwargs.get("metadata", (task, doc_id, 1)),
        )
        for index, argument in enumerate(arguments)
    ]
    if not share_passes:
        for request in requests:
            request.share_passes = False
    return requests


def scored_texts(docs: list[dict], limit=None, samples=None) -> list[str]:
    """The texts the run scores, in doc order, as lm-eval's ``Task.doc_iterator`` selects them over
    every process: the first ``limit`` documents, or those at the indices of ``--samples``."""
    if samples:
        chosen = set(samples)
        return [doc["text"] for index, doc in enumerate(docs) if index in chosen]
    return [doc["text"] for doc in (docs[: int(limit)] if limit else docs)]


class TooManyRequests(UserError):
    """The settings ask for more requests than ``max_requests`` allows; refused before any is built."""


def warn_one_word_texts(task: str, texts: list[str], settings) -> None:
    """Warn where PAC scores texts of one word (no space): its copies swap words, so each copy of such a
    text is the text itself and its PAC score is 0 whatever the model saw (:func:`pdd_metrics.pac.swap_augmentations`)."""
    if "pac" not in settings.methods:
        return
    single = [index for index, text in enumerate(texts) if len(text.split(" ")) < 2]
    if single:
        logger.warning(
            "%s: %d of the %d texts are one word (no space; e.g. text %d), so PAC's word-swapped copies are the text "
            "itself and its PAC score is 0.0 whatever the model saw: read PAC's ranking of those texts as no evidence, "
            "or score texts of several words.",
            task,
            len(single),
            len(texts),
            single[0],
        )


def check_request_count(task: str, texts: int, settings) -> int:
    """The requests a run of ``texts`` texts sends at most (:func:`pdd_tasks.registry.planned_requests`),
    refused with :class:`TooManyRequests` above ``settings.max_requests``, naming what costs most, and
    above :func:`pdd_tasks.registry.request_ceiling` whatever ``max_requests`` says, naming the
    setting that makes the count (e.g. ``pac_augmentations``), never the cap."""
    planned, extra = planned_requests(texts, settings)
    per_text = " + ".join(["1 (the text)", *(f"{count:,} ({name})" for name, count in extra)])
    costliest = max(extra, key=lambda pair: pair[1])[0] if extra else None
    ceiling, why = request_ceiling()
    if planned > ceiling:
        setting = count_setting(costliest, settings) if costliest else None
        fix = f"lower {setting}" if setting else f"lower the per-text count of {costliest}" if costliest else ""
        raise TooManyRequests(
            f"{task}: {texts:,} texts x {per_text} requests each = {planned:,} requests, more than {ceiling:,}, "
            f"{why}, whatever max_requests says. Ask for fewer ({fix + ', or ' if fix else ''}score fewer texts "
            "with --limit)."
        )
    if planned > settings.max_requests:
        fix = f"lower the per-text count of {costliest} (its settings: docs/settings.md), " if costliest else ""
        raise TooManyRequests(
            f"{task}: {texts:,} texts x {per_text} requests each = {planned:,} requests, more than "
            f"max_requests={settings.max_requests:,}. Ask for fewer ({fix}or score fewer texts with --limit), or raise "
            f"max_requests if the run is meant to be this large (--metadata '{{\"max_requests\": {planned}}}')."
        )
    return planned


class AnswersFromAnotherModel(UserError):
    """The backend's answers were not computed by the run's model (a shared ``--use_cache`` file)."""


class AnswersFromAnotherConvention(UserError):
    """The backend's answers were scored under another ``convention`` (a shared ``--use_cache`` file)."""


class AnswersWithoutTop1(UserError):
    """The backend's answers lack the top-1 log-probs Gap-K% reads (a ``--use_cache`` file of an earlier version)."""


class AnswersWithoutGradients(UserError):
    """The backend's answers lack the gradient norms GradNorm reads (a ``--use_cache`` file of a run without it)."""


def _same_model(expected: str, name: str) -> bool:
    """Whether model name/path ``expected`` (from --model_args) names the model ``name`` reports."""
    if expected == name:
        return True
    left, right = Path(expected).expanduser(), Path(name).expanduser()
    if left.exists() and right.exists():
        return left.resolve() == right.resolve()
    return expected.rstrip("/").split("/")[-1] == name.rstrip("/").split("/")[-1]


@functools.lru_cache(maxsize=8)
def _output_vocab_size(model_name: str) -> int | None:
    """The size of the next-token distribution of the HF model ``model_name`` (its config's
    ``vocab_size``), or None where its config cannot be read here (checked when scoring instead)."""
    try:
        from transformers import AutoConfig

        config = AutoConfig.from_pretrained(model_name)
        config = config.get_text_config() if hasattr(config, "get_text_config") else config
        size = getattr(config, "vocab_size", None)
        return int(size) if isinstance(size, int) and size > 0 else None
    except Exception as error:  # a GGUF file, an offline hub name, ...
        logger.debug("Could not read the config of %r for the early table check: %s", model_name, error)
        return None


@functools.lru_cache(maxsize=4)
def _tokenizer(name: str):
    try:
        from transformers import AutoTokenizer

        return AutoTokenizer.from_pretrained(name)
    except Exception as error:
        logger.debug("Could not load tokenizer %r: %s", name, error)
        return None


def scored_prefix(text: str, token_ids: np.ndarray, tokenizer) -> str:
    """The beginning of ``text`` that the scored ``token_ids`` (the text's first tokens, the start
    token excluded) cover: cut at the end offset of the last one (fast tokenizers), else decoded."""
    n = int(token_ids.size)
    try:
        encoded = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
        ids, offsets = list(encoded["input_ids"]), list(encoded["offset_mapping"])
        for skip in (0, 1):  # 1: the text's own first token was the start token (not scored)
            if [int(t) for t in ids[skip : skip + n]] == token_ids.tolist():
                return text[: offsets[skip + n - 1][1]]
    except (NotImplementedError, KeyError, TypeError, ValueError):  # a slow tokenizer: no offsets
        pass
    return tokenizer.decode(token_ids.tolist())


def _described(model: ModelInfo) -> str:
    """A model's identity in a message: name, tokenizer and weights fingerprints (12 digits)."""
    weights = f", weights {model.weights_fingerprint[:12]}" if model.weights_fingerprint else ""
    return f"{model.name}, tokenizer {model.tokenizer_fingerprint[:12]}{weights}"


class MembershipInferenceTask(ConfigurableTask):
    """A labelled membership-inference benchmark (label 1 = member) scored with every method.

    YAML keys used besides the usual ones: ``dataset_path`` (HF Hub id, the documented source),
    ``dataset_name`` (Hub config), ``test_split``, and the data metadata of
    :class:`pdd_tasks.loading.benchmark_data.DataSpec` (``data_source``: ``hub``, ``package`` or a local file
    or directory; ``text_field``, ``label_field``, ``schema``, ``max_words``, ...).
    """

    def __init__(self, config: dict) -> None:
        # lm-eval's behaviour as the pdd tasks need it: per-token answers from the backends, our
        # standard errors, user errors without a traceback under the lm_eval command (idempotent).
        lm_eval_patches.apply()
        config = dict(config)
        config.pop("class", None)
        metadata = dict(config.get("metadata") or {})
        check_metadata_keys(metadata, self.metadata_keys(), config.get("task", type(self).__name__))
        self.settings = ScoringSettings.from_metadata(metadata)
        task = config.get("task", type(self).__name__)
        self.dataset_methods = [
            method(task, self.settings) for method in DATASET_METHODS.values() if method.on(self.settings)
        ]
        config["metric_list"] = self.build_metric_list(metadata)
        # Metric values come from process_results below; this stops the harness from looking the
        # metric names up in HF `evaluate`.
        config["process_results"] = self.process_results
        self._log_reference_freq: np.ndarray | None = None
        self._prepared: dict | None = None
        self._warned_context = False
        self._warned_gap_k_window = False
        super().__init__(config=config)
        self.check_table_before_scoring(metadata)

    @classmethod
    def metadata_keys(cls) -> set[str]:
        """The metadata keys this task reads: the method settings and where its data comes from."""
        return {setting.name for setting in SETTINGS} | set(DataSpec.METADATA_KEYS)

    def build_metric_list(self, metadata: dict) -> list[dict]:
        """The harness metrics of this task (called before the data is loaded)."""
        return metric_list(self.settings.methods, self.settings)

    # -- data ------------------------------------------------------------------------------------

    def download(self, dataset_kwargs=None, **kwargs) -> None:
        """Load the split from where metadata ``data_source`` says (``hub`` by default, ``package``
        for WikiMIA's shipped copy, or a local file or directory); see
        :class:`pdd_tasks.loading.benchmark_data.DataSpec`."""
        self.set_split(load_benchmark(DataSpec.from_task_config(self.config)))

    def set_split(self, split, repeats: dict | None = None) -> None:
        """Make ``split`` the evaluated split, less the later copies of a repeated text and the
        documents that a method in effect holds out for itself.

        Repeats (:mod:`pdd_tasks.loading.repeats`): each distinct text of ``split`` is kept once (its
        first copy) unless ``keep_duplicates``, with a warning naming their rows (``row <i>``, counted
        from 0 in the loaded data); the record goes to the results JSON (metadata ``repeats``). A
        caller that has already done so (``pdd_custom``, across its files) passes its ``repeats`` record.
        A prepared result with ``held_out`` (indices into the split; ReCaLL's prefix texts, which must
        never be scored) loses them here, before the harness builds requests (and before ``--limit``);
        its ``recorded()`` entries go to the results JSON (task metadata)."""
        if repeats is None:
            split, repeats = distinct_rows(
                self.config.task,
                split,
                [f"row {index}" for index in range(len(split))],
                keep_duplicates=self.settings.keep_duplicates,
                roles=list(split["label"]),
            )
        self.config.metadata[REPEATS_KEY] = repeats
        self.dataset = {self.config.test_split: split}
        held_out: set[int] = set()
        for result in {id(result): result for result in self.prepared().values()}.values():
            held_out |= set(getattr(result, "held_out", ()))
            if hasattr(result, "recorded"):
                self.config.metadata.update(result.recorded())
        if held_out:
            kept = [index for index in range(len(split)) if index not in held_out]
            self.dataset = {self.config.test_split: split.select(kept)}
            logger.info("%s: %d document(s) held out of the scored split", self.config.task, len(held_out))

    # -- requests --------------------------------------------------------------------------------

    def build_all_requests(self, **kwargs) -> None:
        """lm-eval's request building, after refusing ``--limit 0``, ``--apply_chat_template`` and
        ``--system_instruction`` (:func:`refuse_run_options`)."""
        refuse_run_options(self.config.task, **kwargs)
        texts = scored_texts(list(self.eval_docs), kwargs.get("limit"), kwargs.get("samples"))
        check_request_count(self.config.task, len(texts), self.settings)
        warn_one_word_texts(self.config.task, texts, self.settings)
        for method in self.dataset_methods:
            method.start(texts, kwargs.get("cache_requests", False))
        super().build_all_requests(**kwargs)

    def construct_requests(self, doc: dict, ctx, **kwargs) -> list[PerTokenRequest]:
        if ctx and not self._warned_context:
            logger.warning(
                "%s: few-shot examples and descriptions are ignored; every text is "
                "scored on its own after the model's start token (DC-PDD Eq. 2).",
                self.config.task,
            )
            self._warned_context = True
        pairs = [("", doc["text"])] + [
            (context, text) for _, context, text in extra_requests(doc["text"], self.settings, self.prepared())
        ]
        generations = self.generation_instances(doc, len(pairs), **kwargs)
        dataset_level = [pair for method in self.dataset_methods for pair in method.requests(doc["text"])]  # last
        requests = self.per_token_requests(doc, pairs + dataset_level, **kwargs)
        for request in requests[len(pairs) :]:
            request.idx += len(generations)
        return requests[: len(pairs)] + generations + requests[len(pairs) :]

    def per_token_requests(self, doc: dict, pairs: list[tuple[str, str]], **kwargs) -> list[PerTokenRequest]:
        """One :class:`PerTokenRequest` per ``(context, continuation)``, in that order."""
        gradients = any(METHODS[name].gradients for name in self.settings.methods)  # GradNorm: the text's own request
        return [
            PerTokenRequest(
                request_type="loglikelihood",
                doc=doc,
                arguments=pair,
                idx=index,
                metadata=kwargs.get("metadata", (self.config.task, None, 1)),
                truncate=self.settings.truncate,
                topk_logprobs=self.settings.topk_logprobs,
                exact_mu_sigma=self.settings.exact_mu_sigma,
                convention=self.settings.convention,
                gradients=gradients and index == 0,
                share_prefixes=self.settings.share_prefixes,
            )
            for index, pair in enumerate(pairs)
        ]

    def generation_instances(self, doc: dict, first_index: int, **kwargs) -> list:
        """The ``generate_until`` requests of the methods in effect (SaMIA's samples), after the
        loglikelihood requests: answered by the backend's stock ``generate_until``."""
        from lm_eval.api.instance import Instance

        requested = generation_requests(doc["text"], self.settings, self.prepared())
        return [
            Instance(
                request_type="generate_until",
                doc=doc,
                arguments=(context, gen_kwargs),
                idx=first_index + index,
                metadata=kwargs.get("metadata", (self.config.task, None, 1)),
            )
            for index, (_, context, gen_kwargs) in enumerate(requested)
        ]

    def prepared(self) -> dict:
        """Method name -> what its ``prepare`` hook returned for this run (once, after the data is
        loaded; methods that share a hook share one call); see :attr:`pdd_tasks.registry.Method.prepare`."""
        if self._prepared is None:
            results: dict = {}  # methods that name the same prepare hook share its result (one call)
            self._prepared = {}
            for name in self.settings.methods:
                hook = METHODS[name].prepare
                if hook is not None:
                    if hook not in results:
                        results[hook] = prepare_hook(hook)(self, self.settings)
                    self._prepared[name] = results[hook]
        return self._prepared

    # -- scoring ---------------------------------------------------------------------------------

    def process_results(self, doc: dict, results: list) -> dict[str, tuple]:
        results, answers = self.split_dataset_level(doc, results)
        scores = self.checked_scores(doc, results, [answer for part in answers for answer in part])
        label = int(doc["label"])
        values = {
            f"{method}_{name}": (scores[method], label) for method in self.settings.methods for name in AGGREGATIONS
        }
        for method, part in zip(self.dataset_methods, answers, strict=True):
            item = method.item(doc, results[0], part, scores, label)
            values |= {f"{method.prefix}_{name}": item for name in method.aggregations}
        return values

    def split_dataset_level(self, doc: dict, results: list) -> tuple[list, list[list]]:
        """(the answers to the text's own requests and its methods', the answers to each dataset-level
        method's requests): these come last, in :attr:`dataset_methods` order."""
        counts = [len(method.requests(doc["text"])) for method in self.dataset_methods]
        end = len(results) - sum(counts)
        own, parts = results[:end], []
        for count in counts:
            parts.append(results[end : end + count])
            end += count
        return own, parts

    def checked_scores(self, doc: dict, results: list, dataset_level: list | tuple = ()) -> dict[str, float]:
        """:meth:`score_results` after checking that the backend's answers (``results``, and the
        text's answers to the dataset-level methods' requests ``dataset_level``, split off by
        :meth:`split_dataset_level`) can be scored: per-token log-probs (not a plain loglikelihood),
        under this run's convention, with the top-1 log-probs Gap-K% reads (answers from a
        ``--use_cache`` file of another run fail these)."""
        generated = len(generation_requests(doc["text"], self.settings, self.prepared()))
        # the generated texts (str) come after the others
        scored = results[: len(results) - generated] + list(dataset_level)
        for result in scored:
            if not isinstance(result, TokenScores):
                raise BackendWithoutTokenLogprobs(
                    f"{self.config.task}: the model backend returned {type(result).__name__} {result!r} "
                    f"without per-token log-probs. lm-eval-pdd captures them from --model hf, --model vllm "
                    f"and --model local-completions (an OpenAI-compatible /v1/completions server that "
                    f"echoes prompt log-probs); this backend does not hand them over."
                )
        self.check_convention(scored)
        if "gap_k" in self.settings.methods and scored[0].top1 is None:
            raise AnswersWithoutTop1(
                f"{self.config.task}: the per-token answers carry no top-1 log-probs, which Gap-K% reads: a "
                f"--use_cache file written by an earlier lm-eval-pdd answered this run. Delete that cache file, or "
                f"give this run a --use_cache path of its own (e.g. --use_cache cache/<model name>-v2)."
            )
        return self.score_results(doc, results)

    def annotate_logged_samples(self, samples: list[dict]) -> None:
        """The dataset-level methods' per-text values in ``--log_samples`` (:meth:`DatasetMethod.annotate
        <pdd_tasks.tasks.dataset_methods.DatasetMethod.annotate>`), once every text is scored (called by
        patch ``samples-after-aggregation`` of :mod:`pdd_tasks.lm_eval_patches`)."""
        for method in self.dataset_methods:
            method.annotate(samples)

    def score_results(self, doc: dict, results: list) -> dict[str, float]:
        """Every method's score of ``doc["text"]`` from the backend's answers to its requests
        (the text first, then the extra requests of :func:`pdd_tasks.registry.extra_requests`, then
        the generation requests of :func:`pdd_tasks.registry.generation_requests`)."""
        scores = results[0]
        wanting = [name for name in self.settings.methods if METHODS[name].gradients]
        if wanting and scores.grad_norms is None:
            raise AnswersWithoutGradients(
                f"{self.config.task}: the answer to a text's request carries no gradient norms, which {wanting[0]} "
                f"reads: a --use_cache file written by a run without it answered this run (lm-eval's cache key is the "
                f"text alone). Give this run a --use_cache path of its own (e.g. --use_cache cache/<model name>-gradnorm)."
            )
        self.check_answering_model(scores.model)
        self.record_scoring_backend(scores.model)
        if "gap_k" in self.settings.methods and len(scores.logprobs) < self.settings.gap_k_window:
            if not self._warned_gap_k_window:
                logger.warning(
                    "%s: a text has %d scored token(s), fewer than gap_k_window=%d: Gap-K%% of such a text is the "
                    "lowest k%% of its gaps without the moving average, unlike a longer text's, and where every text "
                    "is this short the window is never applied. Lower gap_k_window (e.g. --metadata "
                    "'{\"gap_k_window\": 1}') or score longer texts.",
                    self.config.task,
                    len(scores.logprobs),
                    self.settings.gap_k_window,
                )
            self._warned_gap_k_window = True
        extra: dict[str, list[np.ndarray]] = {}
        requested = extra_requests(doc["text"], self.settings, self.prepared())
        for (method, _, _), answer in zip(requested, results[1 : 1 + len(requested)], strict=True):
            extra.setdefault(method, []).append(answer.logprobs)
        generations: dict[str, list[str]] = {}
        to_generate = generation_requests(doc["text"], self.settings, self.prepared())
        for (method, _, _), text in zip(to_generate, results[1 + len(requested) :], strict=True):
            generations.setdefault(method, []).append(text)
        inputs = TextInputs(
            text=self.scored_text(doc["text"], scores),
            logprobs=scores.logprobs,
            token_ids=scores.token_ids,
            mu=scores.mu,
            sigma=scores.sigma,
            log_reference_freq=self.reference_log_frequencies(scores.model),
            extra_logprobs=extra,
            prepared=self.prepared(),
            top1=scores.top1,
            generations=generations,
            grad_norms=scores.grad_norms,
        )
        return score_text(inputs, self.settings)

    def check_convention(self, results: list[TokenScores]) -> None:
        """Refuse answers scored under another ``convention`` than the run's (a ``--use_cache`` file
        written by a run with the other convention: lm-eval's cache key is the request's text alone)."""
        wanted = self.settings.convention
        other = {getattr(result, "convention", "paper") for result in results} - {wanted}
        if other:
            raise AnswersFromAnotherConvention(
                f"{self.config.task}: the per-token answers were scored with convention {other.pop()!r}, but this run "
                f"asks for {wanted!r}. A --use_cache file written by a run with the other convention answered this "
                f"run; use a cache file per convention (e.g. --use_cache cache/<model>-{wanted})."
            )

    def check_answering_model(self, model: ModelInfo) -> None:
        """Refuse answers from another model than the run's: a ``--use_cache`` file written by one
        model answers any other model's identical requests (lm-eval's cache key is the request alone)."""
        if model == getattr(self, "_answering_model", None):
            return
        first = getattr(self, "_answering_model", None)
        expected = self.config.metadata.get("pretrained") or self.config.metadata.get("model")
        if first is not None:
            raise AnswersFromAnotherModel(
                f"{self.config.task}: the per-token answers come from two models ({_described(first)}; and "
                f"{_described(model)}). A --use_cache file written by another model (or by other weights at the "
                f"same path) answered part of this run: use a cache file per model, or delete the cache file."
            )
        if isinstance(expected, str) and not _same_model(expected, model.name):
            raise AnswersFromAnotherModel(
                f"{self.config.task}: the per-token answers were computed by {model.name} ({model.backend}), but "
                f"this run's model is {expected}. A --use_cache file written by another model answered this run; "
                f"use a cache file per model (e.g. --use_cache cache/<model name>) or delete the cache file."
            )
        now = weights_fingerprint(expected) if isinstance(expected, str) and model.weights_fingerprint else None
        if now is not None and now != model.weights_fingerprint:
            raise AnswersFromAnotherModel(
                f"{self.config.task}: the per-token answers were computed by {model.name} with other weights "
                f"(files fingerprint {model.weights_fingerprint[:12]}) than the files at {expected} now "
                f"({now[:12]}): the model was replaced or re-saved since a --use_cache file answered this run. "
                f"Delete that cache file, or give the new weights a --use_cache path of their own "
                f"(e.g. --use_cache cache/<model name>-v2)."
            )
        self._answering_model = model

    def scored_text(self, text: str, scores: TokenScores) -> str:
        """The part of ``text`` that was scored: the whole text, or with ``truncate: true`` the
        beginning the model saw (Zlib divides by the compressed size of this part)."""
        if not scores.truncated_tokens:
            return text
        names = [self.config.metadata.get(key) for key in ("tokenizer", "pretrained")] + [scores.model.name]
        for name in names:
            if isinstance(name, str) and (tokenizer := _tokenizer(name)) is not None:
                return scored_prefix(text, scores.token_ids, tokenizer)
        raise UserError(
            f"{self.config.task}: a text was truncated to {scores.token_ids.size} tokens, and Zlib needs the part "
            f"that was scored, but the model's tokenizer could not be loaded from {names}; name it with "
            f"--model_args tokenizer=<name or path>, or drop Zlib's truncation by keeping texts within the context."
        )

    def record_scoring_backend(self, model: ModelInfo) -> None:
        """Record in the results JSON (``configs.<task>.metadata.token_scores``) which backend gave
        the per-token values and how mu/sigma of Min-K%++ were obtained (exact or approximated), and
        (``configs.<task>.metadata.convention``) which tokens were scored, also where it is the default."""
        self.config.metadata.setdefault("convention", self.settings.convention)
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
        the shipped default (:func:`pdd_tasks.freq.tables.find_table`)."""
        if self.settings.freq_table:
            return Path(self.settings.freq_table)
        return find_table(fingerprint)[0]

    def check_table_before_scoring(self, metadata: dict) -> None:
        """Refuse a mismatched frequency table before any model work, where the CLI named the model.

        ``lm_eval`` merges ``--model_args`` into task metadata, so ``pretrained`` (or ``tokenizer``)
        is known here for HF models given by name or path. Where the tokenizer cannot be loaded from
        that name, the same check runs when the first text is scored.
        """
        named = self.load_named_table()
        name = metadata.get("tokenizer") or metadata.get("pretrained")
        if not isinstance(name, str):
            return
        fingerprint = _fingerprint_of(name)
        if fingerprint is not None:
            tokenizer = _tokenizer(name)
            pretrained = metadata.get("pretrained")
            (named or FrequencyTable.load(self.freq_table_path(fingerprint))).check_matches(
                fingerprint,
                name,
                tokenizer_size=len(tokenizer) if tokenizer is not None else None,
                output_vocab_size=_output_vocab_size(pretrained) if isinstance(pretrained, str) else None,
            )

    def load_named_table(self) -> FrequencyTable | None:
        """The table metadata ``freq_table`` names (None where it names none), read as the task is
        built: a path to nothing or to a folder is refused then, naming the key and the fix."""
        if not self.settings.freq_table:
            return None
        try:
            return FrequencyTable.load(self.settings.freq_table)
        except FrequencyTableNotFoundError as error:
            raise FrequencyTableNotFoundError(
                f"{self.config.task}: metadata freq_table: {error}; then pass it with "
                f'`--metadata \'{{"freq_table": "<table.npz>"}}\'`.'
            ) from None

    def reference_log_frequencies(self, model: ModelInfo) -> np.ndarray:
        """log f(v) of DC-PDD Eq. 5 for the model's vocabulary, from the configured table (once)."""
        if self._log_reference_freq is None:
            fingerprint = model.tokenizer_fingerprint
            path = self.freq_table_path(fingerprint)
            source = "metadata freq_table" if self.settings.freq_table else find_table(fingerprint)[1]
            table = FrequencyTable.load(path)
            table.check_matches(fingerprint, model.name, output_vocab_size=model.vocab_size)
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
