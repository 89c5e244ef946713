"""A redirected mutation is an answer: looked up once so the agent learns what exists, never re-sent."""

from __future__ import annotations

import json
from typing import Any

import pytest

from .test_fuzz_backend_responses import (
    BOOKING,
    CANCEL_KEY,
    CANCEL_REF,
    CREATE_REF,
    RUN_ID,
    SUBMIT_KEY,
    FakeBackend,
    Reply,
    make_service,
    manifest_file,  # noqa: F401 - the fixture
    valid_run,
)

REDIRECT = Reply(307, ((b"location", b"http://127.0.0.1:9/elsewhere"), (b"content-length", b"0")))


def _json(status: int, body: Any) -> Reply:
    return Reply(status, ((b"content-type", b"application/json"),), json.dumps(body).encode())


async def test_a_redirected_create_whose_run_exists_returns_it_without_resending(manifest_file: str) -> None:  # noqa: F811
    # Gate 5 finds nothing; the create is redirected; the one lookup afterwards finds the run.
    fake = FakeBackend("create", REDIRECT, sequences={"runs_by_key": [None, _json(200, {"runs": [valid_run()]})]})
    envelope = await make_service(fake).submit_training(BOOKING, manifest_file, CREATE_REF, SUBMIT_KEY)
    assert envelope.ok, envelope.to_json()
    assert envelope.data is not None
    assert (envelope.data["run_id"], envelope.data["created"]) == (RUN_ID, False)
    assert envelope.data["recovered_after_ambiguous_response"] is True
    assert fake.seen.count("create") == 1
    assert fake.seen[fake.seen.index("create") + 1:] == ["runs_by_key"]
    assert fake.problems == []


async def test_a_redirected_create_with_no_run_says_so_and_sends_nothing_more(manifest_file: str) -> None:  # noqa: F811
    fake = FakeBackend("create", REDIRECT)
    envelope = await make_service(fake).submit_training(BOOKING, manifest_file, CREATE_REF, SUBMIT_KEY)
    assert envelope.error is not None and envelope.error.code.value == "BACKEND_INVALID_RESPONSE"
    assert envelope.error.details is not None
    assert envelope.error.details["run_found_by_key"] is False
    assert envelope.error.details["idempotency_key"] == SUBMIT_KEY
    assert "ITO_API_URL" in envelope.notice
    assert fake.seen.count("create") == 1
    assert fake.seen[fake.seen.index("create") + 1:] == ["runs_by_key"]


async def test_a_redirected_create_whose_lookup_fails_reports_the_outcome_unknown(manifest_file: str) -> None:  # noqa: F811
    fake = FakeBackend("create", REDIRECT, sequences={"runs_by_key": [None, Reply(failure="read_error")]})
    envelope = await make_service(fake).submit_training(BOOKING, manifest_file, CREATE_REF, SUBMIT_KEY)
    assert envelope.error is not None and envelope.error.code.value == "BACKEND_INVALID_RESPONSE"
    assert envelope.error.details is not None
    assert envelope.error.details["submission_outcome"] == "unknown"
    assert fake.seen.count("create") == 1


@pytest.mark.parametrize("run_reply", [None, Reply(failure="read_error")])
async def test_a_redirected_cancel_reads_the_run_once_and_is_never_resent(run_reply: Reply | None) -> None:
    fake = FakeBackend("cancel", REDIRECT, sequences={"run": [run_reply]})
    envelope = await make_service(fake).cancel_training(RUN_ID, CANCEL_REF, CANCEL_KEY)
    assert envelope.error is not None and envelope.error.code.value == "BACKEND_INVALID_RESPONSE"
    assert envelope.error.details is not None
    if run_reply is None:
        assert envelope.error.details["run_state"] == "running"
    else:
        assert envelope.error.details["outcome"] == "unknown"
    assert fake.seen.count("cancel") == 1
    assert fake.seen[fake.seen.index("cancel") + 1:] == ["run"]
    assert "ITO_API_URL" in envelope.notice
