"""The built-in job templates (created idempotently by ``seed_demo`` and by tests)."""

from __future__ import annotations

from typing import Any

from jobs.models import JobTemplate
from portal.services import instance_save

SINGLE_NODE_GPU = "Single-node GPU job"
TORCHRUN = "Distributed PyTorch (torchrun)"

_SINGLE = """#!/bin/bash
# One task on one node with its GPUs (CUDA_VISIBLE_DEVICES is set by Slurm).
echo "job $SLURM_JOB_ID on $(hostname): GPUs $CUDA_VISIBLE_DEVICES"
nvidia-smi --query-gpu=name,memory.total --format=csv 2>/dev/null || echo "nvidia-smi not available"
# python train.py --batch-size 32
echo done
"""

_TORCHRUN = """#!/bin/bash
# Multi-node distributed PyTorch: one torchrun launcher per node, one worker per GPU.
# The first node of the job is the rendezvous point (MASTER_ADDR/MASTER_PORT).
export MASTER_ADDR=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)
export MASTER_PORT=29500
export NCCL_DEBUG=INFO
# export NCCL_SOCKET_IFNAME=ib0   # the InfiniBand interface, if any
echo "nodes: $SLURM_JOB_NODELIST  master: $MASTER_ADDR:$MASTER_PORT"
srun torchrun \\
  --nnodes="$SLURM_JOB_NUM_NODES" \\
  --nproc_per_node="${SLURM_GPUS_ON_NODE:-1}" \\
  --rdzv_id="$SLURM_JOB_ID" --rdzv_backend=c10d --rdzv_endpoint="$MASTER_ADDR:$MASTER_PORT" \\
  train.py --batch-size 32 --lr 5e-5 --epochs 3
"""

BUILTIN_TEMPLATES: list[dict[str, Any]] = [
    {
        "name": SINGLE_NODE_GPU,
        "description": "One node, one task, the GPUs you ask for.",
        "script": _SINGLE,
        "defaults": {
            "nodes": 1,
            "ntasks_per_node": 1,
            "cpus_per_task": 4,
            "gpus": 1,
            "time_limit": 60,
            "output": "%x-%j.out",
        },
        "locked_fields": ["nodes"],
    },
    {
        "name": TORCHRUN,
        "description": "torchrun across several nodes (the cluster guide's distributed training job).",
        "script": _TORCHRUN,
        "defaults": {
            "nodes": 2,
            "ntasks_per_node": 1,
            "cpus_per_task": 8,
            "gpus": 4,
            "time_limit": 1440,
            "output": "%x-%j.out",
            "environment": {"OMP_NUM_THREADS": "8"},
        },
        "locked_fields": ["ntasks_per_node"],
    },
]


def jobs_seed_templates(*, user: Any = None) -> list[JobTemplate]:
    """Create the built-in templates that do not exist yet (by name); existing ones are kept as
    the admins edited them."""
    out = []
    for spec in BUILTIN_TEMPLATES:
        template = JobTemplate.objects.filter(name=spec["name"]).first()
        if template is None:
            template = instance_save(JobTemplate(**spec), user=user)
        out.append(template)
    return out
