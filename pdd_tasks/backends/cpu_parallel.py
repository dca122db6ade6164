"""CPU data parallelism for lm-eval's HF backend: split the documents over the processes of a launch."""

from __future__ import annotations

import logging


logger = logging.getLogger(__name__)


def adopt_accelerator_processes(lm) -> None:
    """Give an ``HFLM`` the rank and world size of a multi-process launch on CPU (once per object).

    Under ``accelerate launch --multi_gpu --num_processes N`` (or ``torchrun --nproc_per_node N``) on
    a machine without GPUs, lm-eval 0.4.13's ``HFLM`` creates an ``Accelerator`` with N processes but
    takes its rank and world size from it only when it counts more than one GPU, so every process
    scores every document as rank 0 of 1 and writes its own results. Called before ``rank`` and
    ``world_size`` are read, this sets them from the accelerator in that case (CPU device, N > 1,
    HFLM left at 1 process), so the harness splits the documents and gathers the per-document
    metrics on rank 0, as on GPUs. Runs that HFLM already distributes, and single-process runs, are
    unchanged. ``PerTokenHFLM`` calls it from its own ``rank``/``world_size``; lm-eval's ``HFLM``
    through :mod:`pdd_tasks.lm_eval_patches`.
    """
    if lm.__dict__.get("_pdd_processes_checked"):
        return
    lm._pdd_processes_checked = True
    accelerator = getattr(lm, "accelerator", None)
    if (
        accelerator is not None
        and accelerator.num_processes > 1
        and getattr(lm, "_world_size", 1) == 1
        and accelerator.device.type == "cpu"
    ):
        lm._rank, lm._world_size = accelerator.process_index, accelerator.num_processes
        logger.info("CPU data parallelism: process %d of %d", lm._rank, lm._world_size)
