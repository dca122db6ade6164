"""pdd_tasks.lm_eval_patches: the one place that changes lm-eval's behaviour.

Importing the package changes nothing (checked in a fresh interpreter); ``apply()`` makes every
listed change, once; the version gate names both versions and the pip command; under lm-eval's own
command line a user's mistake is a message without a traceback, and library use keeps its excepthook.
"""

from __future__ import annotations

import doctest
import importlib
import json
import re
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from support.harness import REPO, run_lm_eval, tasks_path

from pdd_tasks import lm_eval_patches
from pdd_tasks.backends.base import PerTokenRequest
from pdd_tasks.backends.completions import ServerCheckError
from pdd_tasks.errors import UserError


def python(script: str) -> dict:
    """Run ``script`` in a fresh interpreter; it prints one JSON object, returned here."""
    process = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300, cwd=REPO)
    assert process.returncode == 0, process.stderr[-4000:]
    return json.loads(process.stdout.strip().splitlines()[-1])


#: Snapshots every attribute of the lm-eval classes and modules the patches touch, and the excepthook.
SNAPSHOT = """
import inspect, json, sys
import lm_eval.api.metrics, lm_eval.api.model, lm_eval.api.registry, lm_eval.evaluator, lm_eval.evaluator_utils
from lm_eval.models.huggingface import HFLM
from lm_eval.models import openai_completions as oc
from lm_eval.loggers.evaluation_tracker import EvaluationTracker
from lm_eval.models.utils import Collator

WATCHED = [HFLM, Collator, oc.LocalCompletionsAPI, oc.OpenAICompletionsAPI, oc.LocalChatCompletion, oc.OpenAIChatCompletion,
           lm_eval.api.model.TemplateLM, lm_eval.evaluator_utils, lm_eval.evaluator, lm_eval.api.metrics, sys,
           EvaluationTracker]

def snapshot():
    return {(i, name): value for i, owner in enumerate(WATCHED) for name, value in list(vars(owner).items())}

def changed(before, after):
    return sorted(f"{WATCHED[i].__name__}.{name}" for (i, name) in before.keys() | after.keys()
                  if before.get((i, name), None) is not after.get((i, name), None))
"""


def test_importing_every_module_changes_nothing_in_lm_eval():
    result = python(
        SNAPSHOT
        + """
import importlib, pkgutil
models = set(lm_eval.api.registry.MODEL_REGISTRY.keys())
hook, before = sys.excepthook, snapshot()
import pdd_metrics, pdd_tasks
names = [m.name for package in (pdd_tasks, pdd_metrics)
         for m in pkgutil.walk_packages(package.__path__, package.__name__ + ".")]
for name in names:
    importlib.import_module(name)
from pdd_tasks import lm_eval_patches
print(json.dumps({
    "modules": names,
    "changed": [name for name in changed(before, snapshot()) if name not in ("sys.modules", "sys.path_importer_cache")],
    "excepthook_kept": sys.excepthook is hook,
    "new_models": sorted(set(lm_eval.api.registry.MODEL_REGISTRY.keys()) - models),
    "applied": lm_eval_patches.applied(),
}))
"""
    )
    assert {"pdd_tasks.lm_eval_patches", "pdd_tasks.tasks.base", "pdd_tasks.tasks.dataset_level"} <= set(
        result["modules"]
    )
    assert {"pdd_tasks.lm_eval_patches.__main__", "pdd_tasks.tools.cli", "pdd_tasks.tasks.custom"} <= set(
        result["modules"]
    )
    assert result["changed"] == []
    assert result["excepthook_kept"]
    assert result["applied"] == []
    assert result["new_models"] == ["hf-pdd"]  # an addition through lm-eval's registry, not a patch


def test_apply_makes_every_listed_change_once():
    # A fresh interpreter that looks like lm-eval's command line (so the excepthook patch applies),
    # with a stand-in for lm-eval's vLLM module (vLLM needs CUDA; the patch looks the class up there).
    result = python(
        SNAPSHOT
        + """
import types
sys.argv[0] = "/venv/bin/lm_eval"

class VLLM(lm_eval.api.model.TemplateLM):
    def loglikelihood(self, requests, disable_tqdm=False):
        return [(-1.0, False)] * len(requests)

sys.modules["lm_eval.models.vllm_causallms"] = types.SimpleNamespace(VLLM=VLLM)
WATCHED.append(VLLM)

class LogprobsProcessor:  # vLLM 0.32's output processing (vllm/v1/engine/logprobs.py), the parts replaced
    @classmethod
    def from_new_request(cls, tokenizer, request):
        return cls()

    def _update_prompt_logprobs(self, prompt_logprobs_tensors):
        pass

class BackgroundResources:  # vLLM 0.32's engine client cleanup (vllm/v1/engine/core_client.py)
    def __call__(self):
        pass

sys.modules["vllm"] = types.SimpleNamespace(__version__="0.32.0")
sys.modules["vllm.v1.engine.logprobs"] = types.SimpleNamespace(LogprobsProcessor=LogprobsProcessor)
sys.modules["vllm.v1.engine.core_client"] = types.SimpleNamespace(BackgroundResources=BackgroundResources)
WATCHED.extend([LogprobsProcessor, BackgroundResources])
from pdd_tasks import lm_eval_patches
before = snapshot()
lm_eval_patches.apply()
first = snapshot()
lm_eval_patches.apply()
print(json.dumps({
    "changed": changed(before, first),
    "changed_again": changed(first, snapshot()),
    "applied": lm_eval_patches.applied(),
    "listed": list(lm_eval_patches.PATCHES),
    "inherited_kept": "loglikelihood" in vars(oc.OpenAICompletionsAPI)
        and oc.OpenAICompletionsAPI.loglikelihood.__qualname__ == "OpenAICompletionsAPI.loglikelihood",
}))
"""
    )
    assert result["listed"] == [  # apply's order: the excepthook first, so that the gate's refusal is a message
        "show-user-errors",
        "hf-loglikelihood",
        "hf-seeded-generation",
        "hf-cpu-processes",
        "hf-shared-passes",
        "vllm-loglikelihood",
        "vllm-shared-passes",
        "vllm-prompt-logprob-arrays",
        "vllm-worker-prompt-stats",
        "vllm-engine-exit",
        "completions-loglikelihood",
        "chat-completions-refusal",
        "stderr-for-metric",
        "samples-after-aggregation",
        "run-tasks-to-contamination",
        "output-save-failures",
    ]
    # vllm-worker-prompt-stats is applied in vLLM's worker process only (VllmWorkerExtension; tested on
    # the real engine in test_vllm_engine.py): nothing of it in this process
    assert result["applied"] == [name for name in result["listed"] if name != "vllm-worker-prompt-stats"]
    assert result["changed"] == [
        "BackgroundResources.__call__",
        "EvaluationTracker.save_results_aggregated",
        "EvaluationTracker.save_results_samples",
        "HFLM._loglikelihood_tokens",
        "HFLM.generate_until",
        "HFLM.loglikelihood",
        "HFLM.rank",
        "HFLM.world_size",
        "LocalChatCompletion.loglikelihood",
        "LocalCompletionsAPI.loglikelihood",
        "LogprobsProcessor._update_prompt_logprobs",
        "LogprobsProcessor.from_new_request",
        "OpenAIChatCompletion.loglikelihood",
        "VLLM._loglikelihood_tokens",
        "VLLM.loglikelihood",
        "lm_eval.evaluator.evaluate",
        "lm_eval.evaluator_utils._collect_results",
        "lm_eval.evaluator_utils.stderr_for_metric",
        "sys.excepthook",
    ]
    assert result["changed_again"] == []  # idempotent
    assert result["inherited_kept"]  # OpenAICompletionsAPI keeps its own method, which calls the patched one


def test_the_vllm_patch_has_its_own_version_gate():
    """Another vLLM: the patch is not applied, with a warning naming the patch and what it costs; the
    lm-eval gate's message names lm-eval's patches only."""
    result = python(
        """
import json, logging, sys, types
messages = []
logging.basicConfig(level=logging.WARNING)
logging.getLogger().addHandler(type("H", (logging.Handler,), {"emit": lambda self, r: messages.append(r.getMessage())})())

class LogprobsProcessor:
    def _update_prompt_logprobs(self, tensors):
        pass

sys.modules["vllm"] = types.SimpleNamespace(__version__="0.40.1")
sys.modules["vllm.v1.engine.logprobs"] = types.SimpleNamespace(LogprobsProcessor=LogprobsProcessor)
from pdd_tasks import lm_eval_patches
lm_eval_patches.apply()
lm_eval_patches.apply()
print(json.dumps({"applied": lm_eval_patches.applied(), "messages": messages,
                  "lm_eval_message": lm_eval_patches.lm_eval_version_problem("0.4.99")}))
"""
    )
    assert "vllm-prompt-logprob-arrays" not in result["applied"]
    (message,) = [m for m in result["messages"] if "vllm-prompt-logprob-arrays" in m]  # once
    assert message.startswith("vLLM 0.40.1 is installed") and "not applied" in message and "0.32" in message
    assert "vllm-prompt-logprob-arrays" not in result["lm_eval_message"]
    assert "vllm-loglikelihood" in result["lm_eval_message"]


def test_the_worker_patch_is_applied_by_the_worker_extension_only():
    """vllm-worker-prompt-stats: nothing in a process until the worker extension's method runs there
    (vLLM's worker); then the runner's class carries it, suspended() gives the stock method back, and it
    is declined, with the reason, for another vLLM or a runner without the method. (On vLLM's real
    worker: tests/backends/test_vllm_engine.py.)"""
    result = python(
        """
import json, sys, types
sys.modules["vllm"] = types.SimpleNamespace(__version__="0.32.0")
from pdd_tasks import lm_eval_patches

class Runner:  # the method's owner in vLLM 0.32 (GPUModelRunner, inherited by CPUModelRunner)
    def _get_prompt_logprobs_dict(self, hidden_states, num_scheduled_tokens):
        return "stock"

class CPURunner(Runner):
    pass

patch = lm_eval_patches.WORKER_PROMPT_STATS
worker = type("Worker", (lm_eval_patches.VllmWorkerExtension,), {})()
worker.model_runner = CPURunner()
lm_eval_patches.apply()
before = patch.is_applied()
installed = worker.lm_eval_pdd_prompt_stats()
runner = CPURunner()
runner.num_prompt_logprobs, runner.requests = {}, {}
with patch.suspended():
    suspended = (patch.is_applied(), runner._get_prompt_logprobs_dict(0, {}))
marked = [cls.__name__ for cls in (Runner, CPURunner)
          if getattr(vars(cls).get("_get_prompt_logprobs_dict"), "__lm_eval_pdd_patch__", None)]
after = (patch.is_applied(), marked, runner._get_prompt_logprobs_dict(0, {}))
worker.model_runner = object()
no_method = worker.lm_eval_pdd_prompt_stats()
sys.modules["vllm"].__version__ = "0.40.1"
other = worker.lm_eval_pdd_prompt_stats()
print(json.dumps({"before": before, "installed": installed, "suspended": suspended, "after": after,
                  "no_method": no_method, "other": other}))
"""
    )
    assert result["before"] is False and result["installed"] is None
    # suspended: the stock method
    assert result["suspended"] == [False, "stock"]
    # applied on the worker's runner class, not on the class that defines the stock method; no request
    # marked: the stock method's answer
    assert result["after"] == [True, ["CPURunner"], "stock"]
    assert "vllm-worker-prompt-stats is not applied" in result["no_method"]
    assert result["other"].startswith("vLLM 0.40.1 is installed") and "vllm-worker-prompt-stats" in result["other"]


def test_the_worker_extension_path_is_the_class_and_the_one_the_docs_give():
    """vLLM imports ``worker_extension_cls`` by its dotted path in its worker process: the path the vLLM
    capture checks the engine for (named as a string in pdd_tasks.backends.vllm_worker, below this
    module) is the class's, and every ``worker_extension_cls=`` of the docs gives it."""
    module, _, name = lm_eval_patches.VLLM_WORKER_EXTENSION.rpartition(".")
    assert getattr(importlib.import_module(module), name) is lm_eval_patches.VllmWorkerExtension
    pages = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
    given = {match for page in pages for match in re.findall(r"worker_extension_cls=([\w.]+)", page.read_text())}
    assert given == {lm_eval_patches.VLLM_WORKER_EXTENSION}


def test_the_engine_exit_patch_waits_for_its_clients_threads_only():
    """vllm-engine-exit on a stand-in of vLLM 0.32's BackgroundResources: the stock cleanup runs, then the
    cleanup waits for the two daemon threads of its own client (the output thread, whose target closes
    over the cleanup's object, and the liveness monitor, over its engine manager), which the stock
    cleanup only signals; a thread of the same name of another client is left running; another vLLM:
    not applied, one warning. (On vLLM's real engine: tests/backends/test_vllm_engine.py.)"""
    result = python(
        """
import json, logging, sys, threading, time, types
messages = []
logging.basicConfig(level=logging.WARNING)
logging.getLogger().addHandler(type("H", (logging.Handler,), {"emit": lambda self, r: messages.append(r.getMessage())})())

class BackgroundResources:  # the parts of vllm/v1/engine/core_client.py the patch relies on
    def __init__(self):
        self.stop, self.engine_manager, self.calls = threading.Event(), types.SimpleNamespace(stopped=threading.Event()), []

    def __call__(self):  # signals the threads, waits for none
        self.calls.append("stock")
        self.stop.set()
        self.engine_manager.stopped.set()

def client(resources):
    ended = []
    def process_outputs_socket():  # closes over the cleanup's object, as vLLM's output thread
        resources.stop.wait()
        time.sleep(0.5)  # closing its sockets
        ended.append("output")
    engine_manager = resources.engine_manager
    def monitor_engine_cores():  # closes over the engine manager, as vLLM's liveness monitor
        engine_manager.stopped.wait()
        time.sleep(0.5)  # its poll's timeout
        ended.append("monitor")
    for target, name in ((process_outputs_socket, "EngineCoreOutputQueueThread"),
                         (monitor_engine_cores, "MPClientEngineMonitor")):
        threading.Thread(target=target, name=name, daemon=True).start()
    return ended

sys.modules["vllm"] = types.SimpleNamespace(__version__="0.32.0")
sys.modules["vllm.v1.engine.core_client"] = types.SimpleNamespace(BackgroundResources=BackgroundResources)
from pdd_tasks import lm_eval_patches
lm_eval_patches.apply()
applied = "vllm-engine-exit" in lm_eval_patches.applied()
mine, other = BackgroundResources(), BackgroundResources()
ended_mine, ended_other = client(mine), client(other)
mine()
after = (mine.calls, sorted(ended_mine), list(ended_other))
other.stop.set(); other.engine_manager.stopped.set()

class Other:
    def __call__(self):
        pass
sys.modules["vllm"] = types.SimpleNamespace(__version__="0.40.1")
sys.modules["vllm.v1.engine.core_client"] = types.SimpleNamespace(BackgroundResources=Other)
lm_eval_patches.apply()
lm_eval_patches.apply()
print(json.dumps({"applied": applied, "after": after, "messages": [m for m in messages if "vllm-engine-exit" in m],
                  "other_applied": "vllm-engine-exit" in lm_eval_patches.applied()}))
"""
    )
    assert result["applied"]
    # the stock cleanup ran once; both threads of its own client had ended when it returned, the other's not
    assert result["after"] == [["stock"], ["monitor", "output"], []]
    assert not result["other_applied"]
    (message,) = result["messages"]  # once
    assert message.startswith("vLLM 0.40.1 is installed") and "not applied" in message and "0.32" in message


def test_library_use_keeps_the_excepthook():
    """pytest is not lm-eval's command line: building a pdd task applies the patches but no excepthook."""
    from lm_eval.tasks import TaskManager

    hook = sys.excepthook
    TaskManager(include_path=tasks_path()).load("pdd_wikimia_32")
    assert sys.excepthook is hook
    assert "hf-loglikelihood" in lm_eval_patches.applied()
    assert "show-user-errors" not in lm_eval_patches.applied()


@pytest.mark.parametrize(
    "argv0, main_module, expected",
    [
        ("/venv/bin/lm_eval", None, True),
        ("/venv/bin/lm-eval", None, True),
        ("lm_eval", None, True),
        ("/venv/lib/site-packages/lm_eval/__main__.py", "lm_eval.__main__", True),  # python -m lm_eval
        ("/venv/bin/pytest", None, False),
        ("/venv/lib/site-packages/pytest/__main__.py", "pytest.__main__", False),
        # python -m pdd_tasks.lm_eval_patches, which catches a UserError itself
        ("/repo/pdd_tasks/lm_eval_patches/__main__.py", "pdd_tasks.lm_eval_patches.__main__", False),
        ("/venv/bin/lm-eval-pdd", None, False),
        ("", None, False),  # embedded interpreter, notebook kernel
        ("/home/me/lm_eval_runs/run.py", None, False),
    ],
)
def test_which_programs_count_as_lm_eval_cli(argv0, main_module, expected):
    assert lm_eval_patches.is_lm_eval_cli(argv0, main_module) is expected


def test_version_gate_names_both_versions_and_the_fix():
    message = lm_eval_patches.lm_eval_version_problem("0.4.12")
    assert message.startswith("lm-eval 0.4.12 is installed, but lm-eval-pdd works with lm-eval 0.4.13 only")
    assert "pip install 'lm-eval[hf,api]==0.4.13'" in message
    assert "hf-loglikelihood" in message and "stderr-for-metric" in message
    with pytest.raises(lm_eval_patches.UnsupportedLmEvalVersion, match=r"lm-eval 0\.5\.0 is installed") as info:
        lm_eval_patches.check_lm_eval_version("0.5.0")
    assert isinstance(info.value, UserError)  # shown without a traceback
    assert lm_eval_patches.lm_eval_version_problem("0.4.13") is None
    lm_eval_patches.check_lm_eval_version()  # the installed one passes


def test_the_gate_is_the_version_pyproject_pins():
    pins = re.findall(r'"lm-eval\[hf,api\]==([^"]+)"', (REPO / "pyproject.toml").read_text())
    assert pins == [lm_eval_patches.LM_EVAL_VERSION]


def test_doctests():
    """Every module of the package (``testmod`` of the package alone would find none: its names are
    defined in the modules it re-exports)."""
    modules = [importlib.import_module(f"pdd_tasks.lm_eval_patches.{name}") for name in PACKAGE_MODULES]
    results = [doctest.testmod(module) for module in modules]
    assert sum(result.failed for result in results) == 0
    assert sum(result.attempted for result in results) >= 5  # the version gates' and is_lm_eval_cli's


#: The modules of pdd_tasks.lm_eval_patches, in the order its __init__ imports them (that of PATCHES).
PACKAGE_MODULES = (
    "core",
    "excepthook",
    "huggingface",
    "vllm",
    "completions",
    "stderr",
    "evaluator",
    "output",
)


def test_the_package_is_its_core_and_one_module_per_target():
    """Every module of the package is one of PACKAGE_MODULES (a new one must be imported by the package's
    ``__init__``, in its place in the order), and the package's names are the modules' own."""
    import pkgutil

    found = {module.name for module in pkgutil.iter_modules(lm_eval_patches.__path__)} - {"__main__"}
    assert found == set(PACKAGE_MODULES)
    assert lm_eval_patches.apply.__module__ == "pdd_tasks.lm_eval_patches.core"
    assert lm_eval_patches.VllmWorkerExtension.__module__ == "pdd_tasks.lm_eval_patches.vllm"
    assert lm_eval_patches.PATCHES is importlib.import_module("pdd_tasks.lm_eval_patches.core").PATCHES


def test_chat_completions_refuse_per_token_requests_and_keep_their_stock_answer():
    from lm_eval.api.instance import Instance
    from lm_eval.models.openai_completions import LocalChatCompletion, OpenAIChatCompletion

    lm_eval_patches.apply()
    per_token = PerTokenRequest("loglikelihood", {}, ("", "A text."), 0, ("pdd_t", 0, 1))
    stock = Instance("loglikelihood", {}, ("A", " text."), 0, ("t", 0, 1))
    for cls, name in (
        (LocalChatCompletion, "local-chat-completions"),
        (OpenAIChatCompletion, "openai-chat-completions"),
    ):
        lm = object.__new__(cls)  # nothing is sent: the refusal comes first
        with pytest.raises(ServerCheckError, match=f"--model {name}: a chat-completions API returns no prompt"):
            lm.loglikelihood([stock, per_token])
        with pytest.raises(NotImplementedError):  # lm-eval's own answer to a stock request
            lm.loglikelihood([stock])


@pytest.mark.parametrize("cls_name", ["HFLM", "PerTokenHFLM"])
def test_cpu_processes_take_rank_and_world_size_from_the_accelerator(cls_name):
    """The condition of a multi-process CPU launch, on an HFLM object without a model (the real
    launch is tests/backends/test_multiprocess.py)."""
    from lm_eval.models.huggingface import HFLM

    from pdd_tasks.backends.hf import PerTokenHFLM

    lm_eval_patches.apply()
    cls = {"HFLM": HFLM, "PerTokenHFLM": PerTokenHFLM}[cls_name]
    lm = object.__new__(cls)
    lm._rank, lm._world_size = 0, 1
    lm.accelerator = SimpleNamespace(num_processes=2, process_index=1, device=torch.device("cpu"))
    assert (lm.rank, lm.world_size) == (1, 2)
    single = object.__new__(cls)
    single._rank, single._world_size = 0, 1
    single.accelerator = SimpleNamespace(num_processes=1, process_index=0, device=torch.device("cpu"))
    assert (single.rank, single.world_size) == (0, 1)


#: A stand-in of vLLM 0.32's engine client at exit (vllm/v1/engine/core_client.py, vllm/v1/engine/utils.py):
#: the client's finalizer is made first, its engine processes' second (so that one runs first at exit), and
#: the liveness monitor shuts the client down from its own thread when the engine processes end while the
#: client's finalizer is still alive. argv[1]: "patched" (apply the patches) or "stock". Prints, last, at
#: exit, which steps ran in which thread.
EXIT_ORDER_SCRIPT = """
import atexit, json, sys, threading, types, weakref
steps = []
atexit.register(lambda: print(json.dumps(steps), flush=True))  # registered first: runs last

class BackgroundResources:
    def __call__(self):
        steps.append(["cleanup", threading.current_thread().name])

def stop_engine_processes(ended, monitor_done):
    steps.append(["engine processes stopped", threading.current_thread().name])
    ended.set()
    monitor_done.wait(10)  # as vLLM's, this waits for the processes, long enough for the monitor to act

class Client:
    def __init__(self):
        self.resources = BackgroundResources()
        self._finalizer = weakref.finalize(self, self.resources)
        ended, monitor_done = threading.Event(), threading.Event()
        self._engine_finalizer = weakref.finalize(self, stop_engine_processes, ended, monitor_done)
        self_ref = weakref.ref(self)

        def monitor_engine_cores():
            ended.wait()
            client = self_ref()
            if client is not None and client._finalizer.alive:
                client.shutdown()
            monitor_done.set()

        threading.Thread(target=monitor_engine_cores, name="MPClientEngineMonitor", daemon=True).start()

    def shutdown(self):
        if self._finalizer.detach() is not None:
            self._engine_finalizer()
            self.resources()

sys.modules["vllm"] = types.SimpleNamespace(__version__="0.32.0")
sys.modules["vllm.v1.engine.core_client"] = types.SimpleNamespace(BackgroundResources=BackgroundResources)
client = Client()
if sys.argv[1] == "patched":
    from pdd_tasks import lm_eval_patches
    lm_eval_patches.apply()  # after the client was made, as in an lm_eval run
"""


def test_at_exit_the_engine_client_shuts_down_in_the_main_thread_first():
    """vllm-engine-exit at exit, on a stand-in of vLLM 0.32's client: the client shuts down in the main
    thread (its engine processes stopped, then its cleanup); with vLLM's own exit (stock) the engine
    processes' finalizer runs first and the monitor thread runs the client's cleanup from its own thread,
    the path that aborted (docs/vllm-exit.md, "An abort at exit"). On vLLM's real engine:
    tests/backends/test_vllm_engine.py (exit_steps)."""

    def steps(mode: str) -> list:
        process = subprocess.run(
            [sys.executable, "-c", EXIT_ORDER_SCRIPT, mode], capture_output=True, text=True, timeout=120, cwd=REPO
        )
        assert process.returncode == 0, process.stderr[-4000:]
        return json.loads(process.stdout.strip().splitlines()[-1])

    assert steps("patched") == [["engine processes stopped", "MainThread"], ["cleanup", "MainThread"]]
    assert steps("stock") == [["engine processes stopped", "MainThread"], ["cleanup", "MPClientEngineMonitor"]]


def test_architecture_doc_lists_every_patch():
    text = (REPO / "docs" / "architecture.md").read_text()
    section = text.split("## Changes to lm-eval's behaviour", 1)[1].split("\n## ", 1)[0]
    for name in lm_eval_patches.PATCHES:
        assert f"`{name}`" in section, name


# -- a user's mistake under lm-eval's own command line: the message, no traceback ---------------------


def exchangeability_data(tmp_path: Path) -> Path:
    data = tmp_path / "benchmark.jsonl"
    data.write_text("".join(json.dumps({"text": f"Example number {i}."}) + "\n" for i in range(8)))
    return data


def test_lm_eval_cli_shows_a_user_mistake_without_a_traceback(tiny_model, tmp_path):
    metadata = {"data_files": str(exchangeability_data(tmp_path)), "num_shards": 2, "permutations": 0}
    process = run_lm_eval(
        ["--model", "hf", "--model_args", f"pretrained={tiny_model}", "--device", "cpu",
         "--include_path", tasks_path(), "--tasks", "pdd_exchangeability", "--metadata", json.dumps(metadata)],
        cwd=tmp_path,
        check=False,
        process=True,  # the excepthook is set in lm-eval's own program: this is what is tested
    )  # fmt: skip
    assert process.returncode == 1, process.stderr[-3000:]
    assert "Traceback" not in process.stderr and "\n  File " not in process.stderr, process.stderr[-3000:]
    assert (
        "error: SettingError: pdd_exchangeability: metadata permutations=0: expected a whole number >= 1."
        in process.stderr
    )


def test_python_m_pdd_tasks_lm_eval_patches_shows_a_user_mistake_without_a_traceback(
    tiny_model, tmp_path, monkeypatch, capsys
):
    """Our own entry point catches the UserError (in this process: no excepthook is involved)."""
    from pdd_tasks.lm_eval_patches.__main__ import main

    metadata = {"data_files": str(exchangeability_data(tmp_path)), "num_shards": 1}
    monkeypatch.setattr(
        sys,
        "argv",
        ["-m", "--model", "hf-pdd", "--model_args", f"pretrained={tiny_model}", "--device", "cpu",
         "--include_path", tasks_path(), "--tasks", "pdd_exchangeability", "--metadata", json.dumps(metadata)],
    )  # fmt: skip
    hook = sys.excepthook
    assert main() == 1
    assert (
        "error: SettingError: pdd_exchangeability: metadata num_shards=1: expected a whole number >= 2."
        in capsys.readouterr().err
    )
    assert sys.excepthook is hook
