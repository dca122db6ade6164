"""Where lm-eval-pdd keeps its own files (one home, read by every layer that writes there)."""

from __future__ import annotations

import os
from pathlib import Path


def pdd_home() -> Path:
    """lm-eval-pdd's own files (converted default model, installed frequency tables, Small-Ref caches,
    controlled benchmark): ``$LM_EVAL_PDD_HOME`` if set, else ``${XDG_CACHE_HOME:-~/.cache}/lm_eval_pdd``."""
    home = os.environ.get("LM_EVAL_PDD_HOME")
    if home:
        return Path(home).expanduser()
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path("~/.cache").expanduser())
    return Path(cache).expanduser() / "lm_eval_pdd"


def default_controlled_dir() -> Path:
    """Where ``lm-eval-pdd make-controlled`` writes and ``pdd_controlled`` reads by default:
    ``<pdd_home()>/controlled/default``."""
    return pdd_home() / "controlled" / "default"


def tasks_path() -> str:
    """Directory of the installed task configs, for ``lm_eval --include_path`` (``lm-eval-pdd tasks-path``)."""
    from importlib import resources

    return str(resources.files("pdd_tasks.task_configs"))
