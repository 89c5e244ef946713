"""The runnable examples keep working and keep telling the story: `make demo` (a real MCP client over
stdio, the reference backend in-process) and the walkthrough (every part a real process). Both run at
once, as subprocesses, and each checks its own steps too (exit code 0 only if every one behaved)."""

from __future__ import annotations

import os
import subprocess
import sys

from .conftest import REPO


def test_the_demo_and_the_walkthrough_run_end_to_end() -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ITO_")}
    demo, walkthrough = (
        subprocess.Popen([sys.executable, str(REPO / "examples" / name)], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, env=env)
        for name in ("demo.py", "walkthrough.py")
    )
    demo_out, demo_err = demo.communicate(timeout=180)
    walk_out, walk_err = walkthrough.communicate(timeout=180)

    assert demo.returncode == 0, demo_out + demo_err
    assert "Demo completed" in demo_out
    story = [  # in this order: the new story of the person's step
        '"code": "TRAINING_UNAVAILABLE"',
        "[operator] mints a single-use sign-in link",
        "--- plan_training",
        '"review_url": ',
        "--- confirmation_status before anyone decided",
        "[person] presses Confirm",
        '"status": "confirmed"',
        "--- submit_training with the confirmation",
        '"created": false',
        "--- training_status",
        "--- request_confirmation for training.cancel",
        "--- cancel_training",
        "--- request_confirmation for training.cleanup",
        "--- cleanup_training",
        '"booking_untouched": true',
        "unchanged since before the cancel",
    ]
    positions = [demo_out.find(marker) for marker in story]
    assert -1 not in positions, [m for m, p in zip(story, positions, strict=True) if p == -1]
    assert positions == sorted(positions)

    assert walkthrough.returncode == 0, walk_out + walk_err
    assert "walkthrough completed" in walk_out
    assert "refused CONFIRMATION_REQUIRED" in walk_out
    assert '"booking_untouched": true' in walk_out
    assert "$ ito-training confirmation --request" in walk_out and "$ ito-training train --booking" in walk_out
    assert "again: created=False" in walk_out
    # The same manifest planned and confirmed twice: two runs, each under the key of its own request.
    assert walk_out.count("created=True, again: created=False, key train-creq_") == 2
    assert "The second run of this manifest" in walk_out
    assert "$ ito-training desk --json finish" in walk_out  # the operator's steps are printed too
    assert "nothing sent" in demo_out and "The review summary the agent shows the person" in demo_out
    # Each call's header comes before its progress lines.
    header = demo_out.index("--- confirmation_status, waiting up to 20 s")
    assert header < demo_out.index("    progress 0/1") < demo_out.index("[person] presses Confirm")
