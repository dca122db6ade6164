"""The dataset-level methods of a labelled task: EM-MIA and the blind baseline.

A dataset-level method's score of a text depends on every text of the run, so it is computed by an
aggregation once every text is scored, not by a :class:`~pdd_tasks.registry.Method`. Each is one class
here, registered in :data:`DATASET_METHODS` under its prefix (a :class:`pdd_tasks.registries.Registry`;
registration order is the order of their metrics). The task
(:class:`pdd_tasks.tasks.base.MembershipInferenceTask`) makes one instance per run of each that is on
(:meth:`DatasetMethod.on`) and calls it where it builds the metric list, the requests and the per-text
items, and after aggregation:

- as the task is built: the instance refuses settings it cannot run with;
- :meth:`~DatasetMethod.start`, before any request is built: the texts the run scores;
- :meth:`~DatasetMethod.requests`, per text: the extra ``(context, continuation)`` requests it needs,
  after every other request of the text;
- :meth:`~DatasetMethod.item`, per text: what it records under each of its metrics, from the answers;
- :attr:`~DatasetMethod.aggregations`: its metrics, which turn the items of the whole run into
  ``(score, label)`` pairs and grade them (:mod:`pdd_tasks.tasks.aggregations`);
- :meth:`~DatasetMethod.annotate`, once every text is scored: its values in ``--log_samples``.

Their settings are in the registry with every other setting (:mod:`pdd_tasks.registry.em_mia`), and
their maths in :mod:`pdd_metrics` (:func:`~pdd_metrics.em_mia_scores`, :func:`~pdd_metrics.blind.blind_scores`).
"""

from __future__ import annotations

from typing import Any, ClassVar

from pdd_metrics import recall_score
from pdd_tasks.backends.base import TokenScores
from pdd_tasks.errors import UserError
from pdd_tasks.registries import Registry
from pdd_tasks.registry import EM_MIA, prefixed_pair
from pdd_tasks.tasks.aggregations import BLIND, BLIND_AGGREGATIONS, EM_MIA_AGGREGATIONS, em_mia_final_scores


class DatasetMethod:
    """One dataset-level method of a run (a subclass per method; by default it is on, asks for no
    request and logs nothing)."""

    #: Prefix of its metrics (``blind`` gives ``blind_auc``, ...).
    prefix: ClassVar[str]
    #: Metric name -> aggregation over its per-text items (each carries its standard error).
    aggregations: ClassVar[dict]

    @staticmethod
    def on(settings) -> bool:
        """Whether a run with ``settings`` computes it."""
        return True

    def __init__(self, task: str, settings) -> None:
        self.task = task
        self.settings = settings

    def start(self, texts: list[str], cache_requests: bool) -> None:
        """Before any request is built: ``texts`` are every text the run scores, in doc order (over every
        process; ``--limit``/``--samples`` applied: :func:`pdd_tasks.tasks.base.scored_texts`)."""

    def requests(self, text: str) -> list[tuple[str, str]]:
        """The ``(context, continuation)`` requests it adds to ``text``'s, after all others."""
        return []

    def item(self, doc: dict, own: TokenScores, answers: list, scores: dict[str, float], label: int) -> Any:
        """The text's item of each of its metrics, from the answer to the text's own request (``own``),
        those to its :meth:`requests` (``answers``) and every per-text method's score."""
        raise NotImplementedError

    def annotate(self, samples: list[dict]) -> None:
        """Add its per-text values to the logged samples, once every text is scored."""


class Blind(DatasetMethod):
    """The blind baseline: a classifier fitted across the texts alone, no model (its out-of-fold scores:
    :func:`pdd_metrics.blind.blind_scores`). Its items are ``(text, label)`` pairs."""

    prefix = BLIND
    aggregations = BLIND_AGGREGATIONS

    def item(self, doc: dict, own: TokenScores, answers: list, scores: dict[str, float], label: int) -> tuple:
        return (doc["text"], label)


class EmMiaRunError(UserError):
    """A run EM-MIA cannot score: too many texts for its n^2 passes, no initial method, cached requests."""


def check_em_mia_size(task: str, n: int, cap: int) -> None:
    """Refuse an EM-MIA run of more than ``cap`` texts (metadata ``em_mia_max_texts``), naming its cost."""
    if n > cap:
        raise EmMiaRunError(
            f"{task}: em_mia on {n} texts needs {n:,} x {n:,} = {n * n:,} prefixed forward passes (every text after "
            f"every other: ReCaLL-all), above the cap of em_mia_max_texts={cap} texts ({cap * cap:,} passes). Score "
            f"fewer texts (--limit {cap}), or raise the cap for this run: --metadata "
            f'\'{{"em_mia": true, "em_mia_max_texts": {n}}}\' (docs/methods.md, EM-MIA, has its cost).'
        )


class EmMia(DatasetMethod):
    """EM-MIA (``em_mia: true``): every text is also scored after each distinct text of the scored set
    (ReCaLL-all), and the label-free loop runs over the set's ReCaLL matrix R. Its items are
    ``(place, column of R, initial score, label)`` (:func:`pdd_tasks.tasks.aggregations.em_mia_matrix`)."""

    prefix = EM_MIA
    aggregations = EM_MIA_AGGREGATIONS

    @staticmethod
    def on(settings) -> bool:
        return settings.em_mia

    def __init__(self, task: str, settings) -> None:
        super().__init__(task, settings)
        if settings.em_mia_init not in settings.methods:
            raise EmMiaRunError(
                f"{task}: em_mia_init={settings.em_mia_init!r} names a method that is off in this run, so EM-MIA has "
                f"no initial scores: turn it on, or name a method in effect ({', '.join(settings.methods)})."
            )
        #: The prefixes: the distinct texts of the scored set, and each one's place among them.
        self.texts: list[str] = []
        self.places: dict[str, int] = {}

    def start(self, texts: list[str], cache_requests: bool) -> None:
        """The prefixes: the distinct texts among ``texts``, refused before any request is built where there
        are more than ``em_mia_max_texts``, or where requests are cached."""
        if cache_requests:
            raise EmMiaRunError(
                f"{self.task}: em_mia cannot be run with --cache_requests: each text's requests name every "
                f"text of the scored set, so requests cached for another --limit would pair it with other texts. "
                f"Drop --cache_requests."
            )
        # The prefixes are the distinct texts: a copy after its own text would be a prefix that predicts it
        # perfectly (copies remain in the scored set only under keep_duplicates, and share their text's place).
        self.texts = list(dict.fromkeys(texts))
        check_em_mia_size(self.task, len(self.texts), self.settings.em_mia_max_texts)
        self.places = {text: place for place, text in enumerate(self.texts)}

    def requests(self, text: str) -> list[tuple[str, str]]:
        """The text after each prefix: its column of R."""
        return [(prefix, text) for prefix in self.texts]

    def item(self, doc: dict, own: TokenScores, answers: list, scores: dict[str, float], label: int) -> tuple:
        """The text's place among the prefixes, its column of R (ReCaLL of the text after each prefix,
        :func:`pdd_metrics.recall_score`) and its initial score."""
        column = [
            recall_score(*prefixed_pair(answer.logprobs, own.logprobs)) for answer in answers
        ]  # R[i, j] = LL(x_j | x_i) / LL(x_j)
        return (int(self.places[doc["text"]]), tuple(column), float(scores[self.settings.em_mia_init]), int(label))

    def annotate(self, samples: list[dict]) -> None:
        """EM-MIA's final score of each text (``sample["em_mia_score"]``): the scores the ``em_mia_*``
        metrics grade."""
        items = [sample[f"{self.prefix}_auc"] for sample in samples]
        scored = em_mia_final_scores(items)
        for sample, (place, *_) in zip(samples, items, strict=True):
            sample[f"{self.prefix}_score"] = scored[place]  # a repeated text's copies share its place


#: The dataset-level methods by their prefix, in the order of their metrics (after every per-text method's).
DATASET_METHODS: Registry[type[DatasetMethod]] = Registry(
    "dataset-level method", unique_because="its name is the prefix of its metrics and must be unique."
)
DATASET_METHODS.register(EmMia.prefix, EmMia)
DATASET_METHODS.register(Blind.prefix, Blind)
