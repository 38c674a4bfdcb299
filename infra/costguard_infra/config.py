"""Deployment configuration from CDK context (defaults from the spec, ``-c key=value``).

Every field is declared once in :mod:`costguard.config_spec` (``ContextAndEnv`` and
``ContextOnly``), with its default, validation and docs; this module adds the checks across
keys and what the stack derives from them. Context given with ``-c`` arrives as strings, so
every field also accepts its string form (``-c dryRun=false``,
``-c regions=us-east-1,us-west-2``), read as the Lambda reads its variable.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError, model_validator

from costguard.config_spec import (
    CONTEXT_SETTINGS,
    LAMBDA_ENVIRONMENT_BYTES,
    ORG_CONTEXT_SETTINGS,
    ORG_DISCOVER,
    SHARED_CONTEXT_SETTINGS,
    STACK_VARIABLES_BYTES,
    ContextAndEnv,
    ContextOnly,
    SettingSpec,
    org_problem,
    rate_minutes,
)
from costguard.domain.org_roles import OrgRoles
from costguard.env import Env
from costguard.settings import validation_problems

#: Every context key CostGuard reads (the app reads only these from CDK's context).
CONTEXT_KEYS: tuple[str, ...] = tuple(s.context_key for s in CONTEXT_SETTINGS if s.context_key)
#: Context key -> field name, and back.
_KEY_FIELD = {s.context_key: s.name for s in CONTEXT_SETTINGS if s.context_key}
_FIELD_KEY = {name: key for key, name in _KEY_FIELD.items()}


class ConfigError(ValueError):
    """A context value is wrong; the message names the key and shows what was given."""


class CostGuardConfig(ContextOnly, ContextAndEnv):
    """The deployment: the declared settings that have a context key."""

    @model_validator(mode="after")
    def _org_complete(self) -> CostGuardConfig:
        problem = org_problem(self.org_accounts, self.org_id, accounts_name="`orgAccounts`")
        if problem:
            raise ValueError(f"`orgId` {problem}, got nothing")
        if self.org_member_role.casefold() == OrgRoles.MEMBER_ACT.casefold():
            # The scan consumers would be granted the guards' role: they could act.
            raise ValueError(
                f"`orgMemberRole` must not be `{OrgRoles.MEMBER_ACT}`, the guards' act role "
                "(the read role is a separate, read-only role), got "
                f"`{self.org_member_role}`"
            )
        if self.org_mode and self.cost_explorer:
            # Each slice is scanned through the member read role, which grants no Cost
            # Explorer: every scan would report a failing source instead of reconciling.
            raise ValueError(
                "`costExplorer` is not available with `orgAccounts` yet (the member roles "
                "grant no Cost Explorer); leave it false"
            )
        if self.org_mode and self.answers:
            # The answer endpoint invokes the single-account guard Lambdas; a hub has none.
            raise ValueError(
                "`answers` is not available with `orgAccounts` yet (the hub has no guard "
                "Lambdas to hand answers to); leave it false"
            )
        return self

    @property
    def org_mode(self) -> bool:
        """An Organization hub (``orgAccounts`` set), not a single-account deployment."""
        return bool(self.org_accounts)

    @property
    def org_discover(self) -> bool:
        """The hub lists the Organization's accounts (and may read their tags)."""
        return self.org_accounts == (ORG_DISCOVER,)

    @property
    def price_refresh_minutes(self) -> int:
        return rate_minutes(self.price_refresh_rate)

    @property
    def scan_rate_minutes(self) -> int:
        return rate_minutes(self.scan_rate)

    def environment(self) -> dict[str, str]:
        """The scan Lambda's variables for every setting that has one and a context key,
        except the Organization hub's (:meth:`org_environment`).

        The stack adds the runtime-only ones (table, topic, scope…); ``Settings.from_env``
        reads them all back to the same values (tests/infra/test_config.py).
        """
        return self._variables(SHARED_CONTEXT_SETTINGS)

    def org_environment(self) -> dict[str, str]:
        """The variables only the Organization hub's Lambdas get (on top of :meth:`environment`)."""
        return self._variables(ORG_CONTEXT_SETTINGS)

    def _variables(self, specs: tuple[SettingSpec, ...]) -> dict[str, str]:
        return {s.env_var: s.to_env(getattr(self, s.name)) for s in specs if s.env_var is not None}

    def environment_problem(self) -> str | None:
        """Why the largest Lambda environment (the scan's, with answers a guard's, or in
        Organization mode the hub consumer's) would not fit AWS Lambda's 4 KB, if it would
        not."""
        deployed = CONTEXT_SETTINGS if self.org_mode else SHARED_CONTEXT_SETTINGS
        sizes = {
            # As JSON: Lambda counts the encoding too (quotes, and the escapes in JSON values).
            s.context_key: len(json.dumps({s.env_var: s.to_env(getattr(self, s.name))}).encode())
            for s in deployed
            if s.env_var is not None and s.context_key is not None
        }
        if self.answers and not self.org_mode:
            # The guards' Lambdas carry the scan's variables, the admins and the zone on top.
            admins = ",".join(self.answer_admins)
            sizes["answerAdmins"] = len(json.dumps({Env.ANSWER_ADMINS: admins}).encode())
            sizes["timeZone"] = len(json.dumps({Env.TIME_ZONE: self.time_zone}).encode())
        room = LAMBDA_ENVIRONMENT_BYTES - STACK_VARIABLES_BYTES
        if sum(sizes.values()) <= room:
            return None
        largest = sorted(sizes, key=lambda k: -sizes[k])[:2]
        which = "the hub consumer Lambda's" if self.org_mode else "the scan Lambda's"
        hint = (
            f" (with many accounts, use `-c orgAccounts={ORG_DISCOVER}` and opt accounts out by tag)"
            if largest[0] == "orgAccounts"
            else ""
        )
        return (
            f"`{largest[0]}` makes {which} environment too large{hint}: the settings take "
            f"{sum(sizes.values())} bytes, and AWS Lambda allows {LAMBDA_ENVIRONMENT_BYTES} "
            f"in all ({room} with what the stack adds); largest: "
            + ", ".join(f"`{k}` {sizes[k]} bytes" for k in largest)
        )

    @classmethod
    def from_context(cls, context: Mapping[str, Any]) -> CostGuardConfig:
        """Validate CDK context; errors read "`key` must be ..., got ..." per bad key."""
        raw = {_KEY_FIELD[k]: v for k, v in context.items() if k in _KEY_FIELD and v is not None}
        try:
            config = cls.model_validate(raw)
        except ValidationError as exc:
            problems = validation_problems(exc, _FIELD_KEY, context=True)
            raise ConfigError("invalid CostGuard context: " + "; ".join(problems)) from None
        problem = config.environment_problem()
        if problem:
            raise ConfigError(f"invalid CostGuard context: {problem}")
        return config
