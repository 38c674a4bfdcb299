"""One clock: the product and the demos read the wall clock in exactly one place.

Every entry point (each Lambda, each ``costguard`` command) takes its "now" from
:data:`costguard.events.CLOCK`, once, at the edge; the demos take theirs from
:data:`costguard_demo.story.STORY_END`. A second read anywhere else is how a story comes
to depend on the calendar (``make test`` failed on the 1st of a month), so it is refused
here, by reading the source: calls are found in the syntax tree, not by text.
"""

from __future__ import annotations

import ast
from pathlib import Path

FUNCTIONS_DIR = Path(__file__).resolve().parents[2] / "functions"
#: (object, attribute) calls that read the wall clock. time.monotonic (a duration) is not.
WALL_CLOCK_READS = {
    ("datetime", "now"),
    ("datetime", "utcnow"),
    ("datetime", "today"),
    ("date", "today"),
    ("time", "time"),
    ("time", "localtime"),
    ("time", "gmtime"),
}
#: The one place allowed to read it.
THE_CLOCK = FUNCTIONS_DIR / "costguard" / "events.py"


def _wall_clock_reads(path: Path) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
            continue
        owner = node.func.value
        name = owner.attr if isinstance(owner, ast.Attribute) else getattr(owner, "id", None)
        if (name, node.func.attr) in WALL_CLOCK_READS:
            found.append(f"{path.relative_to(FUNCTIONS_DIR)}:{node.lineno}")
    return found


def test_the_product_and_the_demos_read_the_wall_clock_only_through_the_one_clock() -> None:
    # GIVEN every module the Lambdas, the CLI and the demos run
    paths = sorted((FUNCTIONS_DIR / "costguard").rglob("*.py")) + sorted(
        (FUNCTIONS_DIR / "costguard_demo").rglob("*.py")
    )
    # WHEN their calls are read
    reads = [r for p in paths if p != THE_CLOCK for r in _wall_clock_reads(p)]
    # THEN none reads the wall clock itself
    assert reads == []
    # AND the one clock does (the check would see a read if there were one)
    assert len(_wall_clock_reads(THE_CLOCK)) == 1
