"""Server-side validation of a manifest, and the cost estimate. Deterministic; one implementation.

The checks, in order (`CHECK_NAMES`):
1. manifest: the bytes parse with the package's own strict schema (the client's gate-2 parser),
   else reason `manifest_invalid`. When it fails nothing else can be checked;
2. capacity: parameter_count x 16 bytes must fit the booking's GPU memory (80 GB per GPU),
   else reason `capacity`;
3. fabric: a multi-node booking needs infiniband or roce, else reason `fabric`;
4. parallelism: the layout `parallelism.choose` picks for the model on the booking (data, tensor and
   pipeline degrees, FSDP sharding, bf16 or fp8) is not wasteful, else its reason
   (`tensor_across_nodes`, `memory`, `idle_nodes`, `too_many_gpus`) and why;
5. data_policy: every data URI scheme is one the account allows, else reason `data_policy`;
6. checkpoint_storage: the storage starts with one of the account's allowed prefixes, else
   reason `checkpoint_storage`;
7. budget: max_incremental_cost_usd <= the confirmation's max_cost_usd (create only: a plan has
   no confirmation yet), else reason `above_confirmed_cost`; ceiling_usd <= the account's budget
   limit, else reason `above_account_limit`.

`validate` (create) raises the first failure as an `ApiError`: 422 `validation_rejected`, or 402
`budget_exceeded` for the budget. `evaluate` (plan) runs them all and reports each. Money is
compared as Decimal, never float.

The estimate (`estimate`) is documented in its docstring; it is an estimate, never a cap. It follows
from the layout (fp8 and pipeline stages change a training stage's hours) and from the data: custom
data (`curriculum.has_custom_data`) adds the ladder stage and its own line.
"""

from __future__ import annotations

import json
import math
import re
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Decimal
from typing import Any

from ito_training_mcp.errors import ManifestRefusal
from ito_training_mcp.gates.manifest.schema import TrainingManifest, parse_manifest

from . import curriculum, parallelism
from .errors import ApiError
from .lifecycle import Plan

DEFAULT_DATA_SCHEMES = ("s3", "gs", "az", "hf", "ito")
DEFAULT_CHECKPOINT_PREFIXES = ("s3://", "gs://", "ito://")
DEFAULT_BUDGET_LIMIT_USD = "100000.00"
GPU_MEMORY_BYTES = 80 * 10**9
BYTES_PER_PARAMETER = 16
MULTI_NODE_FABRICS = frozenset({"infiniband", "roce"})
CHECK_NAMES = ("manifest", "capacity", "fabric", "parallelism", "data_policy", "checkpoint_storage", "budget")

# The estimate's constants: GPU-hours per billion parameters for each kind of stage, and the price.
GPU_HOURS_PER_BILLION = {
    "data_prep": Decimal("0.5"),
    "ladder": Decimal("40"),  # per billion proxy parameters: LADDER_RUNS runs of ~150M, whatever the model's size
    "pretrain": Decimal("200"),
    "mid_train": Decimal("50"),
    "long_context": Decimal("25"),
    "continued_pretrain": Decimal("60"),
    "sft": Decimal("4"),
    "dpo": Decimal("3"),
    "rlvr": Decimal("8"),
}
GPU_HOUR_RATE_USD = Decimal("2.50")


@dataclass(frozen=True)
class Failure:
    """One failed check: what create raises and what a plan reports."""

    status: int
    code: str
    reason: str
    message: str

    def error(self) -> ApiError:
        return ApiError(self.status, self.code, self.message, reason=self.reason)


@dataclass(frozen=True)
class Inputs:
    manifest: TrainingManifest
    booking: sqlite3.Row
    account: sqlite3.Row
    confirmed_max_cost_usd: str | None


def _rejected(reason: str, message: str) -> Failure:
    return Failure(422, "validation_rejected", reason, message)


def _gpus(booking: sqlite3.Row) -> int:
    return int(booking["nodes"]) * int(booking["gpus_per_node"])


def _capacity(x: Inputs) -> Failure | None:
    gpus = _gpus(x.booking)
    if x.manifest.model.parameter_count * BYTES_PER_PARAMETER > gpus * GPU_MEMORY_BYTES:
        return _rejected("capacity", f"The model does not fit the booking's {gpus} GPU(s) at 16 bytes per parameter.")
    return None


def _fabric(x: Inputs) -> Failure | None:
    if int(x.booking["nodes"]) > 1 and str(x.booking["fabric"]).lower() not in MULTI_NODE_FABRICS:
        return _rejected("fabric", "A multi-node booking needs an infiniband or roce fabric.")
    return None


def layout(manifest: TrainingManifest, booking: sqlite3.Row) -> parallelism.Layout:
    return parallelism.choose(manifest.model.parameter_count, int(booking["nodes"]), int(booking["gpus_per_node"]),
                              str(booking["gpu"]), str(booking["fabric"]))


def _parallelism(x: Inputs) -> Failure | None:
    refusal = layout(x.manifest, x.booking).refusal
    return None if refusal is None else _rejected(*refusal)


def _data_policy(x: Inputs) -> Failure | None:
    schemes = set(json.loads(x.account["data_schemes"]))
    if any(ref.uri.split("://", 1)[0] not in schemes for ref in x.manifest.data):
        return _rejected("data_policy", "A data reference uses a URI scheme this account does not allow.")
    return None


def _checkpoint_storage(x: Inputs) -> Failure | None:
    prefixes = tuple(json.loads(x.account["checkpoint_prefixes"]))
    if not x.manifest.checkpoints.storage.startswith(prefixes):
        return _rejected("checkpoint_storage", "The checkpoint storage is outside this account's allowed locations.")
    return None


def _budget(x: Inputs) -> Failure | None:
    budget = x.manifest.budget
    if x.confirmed_max_cost_usd is not None and budget.max_incremental_cost_usd > Decimal(x.confirmed_max_cost_usd):
        return Failure(402, "budget_exceeded", "above_confirmed_cost",
                       "max_incremental_cost_usd is above the confirmed max_cost_usd.")
    if budget.ceiling_usd > Decimal(x.account["budget_limit_usd"]):
        return Failure(402, "budget_exceeded", "above_account_limit",
                       "ceiling_usd is above this account's budget limit.")
    return None


_CHECKS: tuple[tuple[str, Callable[[Inputs], Failure | None]], ...] = (
    ("capacity", _capacity),
    ("fabric", _fabric),
    ("parallelism", _parallelism),
    ("data_policy", _data_policy),
    ("checkpoint_storage", _checkpoint_storage),
    ("budget", _budget),
)


def _parse(manifest_bytes: bytes) -> TrainingManifest | Failure:
    try:
        return parse_manifest(manifest_bytes)
    except ManifestRefusal as refusal:
        return _rejected("manifest_invalid",
                         f"The manifest does not pass ito.training.manifest.v1 ({refusal.code.value}).")


def validate(
    manifest_bytes: bytes, booking: sqlite3.Row, account: sqlite3.Row, confirmed_max_cost_usd: str
) -> TrainingManifest:
    """Create's validation: the first failing check is raised as an `ApiError`."""
    parsed = _parse(manifest_bytes)
    if isinstance(parsed, Failure):
        raise parsed.error()
    inputs = Inputs(parsed, booking, account, confirmed_max_cost_usd)
    for _name, check in _CHECKS:
        failure = check(inputs)
        if failure is not None:
            raise failure.error()
    return parsed


def evaluate(
    manifest_bytes: bytes, booking: sqlite3.Row, account: sqlite3.Row
) -> tuple[TrainingManifest | None, list[dict[str, Any]]]:
    """A plan's validation: every check, each reported as passed or failed (no confirmation yet)."""
    parsed = _parse(manifest_bytes)
    if isinstance(parsed, Failure):
        return None, [_report("manifest", parsed)]
    inputs = Inputs(parsed, booking, account, None)
    return parsed, [_report("manifest", None), *(_report(name, check(inputs)) for name, check in _CHECKS)]


def _report(name: str, failure: Failure | None) -> dict[str, Any]:
    if failure is None:
        return {"name": name, "status": "passed", "reason": None, "message": None}
    return {"name": name, "status": "failed", "reason": failure.reason, "message": failure.message}


def names_for(manifest: TrainingManifest) -> list[str]:
    custom = curriculum.has_custom_data([ref.uri for ref in manifest.data])
    return curriculum.stage_names(manifest.target.value, [s.value for s in manifest.post_training], custom)


def _stage_hours(manifest: TrainingManifest, booking: sqlite3.Row) -> tuple[int, list[tuple[str, int]]]:
    """The booking's GPU count and, per stage of the run, the whole hours it holds the booking."""
    gpus = _gpus(booking)
    factor = Decimal(str(layout(manifest, booking).hours_factor))
    billions = Decimal(manifest.model.parameter_count) / Decimal(10**9)
    ladder = Decimal(curriculum.LADDER_RUNS * curriculum.LADDER_PROXY_PARAMETERS) / Decimal(10**9)

    def work(name: str) -> Decimal:
        if name == "ladder":
            return GPU_HOURS_PER_BILLION[name] * ladder
        return GPU_HOURS_PER_BILLION[name] * billions * (factor if name not in curriculum.NOT_TRAINING else 1)

    return gpus, [(name, max(1, math.ceil(work(name) / gpus))) for name in names_for(manifest)]


def _usd(gpu_hours: int) -> Decimal:
    return (Decimal(gpu_hours) * GPU_HOUR_RATE_USD).quantize(Decimal("0.01"), rounding=ROUND_HALF_UP)


def estimate(manifest: TrainingManifest, booking: sqlite3.Row) -> dict[str, Any]:
    """GPU-hours and USD for a manifest on a booking; deterministic, not a cap.

    For each stage the run will have (the same stage list the run gets), the stage needs
    `GPU_HOURS_PER_BILLION[stage] x parameters / 1e9` GPU-hours of work at bf16 on one pipeline
    stage; a training stage's work is multiplied by the layout's `hours_factor` (fp8 takes 0.75 of
    the time, each pipeline stage beyond the first adds 1/16 for the bubble). The ladder's work is
    fixed: `LADDER_RUNS` proxies of ~150M parameters, whatever the model's size. Each stage
    occupies the whole booking for its work divided by the booking's GPU count, rounded UP to
    whole hours. The estimate is the sum over stages of those hours times the GPU count, priced at
    `GPU_HOUR_RATE_USD` per GPU-hour (exact in cents). `stages` breaks it down per stage, in run
    order; a run accrues its cost by this breakdown as its stage gates pass (`plan_for`).
    """
    gpus, stages = _stage_hours(manifest, booking)
    chosen = layout(manifest, booking)
    gpu_hours = sum(hours for _, hours in stages) * gpus
    names = [name for name, _ in stages]
    ladder = (f" The data is not on the backend's list of known datasets, so a ladder of {curriculum.LADDER_RUNS} "
              "~150M-parameter proxy runs checks it first." if "ladder" in names else "")
    basis = (f"{len(names)} stage(s) ({', '.join(names)}), each a fixed number of GPU-hours per billion parameters "
             f"for its kind, at {chosen.precision} with {chosen.pipeline} pipeline stage(s) for the training stages, "
             f"rounded up to whole hours on the booking's {gpus} GPU(s), at {GPU_HOUR_RATE_USD} USD per GPU-hour."
             + ladder)
    return {"usd": f"{_usd(gpu_hours):.2f}", "gpu_hours": float(gpu_hours), "basis": basis,
            "stages": [{"name": name, "gpu_hours": float(hours * gpus), "usd": f"{_usd(hours * gpus):.2f}"}
                       for name, hours in stages]}


def plan_for(manifest: TrainingManifest, booking: sqlite3.Row) -> tuple[Plan, list[str]]:
    """The run's plan and stage names, derived from a validated manifest on its booking. The plan
    carries the estimate's per-stage cost, which the run accrues as its gates pass (capped by the
    confirmed maximum)."""
    gpus, stages = _stage_hours(manifest, booking)
    names = [name for name, _ in stages]
    suite = re.sub(r"[^A-Za-z0-9._-]", "_", manifest.data[0].decontamination.eval_suites[0])[:64]
    plan = Plan(
        target=manifest.target.value,
        parameter_count=manifest.model.parameter_count,
        checkpoint_storage=manifest.checkpoints.storage,
        interval_steps=manifest.checkpoints.interval_steps,
        retain_last=manifest.checkpoints.retain_last,
        suite=suite,
        max_incremental_usd=f"{manifest.budget.max_incremental_cost_usd:.2f}",
        stage_usd=tuple(f"{_usd(hours * gpus):.2f}" for _, hours in stages),
        gpus=gpus,
        layout=layout(manifest, booking).as_json(),
    )
    return plan, names
