"""The documentation's tables of methods and settings, generated from the method registry.

``docs/settings.md`` is this module's rendering of :data:`pdd_tasks.registry.METHODS` and
:data:`pdd_tasks.registry.SETTINGS`, so the page cannot drift from the code (``tests/project/test_docs.py``
compares them):

    python -m pdd_tasks.tools.docs_tables           # prints the difference, exit status 1 if any
    python -m pdd_tasks.tools.docs_tables --write   # rewrites docs/settings.md
"""

from __future__ import annotations

import argparse
import difflib
import inspect
import json
import re
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any


#: The page this module writes, in a source checkout.
SETTINGS_PAGE = Path(__file__).resolve().parents[2] / "docs" / "settings.md"

#: How to regenerate the page (printed when it is stale).
REGENERATE = "python -m pdd_tasks.tools.docs_tables --write"

_DATA_ROLE = re.compile(r":data:`~?([\w.]+)`")


def _cell(text: str) -> str:
    """Text for one Markdown table cell: one line, pipes escaped."""
    return " ".join(str(text).split()).replace("|", "\\|")


def _value(value: Any) -> str:
    """A default as it is written in ``--metadata`` JSON (``null``, ``true``, ``0.2``, ``"paper"``)."""
    return f"`{json.dumps(value)}`"


def check_text(check) -> str:
    """What a setting's check accepts: the first paragraph of its docstring, with a
    ``:data:`NAME``` reference replaced by the values of that tuple in the check's module and reST
    literals turned into Markdown ones; "" for a check without a docstring."""
    doc = inspect.getdoc(check) or ""
    first = doc.split("\n\n")[0]

    def values(match: re.Match) -> str:
        found = getattr(check, "__globals__", {}).get(match.group(1).rsplit(".", 1)[-1])
        if isinstance(found, (tuple, list)):
            return ", ".join(_value(v) for v in found)
        return f"`{match.group(1)}`"

    text = _cell(_DATA_ROLE.sub(values, first).replace("``", "`"))
    return text[:1].upper() + text[1:]


def _defaults(settings) -> SimpleNamespace:
    """Every setting at its default, as the attributes a method's ``enabled`` reads."""
    return SimpleNamespace(**{setting.name: setting.default for setting in settings})


def methods_table(settings, methods) -> str:
    """The Markdown table of ``methods``: metric prefix, on with every setting at its default, the
    settings it reads, whether it asks for more requests per text or prepares once per run, and
    the paper."""
    defaults = _defaults(settings)
    rows = [
        "| method (metric prefix) | on by default | its settings | more requests per text | prepared once per run | paper |",
        "|---|---|---|---|---|---|",
    ]
    for name, method in methods.items():
        reads = ", ".join(f"`{setting.name}`" for setting in method.settings) or "none"
        rows.append(
            f"| `{name}` | {'yes' if method.enabled(defaults) else 'no'} | {reads} | "
            f"{'yes' if method.extra_requests is not None else 'no'} | "
            f"{'yes' if method.prepare is not None else 'no'} | {_cell(method.citation)} |"
        )
    return "\n".join(rows)


def settings_table(settings, methods) -> str:
    """The Markdown table of ``settings``: name, default, the methods that read it (every method:
    a setting of the scoring path), what it is, what its check accepts, the paper's value or an
    example where the setting gives one (its ``hint``)."""
    rows = [
        "| setting | default | read by | what it is | accepted values | paper's value or example |",
        "|---|---|---|---|---|---|",
    ]
    from pdd_tasks.registry import DATASET_METHOD_SETTINGS

    for setting in settings:
        readers = [name for name, method in methods.items() if setting.name in {s.name for s in method.settings}]
        readers += [name for name, group in DATASET_METHOD_SETTINGS.items() if setting in group]  # EM-MIA's
        read_by = ", ".join(f"`{name}`" for name in readers) or "every method (scoring path)"
        switch = " Turns its method on or off." if setting.switch else ""
        hint = setting.hint.strip()
        if hint.startswith("(") and hint.endswith(")"):
            hint = hint[1:-1]
        rows.append(
            f"| `{setting.name}` | {_value(setting.default)} | {read_by} | {_cell(setting.doc + switch)} | "
            f"{check_text(setting.check)} | {_cell(hint)} |"
        )
    return "\n".join(rows)


def dataset_tests_section(tests=None) -> list[str]:
    """Lines of the dataset-level tests' part of the page: per test of
    :data:`pdd_tasks.dataset_tests.DATASET_TESTS`, its task and its settings."""
    if tests is None:
        from pdd_tasks.dataset_tests import DATASET_TESTS

        tests = DATASET_TESTS
    lines = [
        "## Dataset-level tests",
        "",
        "The settings of `pdd_codec` and `pdd_exchangeability` are keys of the task's metadata, beside the source of",
        "the examples (`source_task` or `data_files`, [Dataset-level tests](dataset-tests.md)); in `pdd_contamination`",
        'they go in the test\'s block (`--metadata \'{"codec": {"max_examples": 200}}\'`), where any other key is',
        "refused. Its own keys: `source_tasks` (the lm-eval tasks, groups or tags to check, each group or tag",
        "expanded to its leaf tasks; default: every other task of the run), `source_include_path`, `tests`,",
        "`references` ([`pdd_contamination`](contamination.md#pdd_contamination-both-tests-on-each-standard-task-of-a-run)).",
        "Every test refuses settings that would send more than `max_requests` requests for one source, before",
        "anything is built.",
        "",
    ]
    for name, test in tests.items():
        lines += [
            f"### {test.title[:1].upper()}{test.title[1:]} (`{test.task}`, block `{name}`)",
            "",
            f"{_cell(test.citation)}.",
            "",
            "| setting | default | what it is | accepted values | example |",
            "|---|---|---|---|---|",
        ]
        for setting in test.all_settings:
            hint = setting.hint.strip().removeprefix("(").removesuffix(")")
            default = _value(setting.default)
            if setting.name in test.contamination_defaults:
                default += f" ({_value(test.contamination_defaults[setting.name])} in `pdd_contamination`)"
            lines.append(
                f"| `{setting.name}` | {default} | {_cell(setting.doc)} | {check_text(setting.check)} | {_cell(hint)} |"
            )
        lines.append("")
    return lines


def render_settings_page(settings=None, methods=None) -> str:
    """The whole of ``docs/settings.md`` (defaults: the registry's ``SETTINGS`` and ``METHODS``)."""
    if settings is None or methods is None:
        from pdd_tasks.registry import METHODS, SETTINGS

        settings = SETTINGS if settings is None else settings
        methods = METHODS if methods is None else methods
    return "\n".join(
        [
            "# Settings",
            "",
            f"<!-- Generated from pdd_tasks.registry by `{REGENERATE}`; do not edit by hand. -->",
            "",
            "The scoring settings of every pdd task: keys of the task's metadata, given with",
            "`--metadata '{\"min_k\": 0.1}'` (or in a task YAML's `metadata:`). A misspelt key is refused with",
            "the closest name; a value is checked before any model work; the settings in effect are recorded",
            "in the results JSON under `configs.<task>.metadata`. The settings that choose the texts",
            "(`data_source`, `max_words`, `data_files`, ...) are on [Benchmarks](benchmarks.md#data-settings-task-metadata);",
            "what each method computes is on [Methods](methods.md).",
            "",
            "## Methods",
            "",
            "Every method scores each text from the same forward pass of the text; a method with more requests",
            "asks the backend for more texts per text (the lowercased text, a prefixed text, neighbours).",
            "",
            methods_table(settings, methods),
            "",
            "EM-MIA (`em_mia`, off by default) is not in this table: its score of a text depends on every text",
            "of the run, so the task computes it after scoring, from each text scored after every other",
            "([Methods](methods.md#em-mia-em_mia-kim-et-al-eacl-2026-em_mia-true)).",
            "",
            "## Every setting",
            "",
            settings_table(settings, methods),
            "",
            *dataset_tests_section(),
        ]
    )


def difference(page: Path = SETTINGS_PAGE) -> str:
    """The unified diff from ``page`` to its rendering; "" when they agree."""
    current = page.read_text(encoding="utf-8") if page.exists() else ""
    return "".join(
        difflib.unified_diff(
            current.splitlines(keepends=True),
            render_settings_page().splitlines(keepends=True),
            fromfile=str(page),
            tofile="rendered from pdd_tasks.registry",
        )
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m pdd_tasks.tools.docs_tables",
        description="Print the difference between docs/settings.md and its rendering from the method registry; "
        "--write rewrites the page.",
    )
    parser.add_argument("--write", action="store_true", help="rewrite the page")
    parser.add_argument("--page", type=Path, default=SETTINGS_PAGE, help=f"the page (default: {SETTINGS_PAGE})")
    args = parser.parse_args(argv)
    if args.write:
        args.page.write_text(render_settings_page(), encoding="utf-8")
        print(f"wrote {args.page}")
        return 0
    diff = difference(args.page)
    if diff:
        sys.stdout.write(diff)
        print(f"\n{args.page} differs from the registry; regenerate it with `{REGENERATE}`.")
        return 1
    print(f"{args.page} agrees with the registry.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
