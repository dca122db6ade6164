"""``pdd_controlled``: a membership benchmark with known answers that runs on a CPU.

The benchmark directory is made by ``lm-eval-pdd make-controlled``
(:mod:`pdd_tasks.tools.builders.controlled`): a model fine-tuned for one epoch on a random half of a
pool of texts, and the pool labelled 1 = tuned on, 0 = held out. Score it with the tuned model.
"""

from __future__ import annotations

from pathlib import Path

from pdd_tasks.loading.benchmark_data import DatasetError, DataSpec, normalise_rows, read_jsonl
from pdd_tasks.paths import default_controlled_dir
from pdd_tasks.tasks.base import MembershipInferenceTask


class ControlledMembershipTask(MembershipInferenceTask):
    """``pdd_controlled``: the labelled texts of a ``make-controlled`` directory.

    Metadata ``controlled_dir`` (default :func:`default_controlled_dir`). The model must be the
    tuned one (``pretrained=<controlled_dir>/model``): with any other model the labels mean nothing,
    so that is an error when the model is named on the command line.
    """

    @classmethod
    def metadata_keys(cls) -> set[str]:
        return super().metadata_keys() | {"controlled_dir"}

    #: The data keys of the benchmark tasks that this task does not read (its texts are the folder's
    #: data.jsonl as make-controlled wrote it): refused, not kept in the results JSON as if applied.
    IGNORED_DATA_KEYS = tuple(key for key in DataSpec.METADATA_KEYS if key != "language")

    def controlled_dir(self) -> Path:
        value = (self.config.metadata or {}).get("controlled_dir")
        return Path(value).expanduser() if value else default_controlled_dir()

    def download(self, dataset_kwargs=None, **kwargs) -> None:
        given = [key for key in self.IGNORED_DATA_KEYS if key in (self.config.metadata or {})]
        if given:
            raise DatasetError(
                f"pdd_controlled: metadata {', '.join(f'{k}={self.config.metadata[k]!r}' for k in given)} does not "
                f"apply here: the task reads the texts of {self.controlled_dir() / 'data.jsonl'} whole, as "
                "make-controlled wrote them (the model was tuned on those texts). Drop the key(s); to score shorter "
                "texts, make the benchmark from a pool of shorter texts (make-controlled --pool)."
            )
        directory = self.controlled_dir()
        data = directory / "data.jsonl"
        if not data.is_file():
            raise DatasetError(
                f"pdd_controlled: no benchmark at {directory} ({data.name} missing). Make it first with "
                f"`lm-eval-pdd make-controlled --output {directory}` (a CPU fine-tuning run), "
                f'or point to one with --metadata \'{{"controlled_dir": "<dir>"}}\'.'
            )
        pretrained = (self.config.metadata or {}).get("pretrained")
        tuned = directory / "model"
        if isinstance(pretrained, str) and Path(pretrained).expanduser().resolve() != tuned.resolve():
            raise DatasetError(
                f"pdd_controlled: its labels say which texts {tuned} was fine-tuned on, but the model is "
                f"{pretrained}. Run it with --model_args pretrained={tuned}."
            )
        self.set_split(normalise_rows(read_jsonl(data), str(data), "text", "label"))
