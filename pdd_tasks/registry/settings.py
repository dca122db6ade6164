"""Task settings: :class:`Setting` (a key of a task's metadata with its default, its check and what it
does), the checks that settings share, the settings of the scoring path itself
(:data:`GENERAL_SETTINGS`) and the check of a task's metadata keys (:func:`check_metadata_keys`).

A method's own settings are declared beside its entry (:mod:`pdd_tasks.registry.reference_free`,
:mod:`pdd_tasks.registry.reference_based`), EM-MIA's in :mod:`pdd_tasks.registry.em_mia`; the
dataset-level tests (:mod:`pdd_tasks.dataset_tests`) declare theirs with the same class and checks.
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
import inspect
import logging
import math
import os
from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import Any

from pdd_tasks.errors import SettingError


logger = logging.getLogger(__name__)


# -- settings ------------------------------------------------------------------------------------


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def fraction(name: str, value: Any) -> float:
    """A fraction in (0, 1], e.g. the k of Min-K%."""
    if not _is_number(value) or not 0 < value <= 1:
        raise ValueError(f"metadata {name}={value!r}: expected a fraction in (0, 1], e.g. 0.2.")
    return float(value)


def positive_number(name: str, value: Any) -> float:
    """A number > 0."""
    if not _is_number(value) or not value > 0:
        raise ValueError(f"metadata {name}={value!r}: expected a positive number.")
    return float(value)


def as_whole(value: Any) -> int | None:
    """``value`` as an int where it is a whole number: an int (not a bool), or a float with no
    fractional part, as JSON and YAML read a whole number written with an exponent (``1e9`` is
    1000000000.0); None for anything else (2.5, NaN, infinity, a string)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        return int(value)
    return None


def whole_number(name: str, value: Any) -> int:
    """A whole number >= 1 (an exponent is fine: 1e6)."""
    whole = as_whole(value)
    if whole is None or whole < 1:
        raise ValueError(f"metadata {name}={value!r}: expected a whole number >= 1.")
    return whole


def whole_number_or_zero(name: str, value: Any) -> int:
    """A whole number >= 0 (an exponent is fine: 1e6)."""
    whole = as_whole(value)
    if whole is None or whole < 0:
        raise ValueError(f"metadata {name}={value!r}: expected a whole number >= 0.")
    return whole


def flag(name: str, value: Any) -> bool:
    """true or false, unquoted (a quoted "false" is refused)."""
    if not isinstance(value, bool):
        raise ValueError(f'metadata {name}={value!r}: expected true or false, unquoted (e.g. "{name}": false).')
    return value


#: The values of the ``convention`` setting.
CONVENTIONS = ("paper", "reference-code")


def convention(name: str, value: Any) -> str:
    """One of :data:`CONVENTIONS`: which tokens of a text are scored (docs/methods.md, "Start token")."""
    if value not in CONVENTIONS:
        raise ValueError(
            f'metadata {name}={value!r}: expected one of {", ".join(map(repr, CONVENTIONS))}: "paper" scores every '
            f'token of the text after the model\'s start token; "reference-code" scores tokenizer.encode(text) '
            f"without its first token, as the Min-K%++ and DC-PDD scripts do."
        )
    return value


def optional_string(expected: str) -> Callable[[str, Any], str | None]:
    """A check of a setting that names something (a file, a model) or is null / "" for none;
    ``expected`` says what, for the message (e.g. "a file path (a string)")."""

    def check(name: str, value: Any) -> str | None:
        if value in (None, ""):
            return None
        if not isinstance(value, str):
            raise ValueError(f"metadata {name}={value!r}: expected {expected}.")
        return value

    check.__doc__ = f'{expected[0].upper()}{expected[1:]}, or null / "" for none.'
    return check


#: A file path, or null / "" for the default.
optional_path = optional_string("a file path (a string)")


@dataclass(frozen=True)
class Setting:
    """A task setting: a key of the task's metadata (YAML ``metadata:`` or ``--metadata``).

    Attributes:
        name: the metadata key.
        default: the value when the key is absent.
        check: ``check(name, value)`` returns the value to use or raises a ValueError that names
            the key and what was expected (some add an example; ``hint`` adds one or the paper's value).
        doc: what it does, with the paper's value where there is one.
        hint: appended to the check's message (e.g. the paper's value).
        switch: it turns its method on or off (``lowercase``, ``neighbor_model``): given while the
            method is off, it is no mistake (:func:`~pdd_tasks.registry.scoring.settings_of_methods_off`).
    """

    name: str
    default: Any
    check: Callable[[str, Any], Any]
    doc: str
    hint: str = ""
    switch: bool = False

    def read(self, metadata: dict) -> Any:
        if self.name not in metadata:
            return self.default
        try:
            return self.check(self.name, metadata[self.name])
        except ValueError as error:
            raise SettingError(f"{error} {self.hint}".strip()) from None


#: The default of ``max_requests``: room for every default method on the largest shipped benchmark with
#: Neighbor at 25 neighbours (pdd_wikimia: 1,650 texts x 27 = 44,550) and then some.
DEFAULT_MAX_REQUESTS = 100_000

#: The most requests any run may plan, whatever its ``max_requests``: lm-eval builds every request of a
#: run in memory before the first forward pass, and each is a forward pass: 10**7 passes take about 3
#: hours even at 1,000 passes a second (a GPU on short texts), days on a CPU. A count above it comes from
#: a setting (permutations, pac_augmentations, ...), not from a benchmark's size (every shipped benchmark
#: with every method at its defaults plans under 10**5).
REQUEST_CEILING = 10_000_000

#: Bytes one request holds at least until the run ends: lm-eval's ``Instance`` with its arguments and
#: the task's list of them, for one-word texts, as ``benchmarks/request_memory.py`` measures it (422 to
#: 432 bytes on an AMD EPYC, Python 3.11: docs/mistakes.md, "Runaway costs"), rounded down. A longer
#: text costs more (its string, its tokens once encoded): this is the floor.
BYTES_PER_REQUEST = 400


def physical_memory() -> int | None:
    """The machine's physical memory in bytes (``os.sysconf``), or None where the system does not say."""
    try:
        pages, page_size = os.sysconf("SC_PHYS_PAGES"), os.sysconf("SC_PAGE_SIZE")
    except (AttributeError, ValueError, OSError):
        return None
    return pages * page_size if pages > 0 and page_size > 0 else None


def request_ceiling(memory: int | None = None) -> tuple[int, str]:
    """The most requests a run may plan whatever its ``max_requests`` (a count above it is refused
    before any request is built), and why: :data:`REQUEST_CEILING`, or fewer where this machine's
    physical memory (``memory``: :func:`physical_memory` by default) cannot hold that many requests at
    :data:`BYTES_PER_REQUEST` each."""
    memory = physical_memory() if memory is None else memory
    if memory is not None and memory // BYTES_PER_REQUEST < REQUEST_CEILING:
        fits = memory // BYTES_PER_REQUEST
        return fits, (
            f"the most this machine's {memory / 2**30:.1f} GiB of memory holds at {BYTES_PER_REQUEST:,} bytes a "
            "request, which lm-eval builds all at once"
        )
    return REQUEST_CEILING, "the most any run may send: each is a forward pass, and lm-eval builds them all in memory"


#: Settings of the scoring path itself, not of one method.
GENERAL_SETTINGS = (
    Setting(
        "max_requests",
        DEFAULT_MAX_REQUESTS,
        whole_number,
        "the most requests a run of the task may send (texts x requests per text: the text, the lowercased copy, "
        "neighbours, augmentations, SaMIA's samples, ...); settings that ask for more are refused before any request "
        "is built, naming the methods that cost most. EM-MIA's n^2 prefixed passes have their own cap "
        f"(em_mia_max_texts). No value lets through more than {REQUEST_CEILING:,} requests (fewer on a machine whose "
        f"memory cannot hold that many at {BYTES_PER_REQUEST} bytes each): such a count is refused naming the setting "
        "that makes it.",
        hint="(e.g. 200000)",
    ),
    Setting(
        "truncate",
        False,
        flag,
        "allow texts longer than the model's context window, keeping their beginning (without it, "
        "such a text is an error).",
    ),
    Setting(
        "topk_logprobs",
        20,
        whole_number,
        "how many top alternatives per token to ask for from backends that return only the top k "
        "(local-completions, vLLM; Min-K%++'s mu/sigma are then approximated from them).",
        hint="e.g. 20 (at most what the server allows: vLLM 20 by default, OpenAI 5).",
    ),
    Setting(
        "exact_mu_sigma",
        False,
        flag,
        "--model vllm only: ask for the full next-token distribution (prompt_logprobs=-1; needs "
        "max_logprobs=-1 in --model_args) so that Min-K%++'s mu/sigma are exact. With "
        "worker_extension_cls=pdd_tasks.lm_eval_patches.VllmWorkerExtension in --model_args too, vLLM's "
        "worker computes them (about the top-k mode's cost instead of about twice it).",
    ),
    Setting(
        "convention",
        "paper",
        convention,
        'which tokens of a text are scored: "paper" (default): every token of the text, after the model\'s '
        'start token (DC-PDD Eq. 2); "reference-code": tokenizer.encode(text) with the tokenizer\'s default '
        "special tokens, all but its first token, as the Min-K%++ and DC-PDD scripts score (for tokenizers "
        'without BOS the first text token is not scored). docs/methods.md, "Start token: the two conventions".',
        hint='(e.g. --metadata \'{"convention": "reference-code"}\')',
    ),
    Setting(
        "share_prefixes",
        True,
        flag,
        "answer a text whose tokens begin a longer text's (after the same start token) from the longer "
        "text's forward pass, and identical texts from one pass: WikiMIA's 64-, 128- and 256-word texts "
        "begin with the shorter splits' texts. A causal model's values at a position depend only on the "
        "tokens before it, so the scores are the same up to float rounding; texts with a context of "
        "their own (ReCaLL, EM-MIA), GradNorm's texts and truncated texts are always forwarded. false: "
        "one pass per text.",
    ),
    Setting(
        "keep_duplicates",
        False,
        flag,
        "score every copy of a text that the run's inputs hold more than once (after the task's cut to "
        "max_words). By default each distinct text is scored once, its first copy, since every metric, its "
        "standard error and every test count a text once per copy; either way a warning and the results JSON "
        '(metadata repeats) say how many and where. docs/mistakes.md, "Repeated texts".',
    ),
)


# -- metadata keys -------------------------------------------------------------------------------

#: Keys that lm_eval (``version``, ``config_source``) and the pdd tasks (what was used, for the
#: results JSON) put in a task's metadata themselves.
RECORDED_KEYS = frozenset(
    {
        "version",
        "config_source",
        "_metadata",
        "token_scores",
        "freq_table_used",
        "recall_prefixes",
        "small_ref_used",
        "repeats",
    }
)

_MODEL_CLASSES = (
    ("lm_eval.models.huggingface", "HFLM"),
    ("lm_eval.models.vllm_causallms", "VLLM"),
    ("lm_eval.api.model", "TemplateLM"),
    ("lm_eval.models.api_models", "TemplateAPI"),
    ("lm_eval.models.openai_completions", "LocalCompletionsAPI"),
)


@functools.cache
def model_argument_names() -> frozenset[str]:
    """Names of the ``--model_args`` of the backends the pdd tasks support (hf, vllm,
    local-completions), read from their signatures: ``lm_eval`` merges ``--model_args`` into every
    task's metadata, so these keys are no typo."""
    import importlib

    names = {"pretrained", "tokenizer", "model", "dtype", "device", "trust_remote_code", "revision"}
    names |= {  # vLLM's (lm_eval.models.vllm_causallms imports vllm, which may not be installed here)
        "max_model_len",
        "gpu_memory_utilization",
        "tensor_parallel_size",
        "data_parallel_size",
        "quantization",
        "max_logprobs",
        "swap_space",
        "enforce_eager",
        "lora_local_path",
        "tokenizer_mode",
        "tokenizer_revision",
        "max_num_seqs",
        "kv_cache_dtype",
        "enable_prefix_caching",
    }
    for module_name, class_name in _MODEL_CLASSES:
        try:
            cls = getattr(importlib.import_module(module_name), class_name)
        except Exception:  # an optional backend (vllm) that is not installed
            continue
        names |= set(inspect.signature(cls.__init__).parameters) - {"self", "args", "kwargs"}
    try:  # lm-eval's VLLM hands every other --model_args key to vllm.LLM: vLLM's engine arguments
        from vllm.engine.arg_utils import EngineArgs

        names |= {field.name for field in dataclasses.fields(EngineArgs)}
    except Exception:  # vLLM not installed (or another version's layout): the list above
        pass
    return frozenset(names)


def refuse_misspelt_keys(keys: Collection, known: Collection[str], task: str) -> None:
    """Refuse the first of ``keys`` (not settings of ``task``) that looks like a misspelt one of ``known``,
    naming the closest (``did you mean 'min_k'?``); the others pass."""
    known = set(known) - RECORDED_KEYS
    for key in keys:
        close = difflib.get_close_matches(str(key).lower(), sorted(known), n=1, cutoff=0.75)
        if close:
            raise SettingError(
                f"{task}: metadata key {key!r} is not a setting of this task; did you mean {close[0]!r}? "
                f"Fix the key in --metadata (known keys: {', '.join(sorted(known))})."
            )


def check_metadata_keys(metadata: dict, known: Collection[str], task: str) -> None:
    """Refuse a metadata key that looks like a misspelt setting (``mink``, ``dcpdd_A``), naming the
    closest known key; warn about other keys that are neither settings nor model arguments.

    ``known``: the keys the task reads (its settings and data keys). Keys of
    :data:`RECORDED_KEYS` and :func:`model_argument_names` are always accepted.
    """
    known = set(known) | RECORDED_KEYS
    unknown = [key for key in metadata if key not in known and key not in model_argument_names()]
    refuse_misspelt_keys(unknown, known, task)
    if unknown:
        logger.warning(
            "%s: metadata key(s) %s are neither settings of this task nor known model arguments: ignored by the "
            "task. (--model_args reach the task metadata too; if these are model arguments, this is expected.) "
            "Task settings: %s.",
            task,
            ", ".join(map(repr, unknown)),
            ", ".join(sorted(known - RECORDED_KEYS)),
        )
