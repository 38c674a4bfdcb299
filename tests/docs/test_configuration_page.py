"""docs/configuration.md shows the settings exactly as config_spec.py declares them."""

from __future__ import annotations

from pathlib import Path

import pytest

from costguard.config_spec import (
    CONTEXT_SETTINGS,
    TABLE_BEGIN,
    TABLE_END,
    markdown_table,
    with_table,
)

PAGE = Path(__file__).resolve().parents[2] / "docs" / "configuration.md"


def _table(page: str) -> str:
    return page.split(TABLE_BEGIN, 1)[1].split(TABLE_END, 1)[0].removeprefix("\n")


def test_the_configuration_page_is_generated_from_the_declaration() -> None:
    # GIVEN the page as committed WHEN its table is generated again THEN nothing changes.
    page = PAGE.read_text()
    assert page == with_table(page), (
        "docs/configuration.md disagrees with functions/costguard/config_spec.py: run `make docs`"
    )


def test_the_page_lists_every_context_key_with_its_default_and_variable() -> None:
    table = _table(PAGE.read_text())
    for spec in CONTEXT_SETTINGS:
        variable = f"`{spec.env_var}`" if spec.env_var else "deploy only"
        assert f"| `{spec.context_key}` | {spec.shown_default()} | {variable} |" in table
    assert "| `regions` | `us-east-1,us-west-2` | `COSTGUARD_REGIONS` |" in table
    assert "| `scanRate` | `15 minutes` | `COSTGUARD_SCAN_RATE` |" in table
    assert "| `orgMaxConcurrency` | `20` | deploy only |" in table
    assert len(table.splitlines()) == 2 + len(CONTEXT_SETTINGS)


def test_a_changed_default_makes_the_page_disagree() -> None:
    # GIVEN the page WHEN one default in it is edited THEN the check above would fail.
    page = PAGE.read_text()
    edited = page.replace("| `sweepBreakerPct` | `50` |", "| `sweepBreakerPct` | `40` |")
    assert edited != page
    assert edited != with_table(edited)


def test_a_page_without_markers_is_refused() -> None:
    with pytest.raises(ValueError, match="settings:begin"):
        with_table("# Configuration\n")
    assert markdown_table() in with_table(f"{TABLE_BEGIN}\nold\n{TABLE_END}\n")
