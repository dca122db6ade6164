"""EM-MIA's metric prefix and settings. EM-MIA is a dataset-level method: its score of a text depends
on every text of the run, so an aggregation computes it once every text is scored (its part of the task:
:class:`pdd_tasks.tasks.dataset_methods.EmMia`). It is no :class:`~pdd_tasks.registry.core.Method` of
:data:`~pdd_tasks.registry.core.METHODS`, but its settings are read and checked with theirs
(:mod:`pdd_tasks.registry.scoring`).
"""

from __future__ import annotations

from typing import Any

from pdd_tasks.registry.core import METHODS
from pdd_tasks.registry.settings import Setting, flag, whole_number


#: The metric prefix of EM-MIA (``em_mia_auc``, ...): its score of a text depends on every text of the
#: run, so it is computed by an aggregation after all texts are scored, not by a
#: :class:`~pdd_tasks.registry.core.Method`.
EM_MIA = "em_mia"


def method_name(name: str, value: Any) -> str:
    """The name of a method of the registry that scores each text alone (e.g. "min_k_pp", "loss")."""
    if value not in METHODS:
        raise ValueError(f"metadata {name}={value!r}: expected the name of a method, one of {', '.join(METHODS)}.")
    return value


EM_MIA_SETTINGS = (
    Setting(
        EM_MIA,
        False,
        flag,
        "EM-MIA too: every text of the scored set is also scored after every other as its prefix (n^2 more "
        "forward passes for n texts: ReCaLL-all), then EM-MIA's label-free loop runs over the whole set.",
        switch=True,
    ),
    Setting(
        "em_mia_init",
        "min_k_pp",
        method_name,
        "EM-MIA: the method whose scores start the loop (the authors' README: -i Loss Min-K++_20; Min-K%++ "
        "with k = min_k_pp here); it must be in effect.",
        hint='(e.g. "loss")',
    ),
    Setting(
        "em_mia_max_texts",
        200,
        whole_number,
        "EM-MIA: the most texts a run may score with it (200 texts: 40,000 prefixed passes); a run with more is "
        "refused before scoring. Raise it for a GPU run of a whole benchmark (776 texts of pdd_wikimia_32: 602,176).",
        hint="(e.g. 776)",
    ),
)

#: Settings of the dataset-level methods, by metric prefix (the settings table names them as readers).
DATASET_METHOD_SETTINGS = {EM_MIA: EM_MIA_SETTINGS}
