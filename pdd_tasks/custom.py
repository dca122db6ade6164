"""``pdd_custom``: the user's own texts from a local JSONL or CSV file."""

from __future__ import annotations

from pdd_tasks.data_loading import normalise_rows, read_local_rows
from pdd_tasks.task import MembershipInferenceTask


class CustomMembershipTask(MembershipInferenceTask):
    """The user's own labelled texts from a local JSONL or CSV file.

    ``--metadata '{"data_files": "texts.jsonl", "text_field": "text", "label_field": "label"}'``
    """

    def download(self, dataset_kwargs=None, **kwargs) -> None:
        metadata = self.config.metadata or {}
        path = metadata.get("data_files")
        if not path:
            raise ValueError(
                "pdd_custom needs a data file: --metadata '{\"data_files\": \"texts.jsonl\"}' "
                "(JSONL or CSV with a text field and a 0/1 label field; 1 = member)."
            )
        rows = read_local_rows(path)
        split = normalise_rows(rows, str(path), metadata.get("text_field", "text"), metadata.get("label_field", "label"))
        self.dataset = {self.config.test_split: split}
