"""Layers point down: no module of pdd_metrics or pdd_tasks imports one of a higher layer, and no
two modules import each other, read from the source of every module (``ast``), imports inside
functions included."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest


REPO = Path(__file__).resolve().parents[2]

#: The layers, lowest first; a module may import modules of its own layer or of a lower one. A
#: module belongs to the longest prefix listed here that names it or a package above it.
LAYERS = (
    ("pdd_metrics",),  # pure scoring functions: NumPy in, floats out
    # the package, its errors and paths, the one registry class (pdd_tasks.registries imports nothing of the
    # project) and the results schema (the keys tasks write and tools read: pdd_tasks.results_schema)
    ("pdd_tasks", "pdd_tasks.errors", "pdd_tasks.paths", "pdd_tasks.registries", "pdd_tasks.results_schema"),
    # data, reference tables, the methods and the dataset-level tests (their registries)
    ("pdd_tasks.loading", "pdd_tasks.freq", "pdd_tasks.registry", "pdd_tasks.dataset_tests"),
    # per-run preparation and the per-token capture
    ("pdd_tasks.prepare", "pdd_tasks.backends"),
    # the patches that route lm-eval's requests to the capture, and lm-eval's command line with them applied
    # (python -m pdd_tasks.lm_eval_patches)
    ("pdd_tasks.lm_eval_patches",),
    ("pdd_tasks.tasks",),  # the lm-eval task classes
    # the command lines (lm-eval-pdd), layered in turn: what the commands share (argument types, outputs,
    # the default model); reading runs, the servers, the builders; the tables and report; the commands,
    # one module each; the dispatcher. So no module of tools outside commands imports a command.
    ("pdd_tasks.tools",),
    ("pdd_tasks.tools.results", "pdd_tasks.tools.servers", "pdd_tasks.tools.builders", "pdd_tasks.tools.gguf_server"),
    ("pdd_tasks.tools.report",),
    # the report's stages, so its data flows one way (docs/architecture.md, "The tools package"): reading the
    # runs; the model (with the tables `lm-eval-pdd table` shares and the contamination board); the plots and
    # the documents (with the board's views), drawn apart from the model; writing the files
    ("pdd_tasks.tools.report.read",),
    ("pdd_tasks.tools.report.tables", "pdd_tasks.tools.report.contamination_board", "pdd_tasks.tools.report.model"),
    ("pdd_tasks.tools.report.board_view", "pdd_tasks.tools.report.plots", "pdd_tasks.tools.report.render"),
    ("pdd_tasks.tools.report.write",),
    ("pdd_tasks.tools.commands",),
    ("pdd_tasks.tools.cli",),
)
#: Packages pdd_metrics must not import: it takes arrays, not models or harness objects.
NOT_IN_METRICS = ("lm_eval", "torch", "transformers", "datasets", "vllm")


def module_files() -> dict[str, Path]:
    files = {}
    for path in sorted([*REPO.glob("pdd_metrics/**/*.py"), *REPO.glob("pdd_tasks/**/*.py")]):
        parts = list(path.relative_to(REPO).with_suffix("").parts)
        files[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return files


MODULES = module_files()


def imports_of(name: str) -> list[tuple[str, int]]:
    """``(imported module, line)`` of every import in module ``name``; ``from package import x`` names
    the submodule ``package.x`` where there is one."""
    path = MODULES[name]
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found += [(alias.name, node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(parent + ([node.module] if node.module else []))
            for alias in node.names:
                submodule = f"{base}.{alias.name}"
                found.append((submodule if submodule in MODULES else base, node.lineno))
    return found


def layer_of(name: str) -> int:
    matches = [
        (len(prefix), index)
        for index, prefixes in enumerate(LAYERS)
        for prefix in prefixes
        if name == prefix or name.startswith(prefix + ".")
    ]
    if not matches:
        raise AssertionError(f"{name} is in no layer: add it to LAYERS in tests/project/test_layers.py")
    return max(matches)[1]


def test_the_modules_are_found_and_every_one_has_a_layer():
    assert {"pdd_metrics.methods", "pdd_tasks.registry", "pdd_tasks.tasks.base", "pdd_tasks.tools.cli"} <= set(MODULES)
    for name in MODULES:
        layer_of(name)


@pytest.mark.parametrize("name", sorted(MODULES))
def test_no_module_imports_a_higher_layer(name):
    upward = [
        f"{name}:{line} imports {target} (layer {layer_of(target)} > {layer_of(name)})"
        for target, line in imports_of(name)
        if target.startswith(("pdd_metrics", "pdd_tasks")) and layer_of(target) > layer_of(name)
    ]
    assert not upward, "\n".join(upward)


def test_pdd_metrics_imports_no_model_or_harness_package():
    found = [
        f"{name}:{line} imports {target}"
        for name in MODULES
        if name.startswith("pdd_metrics")
        for target, line in imports_of(name)
        if target.split(".")[0] in NOT_IN_METRICS
    ]
    assert not found, "\n".join(found)


def test_no_import_cycle():
    graph = {
        name: {target for target, _ in imports_of(name) if target in MODULES and target != name} for name in MODULES
    }
    cycles, state = [], {}

    def visit(name: str, path: list[str]) -> None:
        state[name] = "open"
        for target in sorted(graph[name]):
            if state.get(target) == "open":
                cycles.append(" -> ".join(path[path.index(target) :] + [target]))
            elif target not in state:
                visit(target, [*path, target])
        state[name] = "done"

    for name in sorted(graph):
        if name not in state:
            visit(name, [name])
    assert not cycles, "\n".join(cycles)


def test_every_package_is_installed():
    """pyproject.toml lists the packages a wheel holds (``[tool.setuptools] packages``): every folder of
    pdd_metrics and pdd_tasks with an ``__init__.py`` is one of them (an editable install finds it
    without, a wheel would not)."""
    tomllib = pytest.importorskip("tomllib")
    listed = set(tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]["packages"])
    packages = {name for name, path in MODULES.items() if path.name == "__init__.py"}
    assert packages - listed == set()


def test_every_command_is_one_module_of_tools_commands():
    """Each ``lm-eval-pdd`` command is a module of ``pdd_tasks.tools.commands`` named after it, defining
    ``add_arguments`` and ``run``; every module there not starting with ``_`` is a command; the
    docstring of ``cli`` names every command."""
    from pdd_tasks.tools import cli

    for name in cli.COMMANDS:
        module = cli.command_module(name)
        assert module in MODULES, f"{name}: no module {module}"
        defined = {
            node.name
            for node in ast.parse(MODULES[module].read_text(encoding="utf-8")).body
            if isinstance(node, ast.FunctionDef)
        }
        assert {"add_arguments", "run"} <= defined, f"{module} defines {sorted(defined)}"
        assert re.search(rf"(?<![\w-]){re.escape(name)}(?![\w-])", cli.__doc__), f"{name} is not in cli's docstring"
    commands = {
        name
        for name in MODULES
        if name.startswith("pdd_tasks.tools.commands.") and not name.rpartition(".")[2].startswith("_")
    }
    assert commands == {cli.command_module(name) for name in cli.COMMANDS}


def test_the_registry_class_imports_nothing_of_the_project():
    """``pdd_tasks.registries`` is below every registry built on it: it imports no module of the project."""
    assert [
        target
        for target, _ in imports_of("pdd_tasks.registries")
        if target.split(".")[0] in ("pdd_metrics", "pdd_tasks")
    ] == []


def test_the_tools_read_results_without_the_task_classes():
    """A tool never imports a task class to read a key: the keys and the settings the tools read are in
    ``pdd_tasks.results_schema``, below both (issue 44, item 3)."""
    readers = [name for name in MODULES if name.startswith("pdd_tasks.tools.results")]
    climbing = [
        (name, imported)
        for name in readers
        for imported, _ in imports_of(name)
        if imported.startswith("pdd_tasks.tasks")
    ]
    assert readers and climbing == []


def test_no_module_of_the_package_looks_like_a_test():
    """pytest collects files named ``test_*.py`` or ``*_test.py`` and, in them, functions named ``test*``:
    no module of pdd_metrics or pdd_tasks is named so, nor defines such a function at its top level."""
    named = [name for name, path in MODULES.items() if path.name.startswith("test_") or path.stem.endswith("_test")]
    functions = [
        f"{name}.{node.name}"
        for name, path in MODULES.items()
        for node in ast.parse(path.read_text(encoding="utf-8")).body
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name.startswith("test")
    ]
    assert named == [] and functions == [], named + functions


def test_the_report_model_is_data_and_its_plots_and_documents_are_drawn_apart():
    """The report's stages (issue 44, item 3): the model writes no file and knows no HTML, CSV or plot; the
    plots and the documents are each drawn from the model, neither from the other; reading the runs uses
    nothing of the report."""
    stage = "pdd_tasks.tools.report."
    model = {target.split(".")[0] for target, _ in imports_of(stage + "model")}
    assert model.isdisjoint({"html", "csv", "base64", "matplotlib", "shutil", "tempfile"}), model
    for one, other in (("plots", "render"), ("render", "plots")):
        assert stage + other not in {target for target, _ in imports_of(stage + one)}
    assert not [target for target, _ in imports_of(stage + "read") if target.startswith(stage)]
