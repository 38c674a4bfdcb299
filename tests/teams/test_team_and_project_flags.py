"""``costguard report --team`` and ``--project`` name what the scan names: a team or project
typed full-width, or with a trailing space, narrows to it rather than to nothing."""

from __future__ import annotations

import pytest

from costguard.cli import build_parser


@pytest.mark.parametrize(
    ("flag", "typed", "named"),
    [
        ("--team", "ｒｅｓｅａｒｃｈ", "research"),
        ("--team", "research ", "research"),
        ("--team", "deep\u00a0learning", "deep learning"),
        ("--project", "ｌｌｍ", "llm"),
        ("--project", " llm", "llm"),
        ("--project", "Vision\u00a0Research", "Vision Research"),
    ],
)
def test_a_name_is_read_as_the_scan_reads_its_tag(flag: str, typed: str, named: str) -> None:
    """Defect: ``report --team`` compared the name as typed with the team the scan settled
    (NFKC, spaces collapsed): ``--team "research "`` or ``--team ｒｅｓｅａｒｃｈ`` narrowed the
    report to no project at all, and the user read an empty team as a team that spent $0."""
    args = build_parser().parse_args(["report", flag, typed])
    got = getattr(args, flag[2:])
    assert (got[0] if isinstance(got, list) else got) == named  # --project may repeat


def test_a_team_name_with_an_invisible_character_is_bad_input(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A Hangul filler (printable, invisible) can name no team a tag carries: exit 2."""
    with pytest.raises(SystemExit) as done:
        build_parser().parse_args(["report", "--team", "research\u3164"])
    assert done.value.code == 2
    assert "U+3164" in capsys.readouterr().err
