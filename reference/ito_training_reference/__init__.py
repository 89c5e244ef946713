"""Reference backend for the proposed `ito.training.v1` API: a conformance and demo server.

It never trains anything: runs are SQLite rows that operator calls (or an optional timer)
advance. Nothing else in the package imports this subpackage, so the MCP server and the CLI
never load Starlette or uvicorn unless a backend is actually started.
"""

from .app import create_app
from .cli import main
from .desk.person import DeskError, Person
from .harness import OperatorClient, OperatorError, ReferenceBackend

__all__ = ["DeskError", "OperatorClient", "OperatorError", "Person", "ReferenceBackend", "create_app", "main"]
