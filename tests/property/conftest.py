"""Counts the generated cases, so that `make property` can say how many it ran."""

from __future__ import annotations

from typing import Any

CASES = {"count": 0}


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if CASES["count"]:
        terminalreporter.write_line(f"hypothesis: {CASES['count']:,} generated cases ran")
