"""`python -m ito_training_reference`: same as `ito-training backend`."""

from .cli import main

raise SystemExit(main())
