"""docs/estimates.md ends with a generated half: its worked example is what the code computes."""

from __future__ import annotations

from pathlib import Path

from costguard.domain.estimate_docs import estimates_markdown

ROOT = Path(__file__).resolve().parents[2]


def test_docs_estimates_md_is_generated_from_the_code() -> None:
    # The page opens with the user's guide, written by hand; from the heading the generator
    # writes to the end of the page, it is the generator's output, byte for byte.
    text = (ROOT / "docs" / "estimates.md").read_text(encoding="utf-8")
    generated = estimates_markdown()
    heading = generated.splitlines()[0]
    assert text.count(heading) == 1, f"docs/estimates.md must hold {heading!r} once"
    assert text[text.index(heading) :] == generated, (
        "docs/estimates.md differs from the code; replace the page from "
        f"{heading!r} to its end with the output of "
        "`PYTHONPATH=functions python -m costguard.cli.estimate`"
    )


def test_the_worked_example_shows_all_three_break_even_answers() -> None:
    text = estimates_markdown()
    assert "spot is cheaper from the first minute" in text
    assert "spot is cheaper for experiments longer than 5.9 h" in text
    assert "Break-even: never" in text


def test_no_retired_type_is_documented_as_an_option_without_the_catalog_saying_so() -> None:
    # The accelerator table lists p3 (V100) for running instances; options come from the catalog.
    from costguard.adapters.catalog import load_catalog
    from costguard.domain.accelerators import ACCELERATORS

    offered = set(load_catalog().offered_types("us-east-1"))
    v100 = next(a for a in ACCELERATORS if a.key == "v100")
    assert not {t for t, _ in v100.instances} & offered
