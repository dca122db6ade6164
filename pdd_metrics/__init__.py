"""Pretraining-data detection scores and metrics: NumPy arrays in, Python floats out.

Every score is oriented so that higher = more likely a member; labels use 1 = member.
"""

from .conformal import Identification, benjamini_hochberg, conformal_p_values, identify_members
from .dataset_inference import DatasetInferenceResult, dataset_inference_test
from .em_mia import em_mia_scores
from .evaluation import (
    FPR_RULES,
    OneClassError,
    roc_auc,
    tpr_at_fpr,
    validate_scores_and_labels,
)
from .exchangeability import ExchangeabilityResult, TooFewExamples, sharded_comparison_test
from .gradnorm import GRADIENT_NORM_ORDERS, gradnorm_score
from .methods import (
    DCPDD_ABLATIONS,
    dcpdd_score,
    gap_k_score,
    loss_score,
    lowercase_score,
    lowest_k_count,
    min_k_plus_plus_score,
    min_k_score,
    small_ref_score,
    zlib_score,
)
from .multiple_testing import holm_adjusted
from .neighbor import neighbor_score
from .pac import pac_score, polarized_distance, swap_augmentations
from .recall import con_recall_score, recall_score
from .reference import count_token_ids, log_reference_frequencies
from .reference_decisions import RankTestResult, calibrate_threshold, flag_members, suspect_vs_reference_test
from .repeats import Repeats, find_repeats
from .samia import samia_score, samia_split
from .topk import approximate_mu_sigma


__all__ = [
    "DatasetInferenceResult",
    "ExchangeabilityResult",
    "TooFewExamples",
    "dataset_inference_test",
    "sharded_comparison_test",
    "DCPDD_ABLATIONS",
    "FPR_RULES",
    "OneClassError",
    "RankTestResult",
    "Identification",
    "benjamini_hochberg",
    "conformal_p_values",
    "holm_adjusted",
    "identify_members",
    "calibrate_threshold",
    "flag_members",
    "suspect_vs_reference_test",
    "approximate_mu_sigma",
    "con_recall_score",
    "count_token_ids",
    "dcpdd_score",
    "em_mia_scores",
    "gap_k_score",
    "GRADIENT_NORM_ORDERS",
    "gradnorm_score",
    "log_reference_frequencies",
    "loss_score",
    "lowercase_score",
    "lowest_k_count",
    "min_k_plus_plus_score",
    "min_k_score",
    "neighbor_score",
    "pac_score",
    "polarized_distance",
    "recall_score",
    "Repeats",
    "find_repeats",
    "roc_auc",
    "samia_score",
    "samia_split",
    "small_ref_score",
    "swap_augmentations",
    "tpr_at_fpr",
    "validate_scores_and_labels",
    "zlib_score",
]
