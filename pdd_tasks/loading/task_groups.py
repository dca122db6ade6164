"""The source tasks of ``pdd_contamination``: lm-eval task, group and tag names expanded to leaf tasks.

A group (``mmlu``, ``leaderboard``) or a tag (``ai2_arc``) stands for its leaf tasks, each its own dataset
and tested on its own; groups nest (``leaderboard`` -> ``leaderboard_bbh`` -> 24 leaves), and the tree is
kept (:attr:`SourceTasks.groups`: each group's direct children, leaves or groups) so that a result can be
read per group. The leaves come either from names (:func:`from_names`: ``source_tasks``, loaded through
lm-eval's own ``TaskManager``) or from the tasks of the run itself (:func:`from_run`: ``pdd_contamination``
without ``source_tasks``).

A leaf that cannot be loaded (its dataset offline, a missing file, a YAML lm-eval cannot build) does not
stop the others: it is kept with the reason (:attr:`Leaf.problem`), reported "not applied" by the caller.
A name that is neither a task, a group nor a tag is an error naming it, with the names close to it.
"""

from __future__ import annotations

import difflib
import logging
from dataclasses import dataclass, field

from pdd_tasks.errors import excerpt
from pdd_tasks.loading.examples import (
    ExampleSourceError,
    _load_failure,
    _pdd_task_message,
    check_include_path,
    examples_of_task,
    pdd_task_names,
    refuse_pdd_task,
)


logger = logging.getLogger(__name__)


@dataclass
class Leaf:
    """One leaf task to test: its examples, or why it has none (``problem``), and the group it came from."""

    name: str
    examples: list[str] | None = None
    problem: str | None = None
    group: str | None = None


@dataclass
class SourceTasks:
    """The leaves to test, in order, and the groups they came from (group -> its direct children's names)."""

    leaves: dict[str, Leaf] = field(default_factory=dict)
    groups: dict[str, list[str]] = field(default_factory=dict)

    def add(self, leaf: Leaf) -> None:
        """Add ``leaf`` unless a leaf of that name is already there (a task in two groups is tested once)."""
        self.leaves.setdefault(leaf.name, leaf)


def is_pdd_task(task) -> bool:
    """Whether a built lm-eval task is one of this plugin's (its class is defined in ``pdd_tasks``)."""
    return type(task).__module__.startswith("pdd_tasks.")


def leaf_from_task(name: str, task, group: str | None) -> Leaf:
    """A leaf from a built lm-eval task: its evaluation documents rendered, or the reason they cannot be."""
    try:
        return Leaf(name, examples=examples_of_task(task, name), group=group)
    except ExampleSourceError as error:
        return Leaf(name, problem=str(error), group=group)
    except Exception as error:  # noqa: BLE001 - a task's own process_docs / doc_to_text failing: reported per leaf
        cause = type(error).__name__ + (f": {excerpt(str(error), 300)[1:-1]}" if str(error) else "")
        return Leaf(
            name,
            problem=f"source task {name!r}: its documents could not be rendered ({cause}). `lm_eval --tasks {name}` "
            "shows the same error.",
            group=group,
        )


def unknown_name_message(name: str, manager) -> str:
    """The message for a source task name lm-eval does not know, with the close names lm-eval knows."""
    close = difflib.get_close_matches(name, manager.all_tasks, n=3, cutoff=0.75)
    hint = f"did you mean {' or '.join(repr(c) for c in close)}? " if close else ""
    return (
        f"pdd_contamination: source_tasks names {name!r}, which is neither an lm-eval task, a group nor a tag; "
        f"{hint}`lm_eval ls tasks` lists them (a YAML task of your own: add its folder as "
        '--metadata \'{"source_include_path": "<its directory>"}\').'
    )


def from_names(names: list[str], include_path: str | None = None) -> SourceTasks:
    """The leaves of ``names`` (tasks, groups, tags; lm-eval's own or found through ``include_path``), in
    order, each loaded on its own. A pdd task among them is refused, and so is an unknown name."""
    from lm_eval.tasks import TaskManager

    check_include_path(include_path, names[0])
    manager = TaskManager(include_path=include_path)
    for name in names:
        if name not in manager.all_tasks:
            if name in pdd_task_names():
                raise ExampleSourceError(_pdd_task_message(name))
            raise ExampleSourceError(unknown_name_message(name, manager))
    sources = SourceTasks()
    for name in names:
        entry = manager.task_index[name]
        if entry.kind.name in ("TASK", "PY_TASK"):
            refuse_pdd_task(name, manager)
            sources.add(_load_leaf(manager, name, None))
        else:
            _expand(manager, name, sources)
    return sources


def _load_leaf(manager, name: str, group: str | None) -> Leaf:
    """Leaf task ``name`` of ``manager``'s index, built on its own."""
    try:
        task = manager.load([name])["tasks"][name]
    except Exception as error:  # noqa: BLE001 - offline Hub dataset, missing file, a YAML lm-eval cannot build
        return Leaf(name, problem=_load_failure(name, error, manager.task_index.get(name)), group=group)
    return leaf_from_task(name, task, group)


def _expand(manager, name: str, sources: SourceTasks) -> None:
    """Add the leaves of group or tag ``name``: built by lm-eval as the group (its overrides of its members
    applied), or where that fails, each member on its own, so that one broken leaf is reported alone."""
    try:
        loaded = manager.load([name])
    except Exception as error:  # noqa: BLE001 - one member failed: find which, load the others alone
        logger.warning(
            "pdd_contamination: %s could not be loaded as a whole (%s); loading each task alone.", name, error
        )
        _expand_members(manager, name, _members(manager, name), sources)
        return
    tasks = loaded["tasks"]
    group_map = loaded.get("group_map") or {}
    if name not in group_map:  # a tag: its tasks, kept under the tag's name
        group_map = {name: list(tasks)}
    pdd = [task_name for task_name, task in tasks.items() if is_pdd_task(task)]
    if pdd:
        raise ExampleSourceError(_pdd_task_message(pdd[0]) + f" ({pdd[0]!r} is a task of {name!r}.)")
    parents = {child: group for group, children in group_map.items() for child in children}
    sources.groups.update(group_map)
    for task_name, task in tasks.items():
        sources.add(leaf_from_task(task_name, task, parents.get(task_name, name)))


def _members(manager, name: str) -> list:
    """The members of group or tag ``name`` as its YAML lists them (a tag: its tasks)."""
    entry = manager.task_index[name]
    if entry.kind.name == "TAG":
        return sorted(entry.tags)
    members = (entry.cfg or {}).get("task") or []
    return members if isinstance(members, list) else [members]


def _expand_members(manager, group: str, members: list, sources: SourceTasks) -> None:
    """Add ``members`` of ``group`` (names or inline YAML entries), each leaf loaded on its own."""
    index = manager.task_index
    children = sources.groups.setdefault(group, [])
    for member in members:
        if isinstance(member, dict) and "group" in member:
            child = member["group"] if member["group"] in index else f"{group}::{member['group']}"
            children.append(child)
            inner = _members(manager, child) if child in index else member.get("task") or []
            _expand_members(manager, child, inner if isinstance(inner, list) else [inner], sources)
            continue
        child = member.get("task") if isinstance(member, dict) else member
        entry = index.get(child) if isinstance(child, str) else None
        if entry is None:
            children.append(f"{group}::{child}")
            sources.add(
                Leaf(
                    f"{group}::{child}",
                    problem=f"task {child!r} is defined inside group {group!r} only and the group could not be loaded "
                    f"as a whole; `lm_eval --tasks {group}` shows why.",
                    group=group,
                )
            )
        elif entry.kind.name == "GROUP":
            children.append(child)
            _expand_members(manager, child, _members(manager, child), sources)
        elif entry.kind.name == "TAG":
            for task_name in sorted(entry.tags):
                children.append(task_name)
                sources.add(_load_leaf(manager, task_name, group))
        else:
            children.append(child)
            sources.add(_load_leaf(manager, child, group))


def from_run(tasks: dict, groups: dict[str, list[str]], leave_out: set[str] = frozenset()) -> SourceTasks:
    """The leaves of a run (``tasks``: leaf name -> built task; ``groups``: group -> direct children), but
    this plugin's own tasks and the names in ``leave_out`` (references), and the groups that hold them."""
    leaves = {name: task for name, task in tasks.items() if not is_pdd_task(task) and name not in leave_out}
    kept: dict[str, list[str]] = {}

    def holds_a_leaf(name: str) -> bool:
        if name in leaves:
            return True
        children = [child for child in groups.get(name, []) if holds_a_leaf(child)]
        if children:
            kept[name] = children
        return bool(children)

    for group in groups:
        holds_a_leaf(group)
    parents = {child: group for group, children in kept.items() for child in children}
    sources = SourceTasks(groups={group: kept[group] for group in groups if group in kept})
    for name, task in leaves.items():
        sources.add(leaf_from_task(name, task, parents.get(name)))
    return sources
