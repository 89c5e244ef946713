"""Server-side validation of a create (step 9 of the reference-backend spec), deterministic.

In order, the first failing check answers:
1. the manifest parses with the package's own strict schema (same parser as the client's gate 2)
   else 422 `validation_rejected` reason `manifest_invalid`;
2. capacity: parameter_count x 16 bytes must fit the booking's GPU memory (80 GB per GPU),
   else reason `capacity`;
3. fabric: a multi-node booking needs infiniband or roce, else reason `fabric`;
4. data policy: every data URI scheme is one the account allows, else reason `data_policy`;
5. checkpoint storage starts with one of the account's allowed prefixes, else `checkpoint_storage`;
6. budget: max_incremental_cost_usd <= the confirmation's max_cost_usd, else 402 `budget_exceeded`
   reason `above_confirmed_cost`; ceiling_usd <= the account's budget limit, else reason
   `above_account_limit`.
Money is compared as Decimal, never float.
"""

from __future__ import annotations

import json
import re
import sqlite3
from decimal import Decimal

from ..errors import ManifestRefusal
from ..manifest import TrainingManifest, parse_manifest
from .errors import ApiError
from .lifecycle import Plan, stage_names

DEFAULT_DATA_SCHEMES = ("s3", "gs", "az", "hf", "ito")
DEFAULT_CHECKPOINT_PREFIXES = ("s3://", "gs://", "ito://")
DEFAULT_BUDGET_LIMIT_USD = "100000.00"
GPU_MEMORY_BYTES = 80 * 10**9
BYTES_PER_PARAMETER = 16
MULTI_NODE_FABRICS = frozenset({"infiniband", "roce"})


def _rejected(reason: str, message: str) -> ApiError:
    return ApiError(422, "validation_rejected", message, reason=reason)


def validate(
    manifest_bytes: bytes, booking: sqlite3.Row, account: sqlite3.Row, confirmed_max_cost_usd: str
) -> TrainingManifest:
    try:
        manifest = parse_manifest(manifest_bytes)
    except ManifestRefusal as refusal:
        raise _rejected(
            "manifest_invalid", f"The manifest does not pass ito.training.manifest.v1 ({refusal.code.value})."
        ) from None
    gpus = int(booking["nodes"]) * int(booking["gpus_per_node"])
    if manifest.model.parameter_count * BYTES_PER_PARAMETER > gpus * GPU_MEMORY_BYTES:
        raise _rejected("capacity", f"The model does not fit the booking's {gpus} GPU(s) at 16 bytes per parameter.")
    if int(booking["nodes"]) > 1 and str(booking["fabric"]).lower() not in MULTI_NODE_FABRICS:
        raise _rejected("fabric", "A multi-node booking needs an infiniband or roce fabric.")
    schemes = set(json.loads(account["data_schemes"]))
    if any(ref.uri.split("://", 1)[0] not in schemes for ref in manifest.data):
        raise _rejected("data_policy", "A data reference uses a URI scheme this account does not allow.")
    prefixes = tuple(json.loads(account["checkpoint_prefixes"]))
    if not manifest.checkpoints.storage.startswith(prefixes):
        raise _rejected("checkpoint_storage", "The checkpoint storage is outside this account's allowed locations.")
    if manifest.budget.max_incremental_cost_usd > Decimal(confirmed_max_cost_usd):
        raise ApiError(402, "budget_exceeded", "max_incremental_cost_usd is above the confirmed max_cost_usd.",
                       reason="above_confirmed_cost")
    if manifest.budget.ceiling_usd > Decimal(account["budget_limit_usd"]):
        raise ApiError(402, "budget_exceeded", "ceiling_usd is above this account's budget limit.",
                       reason="above_account_limit")
    return manifest


def plan_for(manifest: TrainingManifest) -> tuple[Plan, list[str]]:
    """The run's plan and stage names, derived from a validated manifest."""
    suite = re.sub(r"[^A-Za-z0-9._-]", "_", manifest.data[0].decontamination.eval_suites[0])[:64]
    plan = Plan(
        target=manifest.target.value,
        parameter_count=manifest.model.parameter_count,
        checkpoint_storage=manifest.checkpoints.storage,
        interval_steps=manifest.checkpoints.interval_steps,
        retain_last=manifest.checkpoints.retain_last,
        suite=suite,
        max_incremental_usd=f"{manifest.budget.max_incremental_cost_usd:.2f}",
    )
    return plan, stage_names(manifest.target.value, [s.value for s in manifest.post_training])
