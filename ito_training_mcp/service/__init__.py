"""The core: every operation of the contract as a plain async method returning an `Envelope`.

The MCP tools and the CLI are thin adapters over `TrainingService`; it knows nothing of either.
The operations are grouped by concern -- `submit.py` (availability, digest, submit: the gates of
contract §3 read top to bottom in one function), `lifecycle.py` (following, cancelling and
cleaning up a run), `confirmations.py` (the person's step: plans, confirmation requests and their
status) -- over the machinery they share in `base.py` (and `waiting.py`, the bounded waits with
progress).
"""

from __future__ import annotations

from ito_training_mcp.service.base import Progress
from ito_training_mcp.service.call import Call
from ito_training_mcp.service.confirmations import ConfirmationOperations
from ito_training_mcp.service.lifecycle import LifecycleOperations
from ito_training_mcp.service.submit import SubmitOperations


class TrainingService(SubmitOperations, ConfirmationOperations, LifecycleOperations):
    """The one core behind both doors. See `ServiceBase` for the constructor's arguments."""


__all__ = ["Call", "Progress", "TrainingService"]
