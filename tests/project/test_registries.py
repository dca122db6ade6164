"""The one registry mechanism (``pdd_tasks.registries.Registry``): registration order, the duplicate
rule, lazy entries, the message for an unknown name; and the five registries of the package built on it.
The registry-specific rules (their error types and messages, what they hold) are tested with each."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from support.harness import REPO

from pdd_tasks.registries import DuplicateNameError, Registry, UnknownNameError, load_path


def test_entries_keep_their_registration_order_and_the_mapping_reads_them():
    registry = Registry("colour")
    for name, value in [("red", 3), ("green", 1), ("blue", 2)]:
        assert registry.register(name, value) == value
    assert list(registry) == list(registry.keys()) == ["red", "green", "blue"]
    assert list(registry.values()) == [3, 1, 2] and list(registry.items())[1] == ("green", 1)
    assert len(registry) == 3 and "green" in registry and "violet" not in registry
    assert registry["blue"] == registry.get("blue") == 2 and registry.get("violet", 0) == 0
    assert registry == {"red": 3, "green": 1, "blue": 2}
    with pytest.raises(TypeError):
        registry["violet"] = 4  # read-only: register is the one way in


def test_a_name_registered_twice_is_refused_and_the_first_entry_stays():
    class DuplicateColour(DuplicateNameError):
        pass

    registry = Registry(
        "colour", duplicate_error=DuplicateColour, describe=lambda value: f"value {value}", unique_because="rename one."
    )
    registry.register("red", 3)
    with pytest.raises(
        DuplicateColour, match=r"^colour 'red' is registered twice \(value 3 and value 4\): rename one\.$"
    ):
        registry.register("red", 4)
    with pytest.raises(DuplicateNameError, match="'red' is registered twice"):
        registry.register("red", "json:dumps")
    assert dict(registry) == {"red": 3}


def test_the_decorator_registers_under_its_name():
    registry = Registry("function")

    @registry.registering("twice")
    def double(x):
        return 2 * x

    assert registry["twice"] is double and double(2) == 4


def test_a_lazy_entry_is_imported_when_first_looked_up_not_when_registered():
    """Checked in a fresh interpreter: registering ``module:attribute`` (or a module) imports nothing;
    ``in``, iteration, ``len`` and the summary import nothing; the first lookup imports that module
    only, and the entry is then what the path names."""
    script = """
import json, sys
from pdd_tasks.registries import Registry
registry = Registry("parser")
registry.register("tomllib", "tomllib:loads", summary="TOML")
registry.register("csv", "csv")
steps = ["tomllib" in sys.modules, registry.is_loaded("tomllib")]
steps += [list(registry) == ["tomllib", "csv"], "csv" in registry, len(registry), registry.summary("tomllib")]
steps += ["tomllib" in sys.modules, "csv" in sys.modules]
loads = registry["tomllib"]
steps += [loads is sys.modules["tomllib"].loads, registry.is_loaded("tomllib"), registry.is_loaded("csv")]
steps += ["csv" in sys.modules, registry["csv"] is sys.modules["csv"]]
print(json.dumps(steps))
"""
    out = subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, check=True)
    assert json.loads(out.stdout) == [False, False, True, True, 2, "TOML", False, False, True, True, False, False, True]


def test_a_lazy_entry_must_be_a_module_path():
    registry = Registry("parser")
    with pytest.raises(ValueError, match="'json dumps' is no 'package.module:attribute'"):
        registry.register("json", "json dumps")
    assert load_path("json:dumps") is json.dumps and load_path("json") is json


def test_an_unknown_name_is_a_key_error_naming_the_close_ones():
    registry = Registry("method")
    for number, name in enumerate(["min_k", "min_k_pp", "zlib", "loss"]):
        registry.register(name, number)
    with pytest.raises(UnknownNameError) as raised:
        registry["min_kk"]
    message = str(raised.value)
    assert message == (
        "no method is named 'min_kk'; did you mean 'min_k' or 'min_k_pp'? (every method: min_k, min_k_pp, zlib, loss)"
    )
    assert isinstance(raised.value, KeyError)
    with pytest.raises(KeyError, match=r"no method is named 'gap'\. \(every method"):
        registry.get("gap")
    with pytest.raises(KeyError, match="did you mean 'loss'"):
        registry.summary("los")


def test_an_entry_added_for_a_block_is_removed_after_it():
    registry = Registry("colour")
    registry.register("red", 3)
    with registry.added("green", 1):
        assert list(registry) == ["red", "green"]
        with pytest.raises(DuplicateNameError):
            registry.register("green", 2)
    assert list(registry) == ["red"]


def test_the_package_registries_are_registries():
    from pdd_tasks.dataset_tests import DATASET_TESTS
    from pdd_tasks.lm_eval_patches import PATCHES
    from pdd_tasks.registry import METHODS
    from pdd_tasks.tasks.dataset_methods import DATASET_METHODS
    from pdd_tasks.tools.cli import COMMANDS

    for registry in (METHODS, DATASET_TESTS, DATASET_METHODS, PATCHES, COMMANDS):
        assert isinstance(registry, Registry) and len(registry) > 1
    assert list(DATASET_METHODS) == ["em_mia", "blind"]  # the order of their metrics
    assert all(method.prefix == prefix for prefix, method in DATASET_METHODS.items())
    assert all(patch.name == name for name, patch in PATCHES.items())
    assert list(PATCHES)[0] == "show-user-errors"
