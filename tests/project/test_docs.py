"""The documentation: the generated settings page agrees with the method registry, and the README
stays a front door whose links into docs/ resolve (the site's own links are checked by
`mkdocs build --strict` in .ci/test)."""

import dataclasses
import re
from pathlib import Path

from markdown.extensions.toc import slugify

from pdd_tasks import registry
from pdd_tasks.dataset_tests import DATASET_TESTS
from pdd_tasks.dataset_tests.core import GROUP_EVIDENCE_ANCHOR
from pdd_tasks.tools import docs_tables
from pdd_tasks.tools.report.tables import GROUP_NOTE, VERDICT_RULE


ROOT = Path(__file__).resolve().parents[2]


def test_settings_page_is_the_rendering_of_the_registry():
    page = docs_tables.SETTINGS_PAGE
    assert page == ROOT / "docs" / "settings.md"
    assert page.read_text(encoding="utf-8") == docs_tables.render_settings_page(), (
        f"docs/settings.md differs from pdd_tasks.registry; regenerate it with `{docs_tables.REGENERATE}` "
        f"(`python -m pdd_tasks.tools.docs_tables` prints the difference)."
    )


def test_every_setting_and_method_has_a_row():
    page = docs_tables.render_settings_page()
    for setting in registry.SETTINGS:
        assert re.search(rf"^\| `{setting.name}` \| ", page, re.M), setting.name
    for name in registry.METHODS:
        assert re.search(rf"^\| `{name}` \| (yes|no) \| ", page, re.M), name


def test_a_changed_setting_changes_the_rendering():
    """The page follows the registry: a new default or doc shows, so a stale page fails the test above."""
    min_k = next(s for s in registry.SETTINGS if s.name == "min_k")
    changed = tuple(dataclasses.replace(s, default=0.3) if s is min_k else s for s in registry.SETTINGS)
    page = docs_tables.render_settings_page(changed, registry.METHODS)
    assert "| `min_k` | `0.3` | `min_k` |" in page
    assert page != docs_tables.render_settings_page()


def test_the_settings_table_columns():
    table = docs_tables.settings_table(registry.SETTINGS, registry.METHODS)
    rows = {line.split(" | ")[0].strip("| `"): line for line in table.splitlines()[2:]}
    # default as --metadata JSON, the methods that read it, the check's accepted values, the paper's value
    assert rows["dcpdd_a"].startswith("| `dcpdd_a` | `0.01` | `dcpdd`, `dcpdd_lup` | the cap a of DC-PDD Eq. 7")
    assert rows["dcpdd_a"].endswith("| A number > 0. | paper: 0.01 or 10 |")
    assert (
        "| `null` | `neighbor` |" in rows["neighbor_model"] and "Turns its method on or off." in rows["neighbor_model"]
    )
    assert "| every method (scoring path) |" in rows["truncate"]
    # a :data:`NAME` reference in a check's docstring becomes the tuple's values
    assert 'One of `"float32"`, `"bfloat16"`, `"float16"`.' in rows["small_ref_dtype"]


#: Read by :func:`_check_with_choices`'s docstring.
CHOICES = ("x", "y")


def _check_with_choices(name, value):
    """one of :data:`CHOICES`, or ``none``.

    More text that is not shown."""
    return value


def test_check_text():
    assert docs_tables.check_text(_check_with_choices) == 'One of `"x"`, `"y"`, or `none`.'
    assert docs_tables.check_text(lambda name, value: value) == ""


def _slugs(page: Path) -> set[str]:
    headings = re.findall(r"^#{1,6} (.+)$", page.read_text(encoding="utf-8"), re.M)
    return {slugify(heading.replace("`", ""), "-") for heading in headings}


def test_readme_is_short_and_its_links_into_docs_resolve():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) <= 250, "the README is the front door: move details to a page under docs/"
    links = re.findall(r"\]\((docs/[^)#\s]+)(?:#([^)\s]+))?\)", readme)
    assert len(links) >= 10
    for path, anchor in links:
        target = ROOT / path
        assert target.is_file(), f"README links to {path}, which does not exist"
        if anchor:
            assert anchor in _slugs(target), f"README links to {path}#{anchor}, which has no such heading"


def test_every_page_is_in_the_nav():
    """The strict build fails on a page left out of mkdocs.yml's nav; this names it."""
    nav = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    pages = [p.name for p in (ROOT / "docs").glob("*.md")]
    assert "settings.md" in pages and "architecture.md" in pages
    assert [page for page in pages if f": {page}" not in nav] == []


def _anchors(page: Path) -> set[str]:
    """The ids MkDocs gives a page's headings: an attr_list ``{ #id }`` where the heading has one, else its slug
    (headings inside code blocks are not headings)."""
    ids, fence = set(), False
    for line in page.read_text(encoding="utf-8").splitlines():
        if line.startswith("```"):
            fence = not fence
        heading = None if fence else re.match(r"^#{1,6} (.+?)\s*$", line)
        if heading:
            given = re.search(r"\{\s*#([\w-]+)\s*\}$", heading.group(1))
            ids.add(given.group(1) if given else slugify(heading.group(1).replace("`", ""), "-"))
    return ids


def test_the_anchors_the_verdict_lines_and_notes_cite_exist():
    """Each verdict line ends with its test's evidence anchor, a group's with the group tests', and the notes under
    the table cite the rule: a section moved or renamed without its citation fails here (the strict docs build
    does not see anchors written in code)."""
    cited = [test.reading.evidence_anchor for test in DATASET_TESTS.values()] + [GROUP_EVIDENCE_ANCHOR]
    cited += re.findall(r"docs/([\w-]+\.md#[\w-]+)", GROUP_NOTE + VERDICT_RULE)
    assert "controls-examples.md#codec-null" in cited and len(cited) >= 4
    for anchor in cited:
        page, section = anchor.split("#")
        assert section in _anchors(ROOT / "docs" / page), f"{anchor} is cited by the verdict, but has no such section"
