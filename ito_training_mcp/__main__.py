"""`python -m ito_training_mcp` runs the MCP server, like the `ito-training-mcp` command."""

from ito_training_mcp.doors.mcp.main import main

if __name__ == "__main__":
    raise SystemExit(main())
