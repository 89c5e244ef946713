"""The person's path from a terminal: `ito-training plan` -> the review URL -> the desk (a real browser-like
session over HTTP) -> `ito-training confirmation --request ... --wait` -> `ito-training train ...` ->
`ito-training status`, against the reference backend. Each step's "Next command" is what the next
step runs, so the commands the CLI prints are checked by running them.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Callable
from io import StringIO
from typing import Any

import pytest

from ito_training_mcp.doors.cli.main import parse, run

from .conftest import World


class DeciderTerminal(StringIO):
    """A terminal (so the CLI draws its progress bar) whose first line drawn triggers `decide`."""

    def __init__(self, decide: Callable[[], object]) -> None:
        super().__init__()
        self.decide, self.decided = decide, False

    def isatty(self) -> bool:
        return True

    def write(self, text: str) -> int:
        written = super().write(text)
        if not self.decided and "pending" in text:
            self.decided = True
            self.decide()
        return written


def human(*argv: str) -> tuple[int, str]:
    out = StringIO()
    return run(list(argv), stdout=out, stderr=StringIO()), out.getvalue()


def as_json(*argv: str) -> tuple[int, dict[str, Any]]:
    out = StringIO()
    code = run([*argv, "--json"], stdout=out, stderr=StringIO())
    return code, json.loads(out.getvalue())


def next_argv(text: str) -> list[str]:
    """The command after 'Next command: ' (human line or the end of the JSON notice), as argv."""
    line = text.rsplit("Next command: ", 1)[1].splitlines()[0]
    argv = shlex.split(line)
    assert argv[0] == "ito-training"
    parse(argv[1:])  # it parses with the CLI's own parser
    return argv[1:]


@pytest.fixture
def env(world: World, monkeypatch: pytest.MonkeyPatch) -> World:
    for name, value in world.env.items():
        monkeypatch.setenv(name, value)
    return world


def test_the_whole_path_by_running_each_printed_command(env: World, manifest_path: str) -> None:
    world = env
    code, out = human("plan", "--booking", world.booking, "--manifest", manifest_path)
    assert code == 0, out
    lines = out.splitlines()
    url_line = lines.index("Review and decide at the Itô desk (sign in there yourself; the link carries no sign-in):")
    review_url = lines[url_line + 1].strip()
    assert review_url.startswith(world.backend.url + "/desk/requests/creq_")
    assert "Checks:" in out and "budget" in out and "Estimate: $" in out and "What is being confirmed:" in out
    confirmation = next_argv(out)
    assert confirmation[:2] == ["confirmation", "--request"]
    assert confirmation[3:] == ["--wait", "55", "--manifest", manifest_path]  # carried only for the train command
    request_id = confirmation[2]
    assert review_url.endswith(request_id)

    code, pending = human("confirmation", "--request", request_id)
    assert code == 0 and "PENDING" in pending and review_url in pending
    assert next_argv(pending) == ["confirmation", "--request", request_id, "--wait", "55"]
    code, pending = human(*confirmation[:3], "--manifest", manifest_path)
    assert next_argv(pending) == confirmation  # still waiting: the same command, the path still carried

    # The person signs in through a single-use link and confirms while the CLI waits for them: the
    # first progress line the CLI draws (it is waiting) is when they press Confirm.
    terminal = DeciderTerminal(lambda: world.backend.person(world.account).sign_in().confirm(request_id))
    out = StringIO()
    waiting = [*confirmation]
    waiting[waiting.index("--wait") + 1] = "20"
    code = run(waiting, stdout=out, stderr=terminal)
    confirmed = out.getvalue()
    assert terminal.decided and "pending" in terminal.getvalue() and "confirmed" in terminal.getvalue()
    assert code == 0 and "CONFIRMED" in confirmed, confirmed
    assert "Confirmation ref: cnf_" in confirmed
    train = next_argv(confirmed)
    assert train[train.index("--manifest") + 1] == manifest_path  # from `confirmation --manifest`, never read there
    assert train[train.index("--idempotency-key") + 1] == f"train-{request_id}"  # one request, one intent, one key

    code, created = as_json(*train)
    assert code == 0 and created["data"]["created"] is True, created
    code, again = as_json(*train)  # the printed command typed twice: one run
    assert code == 0 and again["data"]["created"] is False
    assert again["data"]["run_id"] == created["data"]["run_id"]
    assert world.backend.run_count() == 1

    status = next_argv(created["notice"])
    assert status == ["status", "--run", created["data"]["run_id"], "--wait", "55"]
    world.op.finish(created["data"]["run_id"])
    code, followed = human(*status)
    assert code == 0 and f"Run {created['data']['run_id']}: succeeded" in followed


def _plan_confirm_train(world: World, manifest_path: str) -> tuple[list[str], dict[str, Any]]:
    """plan -> the person confirms at the desk -> the printed confirmation -> the printed train, run once."""
    code, planned = human("plan", "--booking", world.booking, "--manifest", manifest_path)
    assert code == 0, planned
    confirmation = next_argv(planned)
    world.backend.person(world.account).sign_in().confirm(confirmation[2])
    code, confirmed = human(*confirmation)
    assert code == 0 and "CONFIRMED" in confirmed, confirmed
    train = next_argv(confirmed)
    code, created = as_json(*train)
    assert code == 0, created
    return train, created


def test_a_second_confirmed_run_of_the_same_manifest_is_a_new_run(env: World, manifest_path: str) -> None:
    """The same manifest, the same booking, planned and confirmed twice on purpose: the second printed
    train command starts a second run. Its key comes from its own confirmation request, not from the
    booking and digest the two intents share."""
    world = env
    first, one = _plan_confirm_train(world, manifest_path)
    assert one["data"]["created"] is True
    second, two = _plan_confirm_train(world, manifest_path)
    key = second.index("--idempotency-key") + 1
    assert second[key] != first[key]
    assert two["data"]["created"] is True and two["data"]["run_id"] != one["data"]["run_id"], two
    assert world.backend.run_count() == 2

    # The printed commands again (a retry after a lost answer looks like this): still two runs.
    for train, created in ((first, one), (second, two)):
        code, again = as_json(*train)
        assert code == 0 and again["data"]["created"] is False
        assert again["data"]["run_id"] == created["data"]["run_id"]
    assert world.backend.run_count() == 2


def test_a_new_confirmation_under_an_old_key_is_said_to_be_unused(env: World, manifest_path: str) -> None:
    """A key typed by hand from an earlier run, with a fresh confirmation: the old run comes back, and
    the output says plainly that nothing new started and the new confirmation was not used."""
    world = env
    first, one = _plan_confirm_train(world, manifest_path)
    code, planned = human("plan", "--booking", world.booking, "--manifest", manifest_path)
    confirmation = next_argv(planned)
    world.backend.person(world.account).sign_in().confirm(confirmation[2])
    _, confirmed = human(*confirmation)
    printed = next_argv(confirmed)
    new_ref = printed[printed.index("--confirmation-ref") + 1]
    mixed = [*first]
    mixed[mixed.index("--confirmation-ref") + 1] = new_ref  # the new reference under the old key
    code, out = human(*mixed)
    said = " ".join(out.split())
    assert code == 0 and f"Run {one['data']['run_id']}:" in out
    assert "Nothing new started" in said and "was NOT used" in said, out
    assert world.backend.run_count() == 1
    code, envelope = as_json(*mixed)
    assert "nothing new started" in envelope["notice"] and "was not used" in envelope["notice"]
    # The new confirmation really is unused: its own printed command starts the second run.
    code, created = as_json(*printed)
    assert code == 0 and created["data"]["created"] is True and world.backend.run_count() == 2


def test_cancel_and_cleanup_through_request_confirmation(env: World, manifest_path: str) -> None:
    import hashlib
    from pathlib import Path

    world = env
    ref = world.confirm(hashlib.sha256(Path(manifest_path).read_bytes()).hexdigest())
    _, created = as_json("train", "--booking", world.booking, "--manifest", manifest_path, "--confirmation-ref", ref,
                         "--idempotency-key", "person-path-key-0001")
    run_id = created["data"]["run_id"]
    before = world.op.get_booking(world.booking)
    person = world.backend.person(world.account).sign_in()
    for action in ("cancel", "cleanup"):
        code, opened = human("request-confirmation", "--action", action, "--run", run_id)
        assert code == 0, opened
        assert f"training.{action} of run {run_id}" in opened and "/desk/requests/creq_" in opened
        confirmation = next_argv(opened)
        person.confirm(confirmation[2])
        code, decided = human(*confirmation)
        assert code == 0 and "CONFIRMED" in decided
        mutation = next_argv(decided)
        assert mutation[:3] == [action, "--run", run_id]
        assert mutation[mutation.index("--idempotency-key") + 1] == f"{action}-{confirmation[2]}"
        code, done = as_json(*mutation)
        assert code == 0, done
        if action == "cancel":
            assert done["data"]["state"] == "cancelled"
            assert next_argv(done["notice"]) == ["request-confirmation", "--action", "cleanup", "--run", run_id]
        else:
            assert done["data"]["booking_untouched"] is True
    after = world.op.get_booking(world.booking)
    assert (before["state"], before["updated_at_epoch"]) == (after["state"], after["updated_at_epoch"])


def test_a_declined_or_expired_request_offers_nothing_to_run(env: World, manifest_path: str) -> None:
    world = env
    _, planned = as_json("plan", "--booking", world.booking, "--manifest", manifest_path)
    request_id = planned["data"]["confirmation_request"]["request_id"]
    world.backend.person(world.account).sign_in().decline(request_id)
    code, out = human("confirmation", "--request", request_id)
    assert code == 0 and "DECLINED" in out and "Next command:" not in out
    code, envelope = as_json("confirmation", "--request", request_id)
    assert envelope["data"]["status"] == "declined" and "Next command:" not in envelope["notice"]


def test_an_invalid_plan_shows_the_failed_checks_and_no_url(world: World, manifest_path: str,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    poor = world.op.account(budget_limit_usd="100.00")
    _, token = world.op.token(poor)
    booking = world.op.booking(poor, nodes=2, gpus_per_node=8, fabric="infiniband")["booking_id"]
    for name, value in {**world.env, "ITO_API_KEY": token}.items():
        monkeypatch.setenv(name, value)
    code, out = human("plan", "--booking", booking, "--manifest", manifest_path)
    assert code == 0, out
    assert "REFUSED by the backend's checks: budget" in out
    assert "/desk/requests/" not in out and "Next command:" not in out
    assert "No confirmation request was opened" in out


def test_a_usage_error_in_the_new_verbs_names_the_flag(env: World) -> None:
    out, err = StringIO(), StringIO()
    assert run(["request-confirmation", "--action", "destroy-everything", "--run", "r-1"], stdout=out, stderr=err) == 2
    assert "--action must be cancel or cleanup" in err.getvalue() and "destroy-everything" not in err.getvalue()
    err = StringIO()
    assert run(["confirmation", "--request", "creq-1", "--wait", "a-while"], stdout=out, stderr=err) == 2
    assert "--wait must be a whole number of seconds" in err.getvalue() and "a-while" not in err.getvalue()
    err = StringIO()
    assert run(["plan", "--manifest", "/m.json"], stdout=out, stderr=err) == 2
    assert "ito-training plan: --booking is required" in err.getvalue()
