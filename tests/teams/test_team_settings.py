"""The central team table and a project's team in the project table: names held to the
tag contract, refused with the variable named (the synth and the Lambdas read them alike)."""

from __future__ import annotations

from decimal import Decimal

import pytest

from costguard.env import Env
from costguard.settings import Settings, SettingsError


def test_the_tables_are_read_with_names_normalised_as_tags_are() -> None:
    settings = Settings.from_env(
        {
            Env.REGIONS: "us-east-1",
            Env.PROJECTS_JSON: '{"vision": {"team": "ｒｅｓｅａｒｃｈ"}}',
            Env.TEAMS_JSON: '{"research": {"budget": "$20,000", "owners": ["lead@example.com"]}}',
        }
    )
    assert settings.project_table()["vision"].team == "research"
    research = settings.team_table()["research"]
    assert (research.budget, research.owners) == (Decimal(20000), ("lead@example.com",))


@pytest.mark.parametrize(
    ("variable", "value", "says"),
    [
        (Env.TEAMS_JSON, '{"re\\u200bsearch": {}}', "U+200B"),
        (Env.TEAMS_JSON, '{"research": {"budget": "lots"}}', "team 'research': budget"),
        (Env.TEAMS_JSON, '{"research": {"budget": true}}', "must be an amount in USD"),
        (Env.TEAMS_JSON, '{"research": {}, "ｒｅｓｅａｒｃｈ": {}}', "are both 'research'"),
        (Env.PROJECTS_JSON, '{"vision": {"team": ""}}', "team '' is empty"),
    ],
)
def test_a_bad_table_is_refused_naming_the_variable(variable: str, value: str, says: str) -> None:
    with pytest.raises(SettingsError) as raised:
        Settings.from_env({Env.REGIONS: "us-east-1", variable: value})
    assert variable in str(raised.value) and says in str(raised.value)
