"""Parallelism and precision: the layout the reference backend chooses for a model on a booking.

`choose` is the whole model, one rule after another, deterministic and small enough to check by
hand. It is what a plan reports (`parallelism`), what its `parallelism` check refuses when the
layout would waste the booking, and what the estimate's training stages are timed by
(`Layout.hours_factor`). It trains nothing: the numbers are rules of thumb, not measurements.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

BYTES_PER_PARAMETER = 16  # bf16 weights and gradients, fp32 master weights and two Adam moments
USABLE_MEMORY = 0.8  # of each GPU's memory, for the training state; the rest is activations and buffers
DEFAULT_GPU_MEMORY_GB = 80
FP8_GPUS = ("H100", "H200", "H800", "B100", "B200", "GB200", "L40S")  # tensor cores with FP8
FP8_MIN_PARAMETERS = 10**9  # below this, FP8's scaling overhead eats its gain
FP8_HOURS = 0.75  # FP8 training stages take this share of their bf16 time
# Tensor-parallel degree by model size: wider layers split over more GPUs; never more than 8.
TENSOR_BY_SIZE = ((13 * 10**9, 1), (34 * 10**9, 2), (70 * 10**9, 4))
MAX_TENSOR = 8
FAST_FABRICS = frozenset({"infiniband", "roce", "nvlink"})
PARAMETERS_PER_BUSY_GPU = 25 * 10**6  # a model keeps at most one GPU busy per this many parameters
MICRO_BATCHES = 16  # per pipeline step: the bubble costs (stages - 1) / MICRO_BATCHES


@dataclass(frozen=True)
class Layout:
    """The chosen degrees, precision and the reasons; `refusal` is `(reason, message)` when wasteful."""

    gpus: int
    data: int
    tensor: int
    pipeline: int
    sharding: str  # none | within_node: FSDP over each node's GPUs, replicated across nodes
    precision: str  # bf16 | fp8
    reasons: tuple[str, ...]
    refusal: tuple[str, str] | None = None
    hours_factor: float = 1.0

    def as_json(self) -> dict[str, Any]:
        return {"gpus": self.gpus, "data": self.data, "tensor": self.tensor, "pipeline": self.pipeline,
                "sharding": self.sharding, "precision": self.precision, "reasons": list(self.reasons)}


def gpu_memory_bytes(gpu: str) -> int:
    """The memory a GPU label names ("H100-80GB"), else the default."""
    found = re.search(r"(\d{1,4})\s*GB", gpu, re.IGNORECASE)
    return (int(found.group(1)) if found else DEFAULT_GPU_MEMORY_GB) * 10**9


def supports_fp8(gpu: str) -> bool:
    return gpu.upper().startswith(FP8_GPUS)


def _size(parameters: int) -> str:
    return f"{parameters / 10**9:.3g}B" if parameters >= 10**9 else f"{parameters / 10**6:.3g}M"


def choose(parameters: int, nodes: int, gpus_per_node: int, gpu: str, fabric: str) -> Layout:
    """The layout for a model of `parameters` on `nodes` x `gpus_per_node` GPUs, in six rules:

    1. precision: fp8 where the GPU has FP8 tensor cores and the model has at least 1B parameters,
       else bf16; an fp8 training stage takes `FP8_HOURS` of its bf16 time;
    2. tensor: by model size (`TENSOR_BY_SIZE`: 1 below 13B, 2 below 34B, 4 below 70B, else 8), kept
       within a node when the node has that many GPUs;
    3. memory: the training state (16 bytes per parameter) over 80% of each GPU's memory needs `k`
       GPUs. Within one tensor group (k <= tensor): no sharding. Within a node: FSDP over the node's
       GPUs, replicated across nodes. Beyond a node: pipeline stages of one node each, as many as
       the state needs (cross-node traffic is then only activations between stages); the bubble
       costs (stages - 1) / 16 more time;
    4. data: the GPUs left, tensor x pipeline GPUs per replica;
    5. refused as wasteful, first match: tensor parallelism across nodes without a fast fabric
       (`tensor_across_nodes`); a state that does not fit even with every GPU (`memory`); nodes a
       pipeline cannot use (`idle_nodes`); more GPUs than the model keeps busy, one per 25M
       parameters (`too_many_gpus`).
    """
    gpus = nodes * gpus_per_node
    size = _size(parameters)
    fast = fabric.lower() in FAST_FABRICS
    reasons: list[str] = []
    fp8 = supports_fp8(gpu) and parameters >= FP8_MIN_PARAMETERS
    precision = "fp8" if fp8 else "bf16"
    if fp8:
        reasons.append(f"fp8: {gpu} has FP8 tensor cores and a model of {size} parameters gains from them "
                       "(master weights and optimizer state stay in higher precision).")
    elif parameters < FP8_MIN_PARAMETERS:
        reasons.append("bf16: below 1B parameters FP8's scaling overhead eats its gain.")
    else:
        reasons.append(f"bf16: {gpu} has no FP8 tensor cores.")

    tensor = next((degree for limit, degree in TENSOR_BY_SIZE if parameters < limit), MAX_TENSOR)
    refusal: tuple[str, str] | None = None
    if tensor > gpus_per_node:
        if not fast and nodes > 1:
            refusal = ("tensor_across_nodes",
                       f"A model of {size} parameters needs tensor parallelism over {tensor} GPUs, more than a node's "
                       f"{gpus_per_node}: it would cross nodes over {fabric}, which is too slow for it. "
                       "Book nodes with more GPUs, or an infiniband or roce fabric.")
        reasons.append(f"tensor {tensor}: the layers of a model of {size} parameters are split over {tensor} GPUs; "
                       f"that crosses nodes ({gpus_per_node} GPU(s) each) over {fabric}.")
    elif tensor > 1:
        reasons.append(f"tensor {tensor}: the layers of a model of {size} parameters are split over {tensor} GPUs "
                       "of one node (NVLink).")
    else:
        reasons.append(f"tensor 1: the layers of a model of {size} parameters fit one GPU's compute.")
    tensor = min(tensor, gpus)

    state = BYTES_PER_PARAMETER * parameters
    per_gpu = USABLE_MEMORY * gpu_memory_bytes(gpu)
    needed = max(1, math.ceil(state / per_gpu))
    state_gb = f"{state / 10**9:,.0f} GB"
    pipeline, sharding = 1, "none"
    if needed <= tensor:
        reasons.append(f"no sharding: the training state ({state_gb}) fits {tensor} GPU(s) at 80% of their memory.")
    elif needed <= gpus_per_node:
        sharding = "within_node"
        reasons.append(f"FSDP within each node: the training state ({state_gb}) needs {needed} GPUs; sharded over a "
                       "node's GPUs, replicated across nodes (only gradients cross nodes).")
    else:
        pipeline = math.ceil(needed / gpus_per_node)
        sharding = "within_node"
        reasons.append(f"pipeline {pipeline}: the training state ({state_gb}) needs {needed} GPUs, more than a node; "
                       f"{pipeline} stages of one node each, FSDP within each (the bubble adds "
                       f"{(pipeline - 1) / MICRO_BATCHES:.0%} time).")
    replica = tensor * pipeline
    data = gpus // replica
    if data:
        reasons.append(f"data {data}: {gpus} GPU(s) hold {data} replica(s) of {replica} GPU(s).")
    else:
        reasons.append(f"data 0: one replica needs {replica} GPU(s); the booking has {gpus}.")

    if refusal is None and (needed > gpus or pipeline > nodes or not data):
        refusal = ("memory", f"The training state of a model of {size} parameters ({state_gb}, 16 bytes per "
                             "parameter) does not "
                             f"fit {gpus} GPU(s) at 80% of {gpu_memory_bytes(gpu) // 10**9} GB each, even sharded.")
    if refusal is None and nodes % pipeline:
        idle = nodes % pipeline
        refusal = ("idle_nodes", f"{pipeline} pipeline stages of one node each leave {idle} of {nodes} node(s) idle. "
                                 f"Book a multiple of {pipeline} nodes.")
    busy = max(1, parameters // PARAMETERS_PER_BUSY_GPU)
    if refusal is None and gpus > busy:
        refusal = ("too_many_gpus", f"A model of {size} parameters keeps at most {busy} GPU(s) busy (one per 25M "
                                    "parameters; "
                                    f"below that communication outweighs compute); the booking has {gpus}. "
                                    "Book fewer GPUs.")
    hours = (FP8_HOURS if fp8 else 1.0) * (1 + (pipeline - 1) / MICRO_BATCHES)
    return Layout(gpus=gpus, data=data, tensor=tensor, pipeline=pipeline, sharding=sharding, precision=precision,
                  reasons=tuple(reasons), refusal=refusal, hours_factor=hours)
