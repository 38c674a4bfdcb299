"""The demo's text, read as a newcomer reads it: no doubled words, no ``1 day, 0:00:00``,
no ``1 objects``, no ``(s)``, no word or number cut before an ellipsis.

The chapters run in-process on moto (``aws``); the whole demo and the Organization demo run
as a user runs them (``e2e``: about 20 s each).
"""

from __future__ import annotations

import re
import subprocess
import sys
from typing import Any

import pytest

from costguard_demo.story import STORY_END

#: "busy: busy:", "warned: warned;", "3 batches batches" - a word said twice.
DOUBLED = re.compile(r"(?<![-\w/.])([a-z]{3,})(?:[:;,])? \1(?![-\w/.])")
#: Python's str(timedelta): "1 day, 0:00:00", "1:00:00 later".
TIMEDELTA = re.compile(r"\b\d+ days?, \d+:\d\d:\d\d|\b\d+:\d\d:\d\d later")
#: "1 objects", "1 alerts", "1 instances" (a one with a plural noun after it).
ONE_PLURAL = re.compile(
    r"(?<![\d.,$/-])\b1 (objects|alerts|instances|accounts|regions|batches|resources|"
    r"changes|findings|runs|actions|scans|probes|notebooks|buckets|volumes|failed receives)\b"
)
#: "(s)" plurals, and an ellipsis glued to a cut word or number ("$12,…", "arn:aws:s…").
PAREN_PLURAL = re.compile(r"\w\(s\)")
CUT = re.compile(r"\S(…|\.\.\.)$|\S…\s")


def defects(text: str) -> list[str]:
    found = []
    for line in text.splitlines():
        for name, pattern in (
            ("doubled word", DOUBLED),
            ("timedelta", TIMEDELTA),
            ("1 + plural", ONE_PLURAL),
            ("(s)", PAREN_PLURAL),
            ("cut mid-word", CUT),
        ):
            if pattern.search(line):
                found.append(f"{name}: {line.strip()}")
    return found


@pytest.mark.parametrize(
    ("line", "defect"),
    [
        ("  busy-gpu-notebook: busy: busy: gpu0 reached 92.0%", "doubled word"),
        ("  s3://demo-scratch: warned: warned; acting after", "doubled word"),
        ("consumed 2 in 3 batches batches, 3 failed receives", "doubled word"),
        ("Stale objects, 1 day, 0:00:00 later (2026-11-19 14:01 UTC):", "timedelta"),
        ("Idle notebooks, 1:00:00 later (15:01 UTC):", "timedelta"),
        ("  929432429208 sandbox      NO member roles; 1 instances seeded", "1 + plural"),
        (
            "cycle 6/6 at 14:00 UTC: 28 resources, ledger applied, 1 alerts, 30 API calls",
            "1 + plural",
        ),
        ("alert [info] advice-digest: nlp-team: 3 change(s) would save", "(s)"),
        ("with AccessDenied: User: arn:aws:s…", "cut mid-word"),
    ],
)
def test_the_checks_catch_what_the_newcomer_saw(line: str, defect: str) -> None:
    """GIVEN a line the demo printed before, WHEN checked, THEN its defect is found."""
    assert any(d.startswith(defect) for d in defects(line)), defects(line)


@pytest.mark.story
def test_the_idle_chapter_says_each_verdict_once_and_its_wait_in_words(aws: Any) -> None:
    """Defect: ``busy-gpu-notebook: busy: busy: gpu0 ...`` and ``Idle notebooks, 1:00:00
    later``. GIVEN the idle chapter, WHEN it tells its story, THEN neither."""
    from costguard_demo.idle import run_idle_chapter

    said: list[str] = []
    run_idle_chapter(aws, "us-east-1", said.append, STORY_END)
    text = "\n".join(said)
    assert defects(text) == []
    assert "Idle notebooks, 1 h later" in text
    assert "busy-gpu-notebook: busy: gpu0" in text


@pytest.mark.story
def test_the_sweep_chapter_says_each_outcome_once_and_its_wait_in_words(aws: Any) -> None:
    """Defect: ``s3://demo-scratch: warned: warned; ...`` and ``Stale objects, 1 day,
    0:00:00 later``. GIVEN the sweep chapter, WHEN it tells its story, THEN neither."""
    from costguard_demo.sweep import run_sweep_chapter

    said: list[str] = []
    run_sweep_chapter(aws, "us-east-1", said.append, STORY_END)
    text = "\n".join(said)
    assert defects(text) == []
    assert "Stale objects, 1 day later" in text
    assert "s3://demo-scratch: warned; acting after" in text


@pytest.mark.e2e
@pytest.mark.story
@pytest.mark.parametrize("argv", [["demo"], ["demo", "--org"]], ids=["demo", "demo-org"])
def test_the_whole_demo_reads_cleanly(argv: list[str]) -> None:
    """GIVEN the demo as a user runs it (stdout piped), WHEN its text is read, THEN none of
    the defect classes appear, on stdout or stderr."""
    done = subprocess.run(
        [sys.executable, "-m", "costguard.cli", *argv],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "\033[" not in done.stdout, "piped output is never coloured"
    assert defects(done.stdout + "\n" + done.stderr) == []


def test_the_org_demos_replay_says_yes_or_no_never_a_python_repr() -> None:
    """Defect: ``costguard demo --org`` printed "planned again: False" and "spend changed:
    False", Python's repr of a flag.

    GIVEN the replay of a tick that planned nothing again and changed no spend, WHEN its
    lines are written, THEN they say "no", and never True or False."""
    from costguard_demo.org import _replay_lines

    replay = {
        "tick": 4, "planned": False, "sent": 2, "received_from_queue": 2, "redelivered": 2,
        "ledger": ["already-applied"], "newly_done": 0, "spend_changed": False,
    }  # fmt: skip
    text = "\n".join(_replay_lines({"replay": replay}))
    assert "planned again: no;" in text and "spend changed: no" in text
    assert "False" not in text and "True" not in text
