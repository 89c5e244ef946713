"""A big review page does not stop the backend: the desk renders it in a worker thread.

The attack: rendering a 1 MiB manifest's review page held the event loop, and every other request
(`/v1/capabilities` took 3.1 s) waited for it. Here the render is held at a point the test controls
(an event, never a sleep): while it is held, the backend still answers another request; then the page
completes. bench/desk_render_bench.py measures the latency.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from ito_training_reference import ReferenceBackend
from ito_training_reference.desk import review

from .test_desk import insert_request
from .test_reference_backend import DOC

BOUND_S = 10.0  # only a hang fails on it


@pytest.fixture
def rb() -> Iterator[ReferenceBackend]:
    with ReferenceBackend() as backend:
        yield backend


def _big_manifest() -> bytes:
    """A valid manifest of over half a mebibyte: the example with 256 data references with long URIs."""
    import json

    data = [{**DOC["data"][0], "name": f"support-shard-{i:03d}",
             "uri": f"s3://acme-ml-data/support/shard-{i:03d}/" + "part/" * 380} for i in range(256)]
    return json.dumps({**DOC, "data": data}, indent=2).encode()


def test_another_request_is_answered_while_a_review_renders(rb: ReferenceBackend,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    account = rb.op.account()
    booking = rb.op.booking(account, nodes=2)["booking_id"]
    manifest = _big_manifest()
    assert len(manifest) > 512 * 1024
    request_id = insert_request(rb, account, booking, manifest)
    rendering, release = threading.Event(), threading.Event()
    real = review.review_of

    def held(*args: Any) -> review.Review:
        rendering.set()
        release.wait(BOUND_S)
        return real(*args)

    monkeypatch.setattr(review, "review_of", held)
    person = rb.person(account).sign_in()
    pages: list[httpx.Response] = []
    reader = threading.Thread(target=lambda: pages.append(person.get(f"/desk/requests/{request_id}")))
    reader.start()
    try:
        assert rendering.wait(BOUND_S), "the review did not start rendering"
        with httpx.Client(base_url=rb.url, trust_env=False, timeout=BOUND_S / 2) as agent:
            answer = agent.get("/v1/capabilities")  # while the render is held
        assert answer.status_code == 200
        assert not pages, "the page was answered before its render was released"
    finally:
        release.set()
        reader.join(BOUND_S)
    assert pages and pages[0].status_code == 200
    assert DOC["model"]["name"] in pages[0].text
