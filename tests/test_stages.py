"""The backend's proposed stages (docs/contract.md, "The backend's proposed stages") through a real MCP
client against the reference backend on loopback: the parallelism and precision a plan chooses (and the wasteful layouts it refuses), the ladder
pre-check for custom data, the curriculum's named eval batteries, post-training with the RL stage's
trainer/rollout split, checkpoints on the manifest's policy, interruptions with their detection and resume
times, the loss-spike restart the backend proposes and only a person decides, and the run clock.

Runs are driven by the operator API (advance, fail-gate, interrupt, spike) and by an injected clock; waits
synchronise on progress notifications and on the backend's own state, never on sleeps. The full restart
with the person's confirmation in a real browser is in test_desk_browser.py.
"""

from __future__ import annotations

import io
import json
import time
import uuid
from collections.abc import Iterator
from decimal import Decimal
from typing import Any

import anyio
import pytest

from ito_training_mcp.doors.cli import main as cli
from ito_training_reference import ReferenceBackend
from ito_training_reference.harness import OperatorError

from .conftest import ClientFactory, World, WriteFile
from .test_desk import Clock
from .test_lifecycle import call, create_run, op_run


@pytest.fixture
def mode() -> str:
    return "auto"


def key(label: str) -> str:
    return f"{label}-{uuid.uuid4().hex}"


def manifest(write_file: WriteFile, example_document: dict[str, Any], **changes: Any) -> str:
    return write_file({**example_document, **changes})


KNOWN_DATA = {"name": "tulu-3-sft-mixture", "uri": "hf://datasets/allenai/tulu-3-sft-mixture",
              "revision": "55e9fd6d41c3cd1a98270dff07557bc2a1e1ba91",
              "decontamination": {"method": "13-gram overlap", "eval_suites": ["mmlu"],
                                  "report": "ito://reports/tulu-3", "checked_at": "2026-11-01"}}


def restart_ref(world: World, run_id: str, proposal: dict[str, Any]) -> str:
    """The person's confirmation of exactly this restart proposal (headless; the browser test does it at the desk)."""
    return str(world.op.confirmation(world.account, "training.restart", world.booking, proposal["repeated_cost_usd"],
                                     run_id=run_id, proposal_id=proposal["proposal_id"])["ref"])


# ---------------------------------------------------------------------- 1. parallelism and precision


async def test_a_plan_names_the_parallelism_and_precision_and_the_estimate_follows_them(
    connect: ClientFactory, world: World, manifest_path: str
) -> None:
    plan = await call(connect, world, "plan_training", {"booking_id": world.booking, "manifest_path": manifest_path})
    assert plan["ok"] is True and plan["data"]["valid"] is True
    layout = plan["data"]["parallelism"]
    # 8.03B parameters on 2 nodes x 8 H100 over infiniband: fp8, no tensor or pipeline split, FSDP in each node.
    assert {k: layout[k] for k in ("gpus", "data", "tensor", "pipeline", "sharding", "precision")} == {
        "gpus": 16, "data": 16, "tensor": 1, "pipeline": 1, "sharding": "within_node", "precision": "fp8"}
    assert [r.split(":")[0] for r in layout["reasons"]] == ["fp8", "tensor 1", "FSDP within each node", "data 16"]
    assert next(c for c in plan["data"]["checks"] if c["name"] == "parallelism")["status"] == "passed"
    estimate = plan["data"]["estimate"]
    assert "fp8" in estimate["basis"]
    assert [(line["name"], line["usd"]) for line in estimate["stages"]] == [
        ("data_prep", "40.00"), ("ladder", "80.00"), ("sft", "80.00"), ("dpo", "80.00")]
    assert sum(Decimal(line["usd"]) for line in estimate["stages"]) == Decimal(estimate["usd"])

    # The same manifest on GPUs without FP8 is planned at bf16, and its training stages take longer.
    a100 = world.op.booking(world.account, nodes=2, gpus_per_node=8, gpu="A100-80GB")["booking_id"]
    slower = await call(connect, world, "plan_training", {"booking_id": a100, "manifest_path": manifest_path})
    assert slower["data"]["parallelism"]["precision"] == "bf16"
    hours = {line["name"]: line["gpu_hours"] for line in slower["data"]["estimate"]["stages"]}
    assert hours["sft"] > next(x["gpu_hours"] for x in estimate["stages"] if x["name"] == "sft")


@pytest.mark.parametrize(("parameters", "booking", "reason", "says"), [
    (300_000_000, {"nodes": 2, "gpus_per_node": 8}, "too_many_gpus", "keeps at most 12 GPU(s) busy"),
    (70_000_000_000, {"nodes": 4, "gpus_per_node": 8}, "idle_nodes", "leave 1 of 4 node(s) idle"),
    (40_000_000_000, {"nodes": 2, "gpus_per_node": 2, "fabric": "ethernet"}, "tensor_across_nodes", "cross nodes"),
    (32_763_876_352, {"nodes": 1, "gpus_per_node": 8}, "memory", "does not fit 8 GPU(s)"),
], ids=["more-gpus-than-the-model-keeps-busy", "a-pipeline-leaves-nodes-idle", "tensor-across-nodes-on-ethernet",
        "does-not-fit-at-the-chosen-sharding"])
async def test_a_wasteful_layout_is_a_failed_check_that_says_why(
    connect: ClientFactory, world: World, write_file: WriteFile, example_document: dict[str, Any],
    parameters: int, booking: dict[str, Any], reason: str, says: str,
) -> None:
    path = manifest(write_file, example_document, model={**example_document["model"], "parameter_count": parameters},
                    budget={"ceiling_usd": "90000.00", "max_incremental_cost_usd": "90000.00"})
    booking_id = world.op.booking(world.account, **{"fabric": "infiniband", **booking})["booking_id"]
    plan = await call(connect, world, "plan_training", {"booking_id": booking_id, "manifest_path": path})
    assert plan["ok"] is True and plan["data"]["valid"] is False and plan["data"]["confirmation_request"] is None
    check = next(c for c in plan["data"]["checks"] if c["name"] == "parallelism")
    assert (check["status"], check["reason"]) == ("failed", reason) and says in check["message"], check
    assert "parallelism" in plan["data"]["failed_checks"]
    assert plan["data"]["parallelism"] is not None  # the choice it refused, with its reasons


# ---------------------------------------------------------------------- 2. the ladder for custom data


async def test_custom_data_gets_the_ladder_and_its_failed_gate_stops_the_run_before_the_expensive_stages(
    connect: ClientFactory, world: World, manifest_path: str, write_file: WriteFile, example_document: dict[str, Any]
) -> None:
    known = manifest(write_file, example_document, data=[KNOWN_DATA])
    plan = await call(connect, world, "plan_training", {"booking_id": world.booking, "manifest_path": known})
    assert [line["name"] for line in plan["data"]["estimate"]["stages"]] == ["data_prep", "sft", "dpo"]
    assert "ladder" not in plan["data"]["estimate"]["basis"]

    run_id = await create_run(connect, world, manifest_path)
    world.op.advance(run_id)
    world.op.advance(run_id)  # data_prep passed, the ladder running
    status = await call(connect, world, "training_status", {"run_id": run_id})
    ladder = status["data"]["stages"][1]
    assert (ladder["name"], ladder["state"]) == ("ladder", "running")
    assert ladder["gate"]["battery"] == {"name": "ladder-150m-v1",
                                         "evals": ["proxy_loss", "reference_loss", "score/mmlu"]}
    world.op.fail_gate(run_id)
    status = await call(connect, world, "training_status", {"run_id": run_id})
    assert status["data"]["state"] == "gate_failed" and status["data"]["failed_gates"] == ["ladder"]
    assert [s["state"] for s in status["data"]["stages"]] == ["passed", "failed", "skipped", "skipped"]
    assert "override" in status["notice"]
    metrics = await call(connect, world, "training_metrics", {"run_id": run_id})
    assert metrics["data"]["cost_usd_to_date"] == "40.00"  # data_prep only: nothing of sft or dpo was spent
    assert metrics["data"]["step"] == 0
    assert (await call(connect, world, "list_checkpoints", {"run_id": run_id}))["data"]["checkpoints"] == []


# ---------------------------------------------------------------------- 3. curriculum and eval batteries
# ---------------------------------------------------------------------- 5. checkpoints on the manifest's policy


async def test_a_pretrain_curriculum_runs_staged_each_gate_with_its_battery_and_checkpoints_follow_the_policy(
    connect: ClientFactory, world: World, write_file: WriteFile, example_document: dict[str, Any]
) -> None:
    path = manifest(write_file, example_document, target="pretrain", post_training=["sft"])
    run_id = await create_run(connect, world, path)
    world.op.finish(run_id)
    status = await call(connect, world, "training_status", {"run_id": run_id})
    stages = status["data"]["stages"]
    assert [s["name"] for s in stages] == ["data_prep", "ladder", "pretrain", "mid_train", "long_context", "sft"]
    assert [s["gate"]["battery"]["name"] for s in stages] == [
        "data-prep-v1", "ladder-150m-v1", "pretrain-core-v1", "mid-train-v1", "long-context-v1", "sft-v1"]
    for stage in stages:  # every gate ran exactly its fixed battery
        assert stage["gate"]["status"] == "passed"
        assert sorted(stage["gate"]["evals"]) == sorted(stage["gate"]["battery"]["evals"]), stage["name"]
    assert "needle_recall_128k" in stages[4]["gate"]["evals"]

    # Four training stages of 2 x 500 steps: a checkpoint every 500 steps, the last 3 kept.
    checkpoints = (await call(connect, world, "list_checkpoints", {"run_id": run_id}))["data"]["checkpoints"]
    assert [c["step"] for c in checkpoints] == [3000, 3500, 4000]
    metrics = (await call(connect, world, "training_metrics", {"run_id": run_id}))["data"]
    assert metrics["step"] == 4000 and metrics["goodput"] == 1.0 and metrics["interruptions"]["count"] == 0


# ---------------------------------------------------------------------- 4. post-training: SFT -> DPO -> RLVR


async def test_the_rl_stage_reports_its_trainer_rollout_split_and_rollout_staleness(
    connect: ClientFactory, world: World, write_file: WriteFile, example_document: dict[str, Any]
) -> None:
    path = manifest(write_file, example_document, target="rl", post_training=["sft", "dpo", "rlvr"])
    run_id = await create_run(connect, world, path)
    for _ in range(4):
        world.op.advance(run_id)  # data_prep, the ladder, sft passed; dpo running
    before = (await call(connect, world, "training_metrics", {"run_id": run_id}))["data"]
    assert before["rl"] is None
    world.op.advance(run_id)  # dpo passed, rlvr running
    status = await call(connect, world, "training_status", {"run_id": run_id})
    assert [s["name"] for s in status["data"]["stages"]] == ["data_prep", "ladder", "sft", "dpo", "rlvr"]
    rl = (await call(connect, world, "training_metrics", {"run_id": run_id}))["data"]["rl"]
    assert rl == {"algorithm": "grpo", "stability_fixes": ["clip_higher", "dynamic_sampling", "token_level_loss",
                                                          "overlong_reward_shaping"],
                  "trainer_gpus": 8, "rollout_gpus": 8, "colocated": False, "staleness_steps": 1,
                  "staleness_bound_steps": 2, "within_bound": True}
    world.op.advance(run_id)
    done = (await call(connect, world, "training_metrics", {"run_id": run_id}))["data"]["rl"]
    assert done["staleness_steps"] == 0 and done["within_bound"] is True
    rlvr = (await call(connect, world, "training_status", {"run_id": run_id}))["data"]["stages"][-1]
    assert rlvr["gate"]["battery"]["name"] == "rlvr-v1" and "verifier_pass_rate" in rlvr["gate"]["evals"]


# ---------------------------------------------------------------------- 5. interruptions


async def test_an_injected_interruption_reports_its_detection_and_resume_times_and_costs_goodput(
    connect: ClientFactory, world: World, manifest_path: str
) -> None:
    run_id = await create_run(connect, world, manifest_path)
    for _ in range(3):
        world.op.advance(run_id)  # data_prep and the ladder passed, sft running at step 0
    world.op.interrupt(run_id, detect_s=120, resume_s=480)
    status = (await call(connect, world, "training_status", {"run_id": run_id}))["data"]
    [interruption] = status["interruptions"]
    # Half an interval into sft: no checkpoint yet in this stage's first interval, so it resumes from step 0.
    assert {k: interruption[k] for k in ("stage", "step", "resumed_from_step", "checkpoint_id", "steps_lost",
                                         "detect_s", "resume_s", "within_targets", "cause")} == {
        "stage": "sft", "step": 250, "resumed_from_step": 0, "checkpoint_id": None, "steps_lost": 250,
        "detect_s": 120.0, "resume_s": 480.0, "within_targets": True, "cause": "injected"}
    world.op.advance(run_id)  # sft passes: steps 0..1000
    world.op.interrupt(run_id, detect_s=700, resume_s=300)  # dpo: detection slower than the 10-minute target
    metrics = (await call(connect, world, "training_metrics", {"run_id": run_id}))["data"]
    found = metrics["interruptions"]
    assert (found["count"], found["steps_lost"], found["mean_detect_s"], found["mean_resume_s"]) == (2, 500, 410.0,
                                                                                                     390.0)
    assert (found["detect_target_s"], found["resume_target_s"], found["within_targets"]) == (600.0, 900.0, False)
    assert found["last"]["resumed_from_step"] == 1000 and found["last"]["checkpoint_id"] == f"{run_id}.ckpt-1000"
    # Goodput: 1000 useful steps (2 s each) over those, 500 steps run again and 1600 s of detection and resume.
    assert metrics["goodput"] == round(2000 / (2000 + 1000 + 1600), 4)
    assert metrics["interruption_rate"] == round(2 / ((2000 + 1000 + 1600) / 3600), 4)


def test_interruptions_at_a_configured_rate() -> None:
    with ReferenceBackend(interrupt_every_steps=700) as rb:
        world = World(rb)
        run_id = created(world)
        rb.op.finish(run_id)
        run = op_run(world, run_id)
    # sft and dpo span steps 0..2000: the rate strikes at 700 and 1400, each resuming from the checkpoint before.
    assert [(i["step"], i["resumed_from_step"], i["cause"]) for i in run["interruptions"]] == [
        (700, 500, "rate"), (1400, 1000, "rate")]
    assert run["state"] == "succeeded"


def created(world: World) -> str:
    """A run of the example manifest, created through the API with the operator's confirmation."""
    import base64
    import hashlib

    import httpx

    from .conftest import EXAMPLE_MANIFEST

    raw = EXAMPLE_MANIFEST.read_bytes()
    digest = hashlib.sha256(raw).hexdigest()
    ref = world.confirm(digest)
    with httpx.Client(base_url=world.backend.url, headers={"Authorization": f"Bearer {world.token}"},
                      trust_env=False) as http:
        r = http.post("/v1/training-runs", headers={"Idempotency-Key": key("created")}, json={
            "booking_id": world.booking, "confirmation_ref": ref, "manifest_sha256": digest,
            "manifest_b64": base64.b64encode(raw).decode()})
    assert r.status_code == 201, r.text
    return str(r.json()["run_id"])


# ---------------------------------------------------------------------- 6. the loss-spike restart


async def test_a_loss_spike_pauses_the_run_and_proposes_a_restart_that_only_a_confirmation_carries_out(
    connect: ClientFactory, world: World, manifest_path: str
) -> None:
    run_id = await create_run(connect, world, manifest_path)
    for _ in range(3):
        world.op.advance(run_id)  # sft running

    # The agent follows the run; the spike arrives while it waits, and the wait ends on the proposal.
    spiked = anyio.Event()

    async def progress(value: float, total: float | None, message: str | None) -> None:
        if not spiked.is_set():
            spiked.set()
            await anyio.to_thread.run_sync(world.op.spike, run_id)

    waited = await call(connect, world, "training_status", {"run_id": run_id, "wait_seconds": 20},
                        progress=progress)
    data = waited["data"]
    assert spiked.is_set() and data["wait"]["timed_out"] is False and data["terminal"] is False
    [proposal] = data["proposed_actions"]
    assert {k: proposal[k] for k in ("action", "reason", "status", "stage", "spike_step", "checkpoint_step",
                                     "checkpoint_id", "repeated_steps", "repeated_cost_usd")} == {
        "action": "training.restart", "reason": "loss_spike", "status": "pending", "stage": "sft",
        "spike_step": 750, "checkpoint_step": 500, "checkpoint_id": f"{run_id}.ckpt-500", "repeated_steps": 250,
        "repeated_cost_usd": "20.00"}  # a quarter of sft's 1000 steps, of its 80.00
    assert proposal["spike_loss"] > proposal["loss_before"]
    assert "request_confirmation" in waited["notice"] and "training.restart" in waited["notice"]
    assert next(s for s in data["stages"] if s["name"] == "sft")["state"] == "paused"

    # Never automatic: the clock and the operator cannot move a paused stage.
    with pytest.raises(OperatorError) as paused:
        world.op.advance(run_id)
    assert (paused.value.status, paused.value.code) == (409, "run_paused")

    # Without a confirmation, and with one for cancel instead, nothing restarts.
    restart = {"run_id": run_id, "idempotency_key": key("restart")}
    refused = await call(connect, world, "restart_training", restart)
    assert refused["error"]["code"] == "CONFIRMATION_REQUIRED" and refused["live_api_contacted"] is False
    cancel_ref = str(world.op.confirmation(world.account, "training.cancel", world.booking, "0.00",
                                           run_id=run_id)["ref"])
    mismatch = await call(connect, world, "restart_training", {**restart, "confirmation_ref": cancel_ref})
    assert mismatch["error"]["code"] == "CONFIRMATION_MISMATCH"

    opened = await call(connect, world, "request_confirmation", {"action": "training.restart", "run_id": run_id})
    assert opened["ok"] is True and opened["data"]["max_cost_usd"] == "20.00"
    world.op.confirm_request(opened["data"]["request_id"])
    learned = await call(connect, world, "confirmation_status", {"request_id": opened["data"]["request_id"]})
    assert learned["data"]["next_tool"] == "restart_training"
    ref = learned["data"]["confirmation_ref"]
    before = (await call(connect, world, "training_metrics", {"run_id": run_id}))["data"]

    done = await call(connect, world, "restart_training", {**restart, "confirmation_ref": ref})
    assert done["ok"] is True and done["data"]["action"] == "restart" and done["data"]["proposed_actions"] == []
    status = (await call(connect, world, "training_status", {"run_id": run_id}))["data"]
    assert next(s for s in status["stages"] if s["name"] == "sft")["state"] == "running"
    again = await call(connect, world, "restart_training", {**restart, "confirmation_ref": ref})
    assert again["ok"] is True and again["data"]["updated_at"] == done["data"]["updated_at"]  # the same answer
    after = (await call(connect, world, "training_metrics", {"run_id": run_id}))["data"]
    assert after["step"] == 500 and after["loss"] == proposal["loss_before"]
    assert Decimal(after["cost_usd_to_date"]) == Decimal(before["cost_usd_to_date"]) + Decimal("20.00")
    logs = (await call(connect, world, "training_logs", {"run_id": run_id}))["data"]["lines"]
    assert any("restarted from step 500 as confirmed" in line["message"] for line in logs)

    # Nothing left to restart: a second restart is refused with the reason.
    other = await call(connect, world, "restart_training", {
        "run_id": run_id, "idempotency_key": key("restart-again"), "confirmation_ref": ref})
    assert other["error"]["code"] == "CONFIRMATION_CONSUMED"
    asked = await call(connect, world, "request_confirmation", {"action": "training.restart", "run_id": run_id})
    assert asked["error"]["code"] == "VALIDATION_REJECTED"
    assert asked["error"]["details"]["reason"] == "no_restart_proposed"


async def test_declining_the_restart_lets_the_run_continue_from_where_it_paused(
    connect: ClientFactory, world: World, manifest_path: str
) -> None:
    run_id = await create_run(connect, world, manifest_path)
    for _ in range(3):
        world.op.advance(run_id)
    proposal = world.op.spike(run_id)["proposed_actions"][0]
    opened = await call(connect, world, "request_confirmation", {"action": "training.restart", "run_id": run_id})
    world.op.decline_request(opened["data"]["request_id"])
    learned = await call(connect, world, "confirmation_status", {"request_id": opened["data"]["request_id"]})
    assert learned["data"]["status"] == "declined" and "continue" in learned["notice"]
    status = (await call(connect, world, "training_status", {"run_id": run_id}))["data"]
    assert status["proposed_actions"] == [] and status["state"] == "running"
    assert next(s for s in status["stages"] if s["name"] == "sft")["state"] == "running"
    metrics = (await call(connect, world, "training_metrics", {"run_id": run_id}))["data"]
    assert metrics["step"] == proposal["spike_step"]  # nothing was run again
    # A confirmation made for the declined proposal restarts nothing.
    stale = restart_ref(world, run_id, proposal)
    refused = await call(connect, world, "restart_training", {
        "run_id": run_id, "confirmation_ref": stale, "idempotency_key": key("stale")})
    assert refused["error"]["code"] == "VALIDATION_REJECTED"
    assert world.op.finish(run_id)["state"] == "succeeded"


async def test_the_cli_follows_the_proposal_to_the_restart(
    connect: ClientFactory, world: World, manifest_path: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    run_id = await create_run(connect, world, manifest_path)
    for _ in range(3):
        world.op.advance(run_id)
    proposal = world.op.spike(run_id)["proposed_actions"][0]
    for name, value in world.env.items():
        monkeypatch.setenv(name, value)

    def run(*argv: str) -> tuple[int, str]:
        out, err = io.StringIO(), io.StringIO()
        code = cli.run(list(argv), stdout=out, stderr=err)
        return code, out.getvalue()

    code, out = await anyio.to_thread.run_sync(run, "status", "--run", run_id)
    assert code == 0 and "PROPOSED by the backend" in out and "restart from step 500" in out
    assert f"Next command: ito-training request-confirmation --action restart --run {run_id}" in out
    code, out = await anyio.to_thread.run_sync(run, "request-confirmation", "--action", "restart", "--run", run_id,
                                               "--json")
    request_id = json.loads(out)["data"]["request_id"]
    world.op.confirm_request(request_id)
    code, out = await anyio.to_thread.run_sync(run, "confirmation", "--request", request_id)
    assert code == 0 and "Next command: ito-training restart --run" in out
    command = out.split("Next command: ")[1].split("\n")[0].split()
    assert command[:2] == ["ito-training", "restart"] and f"restart-{request_id}" in command
    code, out = await anyio.to_thread.run_sync(run, *command[1:])
    assert code == 0 and "restarted from the proposed checkpoint" in out, out
    assert op_run(world, run_id)["proposed_actions"] == [] and proposal["checkpoint_step"] == 500


# ---------------------------------------------------------------------- 7. the run clock


@pytest.fixture
def clocked() -> Iterator[tuple[ReferenceBackend, Clock]]:
    clock = Clock()
    with ReferenceBackend(clock=clock, auto_advance_s=60) as rb:
        yield rb, clock


def test_runs_advance_on_the_clock_and_the_desk_is_never_behind_it(clocked: tuple[ReferenceBackend, Clock]) -> None:
    rb, clock = clocked
    world = World(rb)
    run_id = created(world)
    person = rb.person(world.account).sign_in()
    assert "queued" in person.get(f"/desk/runs/{run_id}").text
    clock.advance(60 * 3)  # three intervals: start, data_prep and the ladder pass
    page = person.get(f"/desk/runs/{run_id}").text  # the desk catches up before it renders
    assert rb.query("SELECT state, stages FROM runs WHERE run_id = ?", (run_id,))[0]["state"] == "running"
    assert '<td data-label="Stage">sft</td><td data-label="State"><span class="status running">' in page
    # A cancel request opened now, reviewed after the run has finished: the page says it cannot be carried out.
    with rb_client(rb, world) as http:
        request_id = http.post("/v1/confirmation-requests",
                               json={"action": "training.cancel", "run_id": run_id}).json()["request_id"]
    clock.advance(60 * 3)
    review = person.get(f"/desk/requests/{request_id}").text
    assert "succeeded now, so this cancel could not be carried out" in review
    assert 'class="confirm"' not in review
    assert rb.op.tick() == 0  # stepping the clock again changes nothing: it is deterministic in the clock


def test_the_clock_never_moves_a_paused_stage_and_counts_from_the_decision(
    clocked: tuple[ReferenceBackend, Clock]
) -> None:
    rb, clock = clocked
    world = World(rb)
    run_id = created(world)
    clock.advance(60 * 3)
    assert rb.op.tick() == 1  # start, data_prep and the ladder: sft runs
    rb.op.spike(run_id)
    clock.advance(60 * 10)
    assert rb.op.tick() == 0 and op_run(world, run_id)["proposed_actions"]  # paused: the clock waits too
    with rb_client(rb, world) as http:
        request_id = http.post("/v1/confirmation-requests",
                               json={"action": "training.restart", "run_id": run_id}).json()["request_id"]
    rb.op.decline_request(request_id)
    assert rb.op.tick() == 0  # the ten paused intervals do not count
    clock.advance(60)
    rb.op.tick()
    assert [s["state"] for s in op_run(world, run_id)["stages"]] == ["passed", "passed", "passed", "running"]


def test_the_clock_moves_runs_while_nobody_asks() -> None:
    clock = Clock()
    with ReferenceBackend(clock=clock, auto_advance_s=0.2) as rb:
        world = World(rb)
        run_id = created(world)
        clock.advance(0.2 * 6)  # enough for every stage; no request follows
        deadline = time.monotonic() + 10
        state = "queued"
        while state != "succeeded" and time.monotonic() < deadline:  # the backend's own database, not its API
            state = rb.query("SELECT state FROM runs WHERE run_id = ?", (run_id,))[0]["state"]
            time.sleep(0.02)
        assert state == "succeeded"
    assert rb._thread is None  # stopped with the server


def rb_client(rb: ReferenceBackend, world: World) -> Any:
    import httpx

    return httpx.Client(base_url=rb.url, headers={"Authorization": f"Bearer {world.token}"}, trust_env=False)


def test_a_database_from_before_restarts_is_migrated(tmp_path: Any) -> None:
    """Confirmations and requests of an older database had no training.restart in their CHECK; opening the
    database rebuilds those tables with it, rows and indexes kept."""
    import sqlite3

    from ito_training_reference import store

    db = str(tmp_path / "old.sqlite3")
    old = store.SCHEMA.replace("'training.cleanup', 'training.restart')", "'training.cleanup')")
    conn = sqlite3.connect(db)
    conn.executescript(old)
    conn.execute("INSERT INTO accounts VALUES ('acct_old', '100.00', '[]', '[]', 0)")
    conn.execute("INSERT INTO confirmations (ref, account_id, action, booking_id, max_cost_usd, expires_at, "
                 "created_at) VALUES ('cnf_old', 'acct_old', 'training.cancel', 'bk_old', '0.00', 0, 0)")
    conn.commit()
    with pytest.raises(sqlite3.IntegrityError):
        conn.execute("INSERT INTO confirmations (ref, account_id, action, booking_id, max_cost_usd, expires_at, "
                     "created_at) VALUES ('cnf_new', 'acct_old', 'training.restart', 'bk_old', '0.00', 0, 0)")
    conn.close()
    opened = store.Store(db)
    try:
        assert opened.confirmation("cnf_old")["action"] == "training.cancel"
        assert opened.insert_confirmation({"ref": "cnf_new", "account_id": "acct_old", "action": "training.restart",
                                           "booking_id": "bk_old", "run_id": "run_x", "manifest_sha256": None,
                                           "max_cost_usd": "20.00", "expires_at": 0, "proposal_id": "run_x.restart-1"})
        indexes = {r["name"] for r in opened.rows("SELECT name FROM sqlite_master WHERE type = 'index'")}
        assert "confirmation_requests_by_account" in indexes
    finally:
        opened.close()
