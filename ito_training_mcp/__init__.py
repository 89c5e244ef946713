"""ito-training-mcp: a fail-closed MCP server and CLI for ML training on Itô GPU bookings."""

__version__ = "0.1.0"
