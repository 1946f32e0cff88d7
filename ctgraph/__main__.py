"""``python -m ctgraph``: see :mod:`ctgraph.cli`."""

from .cli import main

raise SystemExit(main())
