"""What each tool's `data` holds, typed (closed TypedDicts: the core returns plain dicts, and these
describe them exactly), and the per-tool envelope schema built from them and published as `outputSchema`.

- `pieces.py`: formats and objects several tools share (stages, gates, interruptions, proposals, a wait).
- `review.py`: the manifest's review (digest_manifest, and plan_training's copy of it).
- `runs.py`: the tools that read or change a run.
- `person.py`: the person's step (plan, request, confirmation status).
- `schema.py`: the envelope schema, in the JSON Schema subset every client compiles.
"""

from ito_training_mcp.tools.results.person import ConfirmationStatusData, PlanData, RequestData
from ito_training_mcp.tools.results.review import DigestData
from ito_training_mcp.tools.results.runs import (
    AvailabilityData,
    CancelData,
    CheckpointsData,
    CleanupData,
    LogsData,
    MetricsData,
    RestartData,
    StatusData,
    SubmissionData,
)
from ito_training_mcp.tools.results.schema import envelope_schema

__all__ = [
    "AvailabilityData",
    "CancelData",
    "CheckpointsData",
    "CleanupData",
    "ConfirmationStatusData",
    "DigestData",
    "LogsData",
    "MetricsData",
    "PlanData",
    "RequestData",
    "RestartData",
    "StatusData",
    "SubmissionData",
    "envelope_schema",
]
