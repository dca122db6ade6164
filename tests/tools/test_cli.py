"""The ``lm-eval-pdd`` dispatcher (``pdd_tasks.tools.cli``): ``--help`` lists every command from the
registry alone, without importing a command's module; a command imports its own module only."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from support.harness import REPO

from pdd_tasks.tools import cli


#: Runs ``cli.main(argv)`` in a fresh interpreter; prints its exit status, stdout and the command
#: modules (and heavy packages) imported by then.
SCRIPT = """
import contextlib, io, json, sys
from pdd_tasks.tools import cli
out = io.StringIO()
with contextlib.redirect_stdout(out):
    try:
        status = cli.main(sys.argv[1:])
    except SystemExit as exit:
        status = exit.code
imported = sorted(name for name in sys.modules if name.startswith("pdd_tasks.tools.commands."))
heavy = sorted(name for name in ("torch", "transformers", "lm_eval", "datasets") if name in sys.modules)
print(json.dumps({"status": status, "stdout": out.getvalue(), "imported": imported, "heavy": heavy}))
"""


def run_cli(*argv: str) -> dict:
    env = {**os.environ, "COLUMNS": "1000"}  # argparse wraps help lines to the terminal's width
    process = subprocess.run(
        [sys.executable, "-c", SCRIPT, *argv], cwd=REPO, env=env, capture_output=True, text=True, check=True
    )
    return json.loads(process.stdout.strip().splitlines()[-1])


def test_help_lists_every_command_with_its_help_line_and_imports_no_command_module():
    shown = run_cli("--help")
    assert shown["status"] == 0 and shown["imported"] == [] and shown["heavy"] == []
    listing = " ".join(shown["stdout"].split())  # a long name's help line starts on the next line
    for name in cli.COMMANDS:
        summary = cli.COMMANDS.summary(name).replace("%%", "%")
        assert summary and f" {name} {summary} " in listing, name


def test_a_command_imports_its_own_module_only():
    ran = run_cli("tasks-path")
    assert ran["status"] == 0 and ran["stdout"].strip().endswith("task_configs")
    assert ran["imported"] == ["pdd_tasks.tools.commands.tasks_path"]
    helped = run_cli("inspect-table", "--help")
    assert helped["status"] == 0 and "--top" in helped["stdout"]  # its arguments, added when it is used
    assert helped["imported"] == ["pdd_tasks.tools.commands._tables", "pdd_tasks.tools.commands.inspect_table"]
