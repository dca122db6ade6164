"""A benchmark's examples as text, for the dataset-level tests (``pdd_exchangeability``, ``pdd_codec``).

The examples come, in the benchmark's own order, from

- a local file (``data_files``: JSONL, JSON, CSV or Parquet, in file order), each example its
  ``text_field`` or a Jinja ``template`` over several fields (``"{{question}} {{answer}}"``), or
- any lm-eval task (``source_task``, e.g. ``arc_easy`` or a YAML task of one's own found through
  ``source_include_path``): its evaluation documents (test split, else validation) in the task's
  own order, each rendered as the model sees it in that task: ``doc_to_text`` + ``target_delimiter``
  + the gold target (the gold choice for multiple-choice tasks).

A pdd task as ``source_task`` is refused (:func:`refuse_pdd_task`): its documents are membership texts
or a test's own items, not a benchmark's examples.

The same loading serves ``pdd_contamination``'s ``references`` (a source task -> the task of its
known-unseen examples): given ``reference_of`` (the source task a reference belongs to), each message
names the reference and the ``references`` setting, not ``source_task`` (:func:`task_label`).
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from pathlib import Path

from pdd_tasks.errors import UserError, excerpt
from pdd_tasks.loading.files import DatasetError, read_rows


logger = logging.getLogger(__name__)


class ExampleSourceError(UserError):
    """The source of a dataset-level test's examples (``source_task``, ``data_files``) is not usable;
    the message names the fix."""


def examples_from_file(path: str, text_field: str = "text", template: str | None = None) -> list[str]:
    """The examples of a local file in file order: ``row[text_field]``, or ``template`` rendered
    (Jinja, as lm-eval's ``doc_to_text``) with the row's fields."""
    rows = read_rows(path)
    if template is not None:
        from jinja2.exceptions import UndefinedError
        from lm_eval.utils import apply_template

        def render(row: dict) -> str:
            try:
                return apply_template(template, row)
            except UndefinedError as error:
                raise DatasetError(
                    f"{path}: the template {template!r} names a field the rows lack ({error}; fields: "
                    f"{excerpt(sorted(row))}). Name fields of the file in the template."
                ) from None

    else:

        def render(row: dict) -> str:
            if text_field not in row:
                raise DatasetError(
                    f"{path}: no field {text_field!r} (fields: {excerpt(sorted(row))}). Name the text field with "
                    '--metadata \'{"text_field": "..."}\' or join several with a "template", e.g. '
                    '"{{question}} {{answer}}".'
                )
            return str(row[text_field])

    return [render(row) for row in rows]


def has_gold_target(task) -> bool:
    """Whether the task's documents carry a gold answer: not so for a ``generate_until`` task whose
    ``doc_to_target`` is a constant number (IFEval's ``0``: its eval checks the generation against the
    prompt's instructions, there is no answer to append)."""
    return not (task.OUTPUT_TYPE == "generate_until" and isinstance(task.config.doc_to_target, int))


def render_task_doc(task, doc: dict) -> str:
    """A document of an lm-eval task as the model reads it there, with its gold answer:
    ``doc_to_text`` + ``target_delimiter`` + gold target (the gold choice for multiple-choice); the
    prompt alone where the task has no gold answer (:func:`has_gold_target`) or the target is empty."""
    text = task.doc_to_text(doc)
    if not has_gold_target(task):
        return str(text)
    target = task.doc_to_target(doc)
    choices = task.doc_to_choice(doc) if task.OUTPUT_TYPE == "multiple_choice" else None
    if isinstance(text, int) and choices is not None:  # multiple_input tasks: the text is a choice
        text = choices[text]
    if isinstance(target, list):
        target = target[0] if target else ""
    if isinstance(target, int) and choices is not None:
        target = choices[target]
    if target is None or target == "":
        return str(text)
    return f"{text}{task.config.target_delimiter}{target}"


def check_include_path(include_path, name: str) -> None:
    """Refuse a ``source_include_path`` that is not a folder (``name``: the source task it was given for)."""
    for folder in [include_path] if isinstance(include_path, str) else include_path or []:
        if not Path(folder).expanduser().is_dir():
            what = "is a file, not a folder" if Path(folder).expanduser().exists() else "does not exist"
            raise ExampleSourceError(
                f"source_include_path {folder!r} {what}. Give the folder that holds the YAML of source_task {name!r} "
                f'(--metadata \'{{"source_include_path": "<that folder>"}}\'), or leave source_include_path out for '
                "one of lm-eval's own tasks."
            )


def task_label(name: str, reference_of: str | None = None) -> str:
    """How a message names task ``name``: as ``source_task``, or (``reference_of``: the source task it is the
    reference of) as a reference with the ``references`` entry that names it."""
    if reference_of is None:
        return f"source_task {name!r}"
    return f"the reference {name!r} (references: {json.dumps({reference_of: name})})"


def _point_at(reference_of: str | None, what: str) -> str:
    """The fix "point the setting at another task": ``source_task``'s, or the reference's entry."""
    if reference_of is None:
        return f"Point source_task at {what}"
    return f'Point references["{reference_of}"] at {what}'


def examples_of_task(task, name: str, reference_of: str | None = None) -> list[str]:
    """The evaluation documents of a built lm-eval task ``name`` in the task's order, rendered
    (:func:`render_task_doc`); none, or an empty one, is an error."""
    documents = [render_task_doc(task, doc) for doc in task.eval_docs]
    if not documents:
        held = "the benchmark's examples" if reference_of is None else "examples the model cannot have seen"
        raise ExampleSourceError(
            f"{task_label(name, reference_of)} has no evaluation documents (its test split, else its validation split, "
            f"is empty). {_point_at(reference_of, f'a task whose test or validation split holds {held}')}."
        )
    for index, example in enumerate(documents):
        if not example.strip():
            raise DatasetError(f"lm-eval task {name}, example {index}: the text is empty. Remove the row.")
    return documents


def examples_from_task(name: str, include_path: str | None = None, reference_of: str | None = None) -> list[str]:
    """The evaluation documents of lm-eval task ``name`` in the task's order, rendered; ``reference_of``:
    the source task whose reference it is (the messages name the reference)."""
    from lm_eval.api.task import ConfigurableTask
    from lm_eval.tasks import TaskManager, get_task_dict

    check_include_path(include_path, name)
    manager = TaskManager(include_path=include_path)
    if name not in manager.all_tasks:
        if name in pdd_task_names():
            raise ExampleSourceError(_pdd_task_message(name, reference_of))
        raise ExampleSourceError(
            f"{task_label(name, reference_of)}: no such lm-eval task"
            + (f" in lm-eval's tasks or in source_include_path {include_path!r}. Check the task's name" if include_path
               else ". For a YAML task of your own, add "
               '--metadata \'{"source_include_path": "<its directory>"}\' (lm_eval\'s --include_path does '
               "not reach this task)")
            + "; `lm_eval ls tasks` lists the others."
        )  # fmt: skip
    refuse_pdd_task(name, manager, reference_of)
    try:
        loaded = get_task_dict([name], manager)
    except Exception as error:  # offline Hub dataset, missing or empty file, a YAML lm-eval cannot build, ...
        raise ExampleSourceError(_load_failure(name, error, manager.task_index.get(name), reference_of)) from None
    tasks = [task for task in loaded.values() if isinstance(task, ConfigurableTask)]
    if (len(tasks) != 1 or len(loaded) != 1) and reference_of is not None:
        raise ExampleSourceError(
            f"{task_label(name, reference_of)} is a group of tasks; a reference is one task, of examples the model "
            "cannot have seen: name one task of the group."
        )
    if len(tasks) != 1 or len(loaded) != 1:
        raise ExampleSourceError(
            f"source_task {name!r} is a group of tasks; give one task (each task is its own dataset: test each "
            "one on its own), or test every task of the group with pdd_contamination "
            f'(--metadata \'{{"source_tasks": ["{name}"]}}\').'
        )
    return examples_of_task(tasks[0], name, reference_of)


#: lm-eval ``dataset_path`` values that read local files (``dataset_kwargs.data_files``), not the Hub.
LOCAL_BUILDERS = frozenset({"json", "csv", "parquet", "text", "arrow", "pandas"})


def _load_failure(name: str, error: Exception, entry, reference_of: str | None = None) -> str:
    """The message for a source task (or, with ``reference_of``, a reference) whose documents could not be
    loaded: a YAML key lm-eval does not know, local data that cannot be read (a missing, empty or broken
    file, named with its line where it can be: :func:`_local_data_problem`; no test or validation split),
    or a Hub dataset without network."""
    from lm_eval.tasks._yaml_loader import load_yaml

    label = task_label(name, reference_of)
    yaml_path = getattr(entry, "yaml_path", None)
    cause = type(error).__name__ + (f": {excerpt(str(error), 300)[1:-1]}" if str(error) else "")
    if isinstance(error, TypeError) and "unexpected keyword argument" in str(error):
        return (
            f"{label}: its YAML {yaml_path} has a key lm-eval does not know ({cause}). Correct or remove "
            "that key (lm-eval's task guide lists the keys of a task's YAML)."
        )
    try:
        config = load_yaml(yaml_path, resolve_func=False) if yaml_path else {}
    except Exception:  # noqa: BLE001 - the YAML itself is unreadable: say so below
        config = {}
    dataset = str(config.get("dataset_path") or "")
    if dataset in LOCAL_BUILDERS:
        problem = _local_data_problem(config)
        if problem is not None:
            return f"{label}: its documents could not be read: {problem} The task's YAML is {yaml_path}."
        split = _missing_split(config)
        if split is not None:
            return (
                f"{label} has no examples to test: {split} "
                + _point_at(reference_of, "a task with a test or validation split")
                + f", or add that split's file to dataset_kwargs.data_files in its YAML {yaml_path} (e.g. test: <file>)."
            )
    if dataset in LOCAL_BUILDERS or (dataset and Path(dataset).expanduser().exists()):
        files = (config.get("dataset_kwargs") or {}).get("data_files") or dataset
        return (
            f"{label}: its documents could not be read from its local data ({excerpt(files, 300)}; "
            f"{cause}). Check that each file exists and holds rows (an empty file has no documents); the task's YAML "
            f"is {yaml_path}."
        )
    if not dataset:
        return (
            f"{label}: its documents could not be loaded ({cause}). Check the task's YAML "
            f"({yaml_path}); `lm_eval --tasks {name}` with the same --include_path shows the same error."
        )
    return (
        f"{label}: its documents could not be loaded from the dataset {dataset!r} ({cause}). Without "
        "network the task's dataset must be in the local HF datasets cache"
        + (', or use --metadata \'{"data_files": "<a local copy>"}\' instead.' if reference_of is None else ".")
    )


def _data_files(config: dict) -> dict[str, list[str]]:
    """A local-data task's ``dataset_kwargs.data_files`` as split -> files (one file or a list is the
    datasets library's split ``train``)."""
    files = (config.get("dataset_kwargs") or {}).get("data_files") or {}
    splits = files if isinstance(files, dict) else {"train": files}
    return {str(split): [paths] if isinstance(paths, str) else list(paths or []) for split, paths in splits.items()}


def _local_data_problem(config: dict) -> str | None:
    """The first data file of a local-data task that is missing, unreadable (its line named, by the
    project's own readers) or without rows, as a phrase with its fix; None where every file reads."""
    for split, paths in _data_files(config).items():
        for path in paths:
            if any(c in str(path) for c in "*?[") or "://" in str(path):
                continue  # a glob or a URL: the datasets library's own error stands
            try:
                rows = read_rows(path)
            except DatasetError as error:
                return f"the {split} split's file: {error}"
            if not rows:
                return f"the {split} split's file {path} is empty (no rows). Give it rows, or a file that has them."
    return None


def _missing_split(config: dict) -> str | None:
    """Where a local-data task's files give neither its ``test_split`` nor its ``validation_split`` (a
    train-only task), the phrase that says so; else None."""
    splits = _data_files(config)
    wanted = [config[key] for key in ("test_split", "validation_split") if config.get(key)]
    if not splits or not wanted or any(split in splits for split in wanted):
        return None
    return (
        f"its data_files give only the split(s) {sorted(splits)}, and the examples are the task's "
        + " split, else its ".join(
            f"{key.split('_')[0]} split ({config[key]!r})"
            for key in ("test_split", "validation_split")
            if config.get(key)
        )
        + "."
    )


def pdd_task_names() -> set[str]:
    """The names of this plugin's tasks and groups (``lm-eval-pdd tasks-path``), which lm-eval finds only
    through ``--include_path``."""
    from importlib import resources

    from lm_eval.tasks import TaskManager

    return set(
        TaskManager(include_path=str(resources.files("pdd_tasks.task_configs")), include_defaults=False).all_tasks
    )


def _pdd_task_message(name: str, reference_of: str | None = None) -> str:
    if reference_of is not None:
        return (
            f"{task_label(name, reference_of)} is a pdd task: its documents are membership texts or a test's own "
            "items, not a benchmark's examples. "
            + _point_at(
                reference_of, "an lm-eval task of examples like the source task's that the model cannot have seen"
            )
            + f' (e.g. --metadata \'{{"references": {{"{reference_of}": "<that task>"}}}}\').'
        )
    return (
        f"source_task {name!r} is a pdd task: its documents are membership texts (suspect members and "
        f"non-members) or a test's own items, not a benchmark's examples as published, so testing them says "
        f"nothing about the benchmark's contamination. Point source_task at the benchmark's own lm-eval task "
        f'(e.g. --metadata \'{{"source_task": "arc_easy"}}\'), or data_files at the benchmark file in its '
        f'published order (--metadata \'{{"data_files": "<file>"}}\').'
    )


def refuse_pdd_task(name: str, manager, reference_of: str | None = None) -> None:
    """Refuse a pdd task as ``source_task`` (read from its YAML's ``class``, before it is built): its
    documents are membership texts or a dataset-level test's own items, not a benchmark's examples."""
    from lm_eval.tasks._yaml_loader import load_yaml

    entry = manager.task_index.get(name)
    try:
        task_class = load_yaml(entry.yaml_path, resolve_func=True).get("class") if entry and entry.yaml_path else None
    except Exception as error:  # noqa: BLE001 - a YAML lm-eval itself cannot read: its own error comes next
        logger.debug("source_task %r: could not read %s: %s", name, entry.yaml_path, error)
        return
    if isinstance(task_class, type) and task_class.__module__.startswith("pdd_tasks."):
        raise ExampleSourceError(_pdd_task_message(name, reference_of))


@dataclass(frozen=True)
class ExampleSource:
    """Where a dataset-level test's examples come from: exactly one of ``source_task`` (with
    ``source_include_path``) and ``data_files`` (with ``text_field`` or ``template``)."""

    data_files: str | None = None
    text_field: str = "text"
    template: str | None = None
    source_task: str | None = None
    source_include_path: str | None = None

    @classmethod
    def from_metadata(cls, metadata: dict, task: str) -> ExampleSource:
        """The source named by a task's metadata; ``task`` names the test in the message that refuses
        none or two sources."""
        source = cls(
            data_files=metadata.get("data_files") or None,
            text_field=metadata.get("text_field") or "text",
            template=metadata.get("template") or None,
            source_task=metadata.get("source_task") or None,
            source_include_path=metadata.get("source_include_path") or None,
        )
        if bool(source.data_files) == bool(source.source_task):
            raise ExampleSourceError(
                f"{task} needs exactly one source of examples: "
                '--metadata \'{"data_files": "benchmark.jsonl", "text_field": "text"}\' (or a "template" '
                'such as "{{question}} {{answer}}") or --metadata \'{"source_task": "arc_easy"}\' '
                f"(got data_files={source.data_files!r}, source_task={source.source_task!r})."
            )
        return source

    def load(self) -> tuple[list[str], str]:
        """The examples in their order, and a description of their source. An empty example is an error."""
        if self.source_task:
            examples = examples_from_task(self.source_task, self.source_include_path)
            description = f"lm-eval task {self.source_task}"
        else:
            examples = examples_from_file(self.data_files, self.text_field, self.template)
            description = str(self.data_files)
        for index, example in enumerate(examples):
            if not example.strip():
                raise DatasetError(f"{description}, example {index}: the text is empty. Remove the row.")
        return examples, description
