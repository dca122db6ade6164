"""The method registry: every detection method of the pdd tasks, registered once.

An entry (:class:`Method`) says what a method is called (its name is the prefix of its metrics:
``min_k`` gives ``min_k_auc``), how it scores one text from the backend's answer (a call of a pure
function of :mod:`pdd_metrics`), the same score computed plainly (its reference implementation,
which the tests compare with it), which task settings it reads (with their defaults, checks and the
paper's value), which extra texts it has scored, what it prepares once per run, when it is in
effect, and its table label, built from the settings in effect. :func:`register` adds an entry and
refuses a name registered twice. The task class (:mod:`pdd_tasks.tasks.base`), the report
(:mod:`pdd_tasks.tools.report`), the tests and the benchmarks read this package, by the names it
exports here. Adding a method: ``docs/adding-a-method.md``.

Its modules, lowest first (each imports only those above it):

- :mod:`~pdd_tasks.registry.settings`: :class:`Setting`, the shared checks, the settings of the
  scoring path (:data:`GENERAL_SETTINGS`), the check of a task's metadata keys;
- :mod:`~pdd_tasks.registry.core`: :class:`Method`, :data:`METHODS`, :func:`register`,
  :class:`TextInputs`, :func:`prepare_hook`, the helpers of the reference implementations,
  :func:`with_stderr`;
- the method families, each entry with its settings and its reference implementation, in table
  order: :mod:`~pdd_tasks.registry.reference_free` (Loss, Zlib, Lowercase, Min-K%, Min-K%++, Gap-K%,
  DC-PDD, GradNorm), :mod:`~pdd_tasks.registry.reference_based` (Neighbor, ReCaLL, Con-ReCall, PAC,
  SaMIA, Small-Ref);
- :mod:`~pdd_tasks.registry.em_mia`: EM-MIA's name and settings (a dataset-level method, no entry);
- :mod:`~pdd_tasks.registry.scoring`: imports the families in table order, then :data:`SETTINGS`,
  :class:`ScoringSettings`, the requests, scores and labels of the methods in effect,
  :data:`DEFAULT_METHODS`;
- :mod:`~pdd_tasks.registry.checks` (not imported here): :func:`~pdd_tasks.registry.checks.check_method`,
  the battery every entry must pass (``docs/adding-a-method.md``, "Check it").

This package imports neither lm-eval nor torch: the per-run hooks (:attr:`Method.prepare`) are named
by path and imported when a task runs them.

Every score is oriented higher = more likely a member.
"""

# isort: off
# scoring first: it imports the method families in table order (registration order is table order).
from pdd_tasks.registry.scoring import (
    DEFAULT_METHODS,
    METHOD_NAMES,
    SETTINGS,
    ScoringSettings,
    count_setting,
    extra_requests,
    generation_requests,
    label,
    planned_requests,
    score_text,
    settings_of_methods_off,
)

# isort: on
from pdd_tasks.registry.core import (
    METHODS,
    DuplicateMethodError,
    Method,
    TextInputs,
    prepare_hook,
    register,
    with_stderr,
)
from pdd_tasks.registry.em_mia import DATASET_METHOD_SETTINGS, EM_MIA, EM_MIA_SETTINGS, method_name
from pdd_tasks.registry.reference_based import (
    CON_RECALL,
    CON_RECALL_GAMMA,
    NEIGHBOR_MAX_WORDS,
    NEIGHBOR_SETTINGS,
    PAC_SETTINGS,
    RECALL_PREFIX_FILE,
    RECALL_SEED,
    RECALL_SHOTS,
    SAMIA_SETTINGS,
    SMALL_REF_DTYPES,
    SMALL_REF_SETTINGS,
    SamiaTextError,
    device_name,
    dtype_choice,
    prefixed_pair,
    short_name,
)
from pdd_tasks.registry.reference_free import (
    DCPDD_A,
    DCPDD_ABLATION_SETTING,
    FREQ_TABLE,
    GAP_K,
    GAP_K_WINDOW,
    GRADNORM_PS,
    GRADNORM_SETTINGS,
    LOWERCASE,
    MIN_K,
    MIN_K_PP,
    gradnorm_p,
)
from pdd_tasks.registry.settings import (
    BYTES_PER_REQUEST,
    CONVENTIONS,
    DEFAULT_MAX_REQUESTS,
    GENERAL_SETTINGS,
    RECORDED_KEYS,
    REQUEST_CEILING,
    Setting,
    SettingError,
    as_whole,
    check_metadata_keys,
    convention,
    flag,
    fraction,
    model_argument_names,
    optional_path,
    optional_string,
    physical_memory,
    positive_number,
    refuse_misspelt_keys,
    request_ceiling,
    whole_number,
    whole_number_or_zero,
)


__all__ = [
    # settings
    "BYTES_PER_REQUEST",
    "CONVENTIONS",
    "DEFAULT_MAX_REQUESTS",
    "GENERAL_SETTINGS",
    "RECORDED_KEYS",
    "REQUEST_CEILING",
    "Setting",
    "SettingError",
    "as_whole",
    "check_metadata_keys",
    "convention",
    "flag",
    "fraction",
    "model_argument_names",
    "optional_path",
    "optional_string",
    "physical_memory",
    "positive_number",
    "refuse_misspelt_keys",
    "request_ceiling",
    "whole_number",
    "whole_number_or_zero",
    # core
    "METHODS",
    "DuplicateMethodError",
    "Method",
    "TextInputs",
    "prepare_hook",
    "register",
    "with_stderr",
    # reference_free
    "DCPDD_A",
    "DCPDD_ABLATION_SETTING",
    "FREQ_TABLE",
    "GAP_K",
    "GAP_K_WINDOW",
    "GRADNORM_PS",
    "GRADNORM_SETTINGS",
    "LOWERCASE",
    "MIN_K",
    "MIN_K_PP",
    "gradnorm_p",
    # reference_based
    "CON_RECALL",
    "CON_RECALL_GAMMA",
    "NEIGHBOR_MAX_WORDS",
    "NEIGHBOR_SETTINGS",
    "PAC_SETTINGS",
    "RECALL_PREFIX_FILE",
    "RECALL_SEED",
    "RECALL_SHOTS",
    "SAMIA_SETTINGS",
    "SMALL_REF_DTYPES",
    "SMALL_REF_SETTINGS",
    "SamiaTextError",
    "device_name",
    "dtype_choice",
    "prefixed_pair",
    "short_name",
    # em_mia
    "DATASET_METHOD_SETTINGS",
    "EM_MIA",
    "EM_MIA_SETTINGS",
    "method_name",
    # scoring
    "DEFAULT_METHODS",
    "METHOD_NAMES",
    "SETTINGS",
    "ScoringSettings",
    "count_setting",
    "extra_requests",
    "generation_requests",
    "label",
    "planned_requests",
    "score_text",
    "settings_of_methods_off",
]
