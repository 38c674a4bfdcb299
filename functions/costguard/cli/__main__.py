"""``python -m costguard.cli``: the ``costguard`` command (the package's one copy runs)."""

from __future__ import annotations

from costguard.cli import main

raise SystemExit(main())
