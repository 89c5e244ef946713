"""`python -m ito_training_mcp.reference_backend`: same as `ito-training backend`."""

from .cli import main

raise SystemExit(main())
