"""One settings spec: the models, the variables, cdk.json and the docs agree with it."""

from __future__ import annotations

import inspect
import json
import re
from datetime import timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import BaseModel

from costguard.config_spec import (
    BY_NAME,
    CONTEXT_SETTINGS,
    ENV_SETTINGS,
    SETTINGS,
    Kind,
    SettingSpec,
    markdown_table,
)
from costguard.domain.alerts import AnomalyPolicy
from costguard.domain.spend import budget_status
from costguard.env import Env
from costguard.services.alerts import AlertSettings
from costguard.services.scan import ScanSettings
from costguard.settings import ENV_VARS, FIELD_ENV, Settings
from costguard_infra.config import CONTEXT_KEYS, CostGuardConfig

ROOT = Path(__file__).resolve().parents[2]
#: Variables in :class:`Env` that are not settings, and why.
NOT_SETTINGS = {
    Env.SLACK_SECRET_NAME: "the Slack notifier's webhook secret, read by its handler",
    Env.SLACK_SIGNING_SECRET: "the Slack notifier's signing secret for answer buttons",
    Env.LINK_SECRET: "the answer endpoint's key for e-mail links",
    Env.ANSWER_URL: "the answer endpoint's address, the base of e-mailed answer links",
    Env.SLACK_BOT_TOKEN: "the answer endpoint's Slack bot token (the Exempt… dialog)",
    Env.ANSWER_ADMINS: "who may answer any warning besides its owners",
    Env.GUARD_FUNCTIONS: "the answer endpoint's map of guard -> its Lambda",
    Env.TIME_ZONE: "the answer endpoint's time zone",
    Env.METRICS_NAMESPACE: "Powertools' own",
    Env.SERVICE_NAME: "Powertools' own",
}


def _env_names() -> set[str]:
    return {getattr(Env, k) for k in dir(Env)}


# -- the models are the spec ----------------------------------------------------------------


def _assert_model_is_spec(model: type[BaseModel], specs: tuple[SettingSpec, ...]) -> None:
    assert list(model.model_fields) == [s.name for s in specs]
    for spec in specs:
        actual = model.model_fields[spec.name]
        assert actual.annotation == spec.type, spec.name
        assert spec.doc, f"{spec.name}: declared without its one-line docstring"
        assert actual.alias is None, spec.name
        if actual.is_required():
            assert spec.env_required and model is Settings, spec.name
            assert spec.env_fallbacks, f"{spec.name}: required, so it needs a fallback"
        else:
            assert actual.get_default(call_default_factory=True) == spec.default, spec.name


def test_settings_has_exactly_the_settings_with_a_variable() -> None:
    _assert_model_is_spec(Settings, tuple(sorted(ENV_SETTINGS, key=_settings_order)))
    assert [n for n, f in Settings.model_fields.items() if f.is_required()] == ["regions"]


def _settings_order(spec: SettingSpec) -> int:
    return list(Settings.model_fields).index(spec.name)


def test_the_context_model_has_exactly_the_settings_with_a_context_key() -> None:
    _assert_model_is_spec(CostGuardConfig, CONTEXT_SETTINGS)
    assert tuple(s.context_key for s in CONTEXT_SETTINGS) == CONTEXT_KEYS


def test_the_models_hold_the_declared_bounds() -> None:
    # GIVEN the declaration's bounds WHEN each model reads its fields THEN they are the same.
    for spec in SETTINGS:
        declared = _declared(spec.name).metadata
        for model in (Settings, CostGuardConfig):
            field = model.model_fields.get(spec.name)
            assert field is None or field.metadata == declared, (model, spec.name)
    assert Settings.model_fields["regions"].metadata[0].min_length == 1  # required, still bounded


def _declared(name: str) -> Any:
    from costguard.config_spec import ContextAndEnv, ContextOnly, EnvOnly

    for model in (ContextAndEnv, ContextOnly, EnvOnly):
        if name in model.model_fields:
            return model.model_fields[name]
    raise KeyError(name)


def test_each_setting_is_declared_once_with_a_way_in() -> None:
    names = [s.name for s in SETTINGS]
    keys = [s.context_key for s in SETTINGS if s.context_key]
    variables = [s.env_var for s in SETTINGS if s.env_var]
    assert len(names) == len(set(names))
    assert len(keys) == len(set(keys))
    assert len(variables) == len(set(variables))
    assert all(s.context_key or s.env_var for s in SETTINGS)
    assert all(re.fullmatch(r"[a-z][A-Za-z]+", k) for k in keys)  # camelCase
    assert all(s.doc.strip() and "|" not in s.doc for s in SETTINGS)


def test_every_costguard_variable_is_a_setting_or_listed_as_not_one() -> None:
    assert set(ENV_VARS) | set(NOT_SETTINGS) == _env_names()
    assert not set(ENV_VARS) & set(NOT_SETTINGS)
    assert {s.name: s.env_var for s in ENV_SETTINGS} == FIELD_ENV


def test_every_default_is_valid_and_survives_its_text() -> None:
    # GIVEN each default written as -c text and as its variable, WHEN read, THEN the default.
    as_context = {s.context_key: s.to_env(s.default) for s in CONTEXT_SETTINGS}
    assert CostGuardConfig.from_context(as_context) == CostGuardConfig()
    as_variables = {s.env_var: s.to_env(s.default) for s in ENV_SETTINGS if s.default is not None}
    assert Settings.from_env(as_variables) == Settings(regions=BY_NAME["regions"].default)


def _empty_context_reads_as(spec: SettingSpec) -> Any:
    """What ``-c <key>=`` deploys as, or the ValueError it is refused with."""
    from costguard_infra.config import ConfigError

    try:
        return getattr(CostGuardConfig.from_context({spec.context_key: ""}), spec.name)
    except ConfigError as exc:
        return exc


def test_empty_is_a_value_exactly_where_a_deployment_may_give_it() -> None:
    """GIVEN each setting that the stack writes to a variable from context
    WHEN it is given empty (``-c key=``)
    THEN it is declared ``empty_is_value`` exactly when that is accepted and differs from
    the default: only then must the Lambda tell "empty" from "unset"."""
    for spec in CONTEXT_SETTINGS:
        if spec.env_var is None:
            assert not spec.empty_is_value, spec.name  # never a variable: nothing to read back
            continue
        deployed = _empty_context_reads_as(spec)
        differs = not isinstance(deployed, Exception) and deployed != spec.default
        assert spec.empty_is_value == differs, (spec.name, deployed)
    assert not [s.name for s in SETTINGS if s.empty_is_value and not s.context_key]


@pytest.mark.parametrize(
    "spec", [s for s in ENV_SETTINGS if s.empty_is_value], ids=lambda s: s.name
)
def test_an_empty_variable_is_empty_where_empty_is_a_value(spec: SettingSpec) -> None:
    """GIVEN a setting for which empty is a value (``sweepKeepPrefix``: no keep prefix)
    WHEN its variable is set and empty, or not set at all
    THEN the Lambda reads empty as empty, and only an unset variable as the default.

    Defect: ``-c sweepKeepPrefix=`` could not turn the keep prefix off: the stack wrote an
    empty variable and ``Settings.from_env`` read empty as unset, so ``keep/`` stayed
    protected, where the README says an empty value means no keep prefix.
    """
    base = {Env.REGIONS: "us-east-1"}
    assert getattr(Settings.from_env({**base, spec.env_var or "": ""}), spec.name) == ""
    assert getattr(Settings.from_env(base), spec.name) == spec.default != ""


def test_an_empty_variable_is_still_unset_where_empty_is_no_value() -> None:
    # GIVEN variables set but empty for settings where "" means nothing (a table name, a
    # topic) THEN they read as unset, as before
    settings = Settings.from_env({Env.REGIONS: "us-east-1", Env.TABLE_NAME: "", Env.SCOPE: ""})
    assert (settings.table_name, settings.scope) == (None, BY_NAME["scope"].default)


def test_a_reserved_setting_says_so_in_its_doc() -> None:
    for spec in SETTINGS:
        assert bool(spec.reserved) == ("not used yet" in spec.doc.lower()), spec.name


def test_the_services_defaults_are_the_spec_defaults() -> None:
    # The services keep their own defaults for tests and the CLI; they must not drift.
    default = {s.name: s.default for s in SETTINGS}
    alerts, anomaly, scan = AlertSettings(scope="x"), AnomalyPolicy(), ScanSettings("x", ("r",))
    assert alerts.thresholds == default["budget_thresholds"]
    assert alerts.digest_hour_utc == default["digest_hour_utc"]
    assert alerts.scan_failed_after == default["scan_failed_alert_after"]
    assert alerts.advice_alerts == default["advice_alerts"]
    assert alerts.advice_min_usd_per_month == default["advice_min_monthly_usd"]
    assert anomaly.min_ratio == default["anomaly_min_ratio"]
    assert anomaly.min_delta_usd_per_hour == default["anomaly_min_usd_per_hour"]
    assert anomaly.cooldown == timedelta(minutes=default["anomaly_cooldown_minutes"])
    assert scan.warning_pct == default["warning_pct"]
    assert scan.tag_keys.project == default["project_tag_keys"]
    assert (
        inspect.signature(budget_status).parameters["warning_pct"].default
        == (default["warning_pct"])
    )


# -- cdk.json and the docs ------------------------------------------------------------------


def test_cdk_json_holds_only_cdks_own_flags() -> None:
    # The defaults live in config_spec.py alone; cdk.json once said two regions, the code one.
    context = json.loads((ROOT / "cdk.json").read_text())["context"]
    assert not set(context) & set(CONTEXT_KEYS)
    assert all(key.startswith("@aws-cdk/") for key in context)
    assert "@aws-cdk/core:target-partitions" in context


def test_the_table_lists_every_context_key_with_its_default() -> None:
    table = markdown_table()
    for spec in CONTEXT_SETTINGS:
        assert f"| `{spec.context_key}` | {spec.shown_default()} |" in table
    assert "| `regions` | `us-east-1,us-west-2` | `COSTGUARD_REGIONS` |" in table
    assert "| `scanRate` | `15 minutes` | `COSTGUARD_SCAN_RATE` |" in table
    assert "| `orgMaxConcurrency` | `20` | deploy only |" in table


# -- one reading of the string forms ----------------------------------------------------------

LIST = BY_NAME["project_tag_keys"]


@given(st.lists(st.text(), max_size=5))
def test_a_list_survives_its_variable_whatever_its_items(items: list[str]) -> None:
    # A tag key may hold a comma or spaces (EC2 allows any character): comma-separated
    # text would split or trim it, so such a list is written as JSON.
    assert LIST.read(LIST.to_env(items)) == items


@pytest.mark.parametrize(
    ("items", "text"),
    [
        (["us-east-1", "us-west-2"], "us-east-1,us-west-2"),
        (["Cost Center", "team"], "Cost Center,team"),
        (["team,x"], '["team,x"]'),
        ([" padded"], '[" padded"]'),
        (["[bracket"], '["[bracket"]'),
        ([], "[]"),
    ],
)
def test_a_list_is_comma_separated_unless_that_would_change_it(items: list[str], text: str) -> None:
    assert LIST.to_env(items) == text


def _valid_name(name: str) -> bool:
    from costguard.domain.tags import parse_project

    return parse_project(name)[0] == name  # already in the form the tag contract keeps


@given(
    st.dictionaries(
        st.text().filter(_valid_name), st.fixed_dictionaries({"budget": st.integers(1, 10**9)})
    )
)
def test_the_project_table_survives_its_variable(table: dict[str, Any]) -> None:
    spec = BY_NAME["projects"]
    config = CostGuardConfig(projects=table)
    assert json.loads(spec.to_env(config.projects)) == {
        k: {"budget": v["budget"], "owners": []} for k, v in table.items()
    }


@pytest.mark.parametrize("value", [Decimal("85.5"), Decimal("1E+1"), Decimal("0.0001")])
def test_a_decimal_survives_its_variable(value: Decimal) -> None:
    spec = BY_NAME["anomaly_min_usd_per_hour"]
    assert Decimal(spec.read(spec.to_env(value))) == value


def test_every_kind_is_used() -> None:
    assert {s.kind for s in SETTINGS} == set(Kind)


def test_every_variable_name_the_code_uses_is_declared() -> None:
    # An `Env` name is looked up in the declaration at run time: a misspelt name anywhere in the
    # tree (a branch no test runs) is caught here, as mypy caught it when Env was a class.
    used = set()
    for folder in ("functions", "infra", "tests", "benchmarks"):
        for path in (ROOT / folder).rglob("*.py"):
            used |= set(re.findall(r"\bEnv\.([A-Z][A-Z0-9_]*)\b", path.read_text()))
    assert used, "no use of Env found: the search is wrong"
    unknown = sorted(n for n in used if n not in dir(Env))
    assert not unknown
    with pytest.raises(AttributeError, match="no CostGuard variable is called 'REGION'"):
        getattr(Env, "REGION")  # noqa: B009 - the misspelling, spelt out
