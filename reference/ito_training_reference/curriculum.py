"""What a run's stages are, what each stage's gate evaluates, and how the RL stage splits the GPUs.

A run is `data_prep`, then `ladder` when the manifest has custom data, then the target's
curriculum (`pretrain` -> `mid_train` -> `long_context`, or `continued_pretrain` ->
`long_context`), then the post-training recipe in the manifest's order (sft, dpo, rlvr; an `rl`
target always ends with rlvr). Every stage's gate runs a fixed, named eval battery (`BATTERIES`):
the same evals every time, so gates are comparable across runs. Evals are deterministic numbers,
never measurements: the reference backend trains nothing.

Custom data is data whose URI is not under one of the backend's known datasets
(`KNOWN_DATASETS`): a ladder of ~150M-parameter proxy runs on it is the cheap decision before the
expensive stages, and a failed ladder gate ends the run before they start.
"""

from __future__ import annotations

from typing import Any

KNOWN_DATASETS = (
    "hf://datasets/HuggingFaceFW/fineweb-edu",
    "hf://datasets/allenai/dolma",
    "hf://datasets/allenai/tulu-3-sft-mixture",
    "ito://datasets/",
)
LADDER_PROXY_PARAMETERS = 150_000_000
LADDER_RUNS = 4
TARGET_STAGES = {
    "pretrain": ("pretrain", "mid_train", "long_context"),
    "continued_pretrain": ("continued_pretrain", "long_context"),
    "fine_tune": (),
    "rl": (),
}
NOT_TRAINING = frozenset({"data_prep", "ladder"})  # stages that do not move the model's own steps
# Each stage's battery: its name and the evals it always reports ("{suite}" is the manifest's first eval suite).
BATTERIES: dict[str, tuple[str, tuple[str, ...]]] = {
    "data_prep": ("data-prep-v1", ("dedup_removed_fraction", "decontamination_overlap")),
    "ladder": ("ladder-150m-v1", ("proxy_loss", "reference_loss", "score/{suite}")),
    "pretrain": ("pretrain-core-v1", ("loss", "eval_loss", "score/{suite}")),
    "mid_train": ("mid-train-v1", ("loss", "eval_loss", "score/{suite}", "score/gsm8k")),
    "long_context": ("long-context-v1", ("loss", "eval_loss", "score/{suite}", "needle_recall_128k")),
    "continued_pretrain": ("continued-pretrain-v1", ("loss", "eval_loss", "score/{suite}")),
    "sft": ("sft-v1", ("loss", "eval_loss", "score/{suite}", "instruction_following")),
    "dpo": ("dpo-v1", ("loss", "eval_loss", "score/{suite}", "reward_margin")),
    "rlvr": ("rlvr-v1", ("loss", "eval_loss", "score/{suite}", "verifier_pass_rate")),
}
# RLVR: GRPO with the DAPO stability fixes; rollouts run on GPUs of their own, at most this many policy
# versions behind the trainer.
RL_ALGORITHM = "grpo"
RL_STABILITY_FIXES = ("clip_higher", "dynamic_sampling", "token_level_loss", "overlong_reward_shaping")
RL_STALENESS_BOUND = 2


def is_known(uri: str, known: tuple[str, ...] = KNOWN_DATASETS) -> bool:
    return any(uri == prefix.rstrip("/") or uri.startswith(prefix.rstrip("/") + "/") for prefix in known)


def has_custom_data(uris: list[str], known: tuple[str, ...] = KNOWN_DATASETS) -> bool:
    return any(not is_known(uri, known) for uri in uris)


def stage_names(target: str, post_training: list[str], custom_data: bool = False) -> list[str]:
    names = ["data_prep", *(["ladder"] if custom_data else []), *TARGET_STAGES[target], *post_training]
    if target == "rl" and "rlvr" not in post_training:
        names.append("rlvr")
    return names


def battery(name: str, suite: str) -> dict[str, Any]:
    title, evals = BATTERIES[name]
    return {"name": title, "evals": [e.format(suite=suite) for e in evals]}


def new_stages(names: list[str], suite: str) -> list[dict[str, Any]]:
    return [{"name": n, "state": "pending", "gate": {"status": "pending", "evals": {}, "battery": battery(n, suite)}}
            for n in names]


def passing_evals(name: str, suite: str, k: int) -> dict[str, float]:
    """The battery's results when the gate passes; `k` is the count of training stages passed with this one:
    the loss falls and the suite score rises with each."""
    if name == "data_prep":
        return {"dedup_removed_fraction": 0.041, "decontamination_overlap": 0.0}
    if name == "ladder":
        return {"proxy_loss": 3.118, "reference_loss": 3.164, f"score/{suite}": 0.312}
    loss = round(2.6 * 0.82**k, 4)
    evals = {"loss": loss, "eval_loss": round(loss * 1.04 + 0.02, 4),
             f"score/{suite}": round(min(0.95, 0.35 + 0.06 * k), 4)}
    extra = {"mid_train": ("score/gsm8k", 0.41), "long_context": ("needle_recall_128k", 0.93),
             "sft": ("instruction_following", 0.71), "dpo": ("reward_margin", 0.62),
             "rlvr": ("verifier_pass_rate", 0.58)}.get(name)
    if extra is not None:
        evals[extra[0]] = extra[1]
    return evals


def failing_evals(name: str, suite: str) -> dict[str, float]:
    if name == "data_prep":
        return {"dedup_removed_fraction": 0.38, "decontamination_overlap": 0.07}
    if name == "ladder":
        return {"proxy_loss": 3.71, "reference_loss": 3.164, f"score/{suite}": 0.18}
    return {"loss": 4.2, "eval_loss": 5.1, f"score/{suite}": 0.12}


def rl_split(stages: list[dict[str, Any]], gpus: int) -> dict[str, Any] | None:
    """The RL stage's trainer/rollout split and rollout staleness, once the rlvr stage has started."""
    stage = next((s for s in stages if s["name"] == "rlvr"), None)
    if stage is None or stage["state"] in ("pending", "skipped"):
        return None
    rollout = gpus // 2 if gpus >= 2 else gpus
    trainer = gpus - rollout if gpus >= 2 else gpus
    staleness = 1 if stage["state"] in ("running", "paused") else 0
    return {"algorithm": RL_ALGORITHM, "stability_fixes": list(RL_STABILITY_FIXES), "trainer_gpus": trainer,
            "rollout_gpus": rollout, "colocated": gpus < 2, "staleness_steps": staleness,
            "staleness_bound_steps": RL_STALENESS_BOUND, "within_bound": staleness <= RL_STALENESS_BOUND}
