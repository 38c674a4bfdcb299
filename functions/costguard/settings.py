"""Runtime settings for the Lambdas and the CLI, read once from the environment.

Every field, with its variable, default and checks, is declared in :mod:`costguard.config_spec`
(``ContextAndEnv`` and ``EnvOnly``); this module reads the variables (named by
:data:`costguard.env.Env`, which the CDK stack uses too) and reports what is wrong with them.
"""

from __future__ import annotations

from collections.abc import Mapping
from copy import copy
from decimal import Decimal
from typing import Any

from pydantic import ValidationError
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

from costguard.config_spec import (
    ENV_SETTINGS,
    REGION,
    ContextAndEnv,
    EnvOnly,
    Kind,
    org_problem,
    project_table,
    team_table,
)
from costguard.domain.attribution import ProjectConfig
from costguard.domain.tags import TagKeys
from costguard.domain.teams import TeamConfig
from costguard.domain.text import truncate

__all__ = [
    "ENV_VARS",
    "FIELD_ENV",
    "ORG_ENV_VARS",
    "REGION",
    "Settings",
    "SettingsError",
    "one_line",
    "validation_problems",
]

#: Every environment variable :meth:`Settings.from_env` reads (the stack must set them all).
ENV_VARS: tuple[str, ...] = tuple(s.env_var for s in ENV_SETTINGS if s.env_var)
#: Those only an Organization hub's Lambdas get (unset: one account).
ORG_ENV_VARS: tuple[str, ...] = tuple(s.env_var for s in ENV_SETTINGS if s.env_var and s.org)
#: Settings field -> the environment variable it is read from, so errors name what to fix.
FIELD_ENV: dict[str, str] = {s.name: s.env_var for s in ENV_SETTINGS if s.env_var}


class SettingsError(ValueError):
    """The configuration is wrong; the message says which variable and why."""

    @classmethod
    def of(cls, problems: list[str]) -> SettingsError:
        """One problem on the heading's line; several as ``field: message`` lines under it."""
        if len(problems) == 1:
            return cls(f"invalid CostGuard settings: {problems[0]}")
        return cls("invalid CostGuard settings:\n" + "\n".join(f"  {p}" for p in problems))


#: Error types whose message is ours (a validator's ``ValueError``) and already says what was given.
_OWN_MESSAGE = frozenset({"value_error", "assertion_error", "missing", "extra_forbidden"})
_OWN_CONTEXT_MESSAGE = frozenset({"value_error", "assertion_error"})


def one_line(text: str, limit: int = 200) -> str:
    """Control characters (newlines, escapes) shown escaped: one error is one terminal line."""
    flat = "".join(ch if ch.isprintable() else repr(ch)[1:-1] for ch in text.strip())
    return truncate(flat, limit)


def validation_problems(
    exc: ValidationError, names: Mapping[str, str] | None = None, *, context: bool = False
) -> list[str]:
    """A pydantic error as one line per problem, without pydantic's documentation links.

    ``names`` renames a top-level field to what the user actually wrote (an environment
    variable, a command-line option, a context key); nested places follow as ``.key`` or
    ``[index]``. Variables and options read ``NAME: message (got 'x')``; CDK context
    (``context``) reads ``\\`key\\` message, got 'x'``, and a check across keys is its message.
    """
    names = names or {}
    problems = []
    for err in exc.errors(include_url=False):
        loc = err["loc"]
        message = str(err["msg"]).removeprefix("Value error, ").removeprefix("Assertion failed, ")
        given: Any = err.get("input")
        head = names.get(str(loc[0]), str(loc[0])) if loc else "value"
        path = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in loc[1:])
        if context:
            if err["type"] not in _OWN_CONTEXT_MESSAGE and ", got " not in message:
                message += f", got {given!r}"
            problems.append(one_line(f"`{head}`{path} {message}" if loc else message, 300))
            continue
        if err["type"] in _OWN_MESSAGE:
            pass
        elif isinstance(given, str | int | float | Decimal):
            message += f" (got {one_line(repr(given), 60)})"
        elif given is not None:
            message += f" (got {type(given).__name__})"
        problems.append(one_line(f"{head}{path}: {message}"))
    return problems


def _required(name: str) -> Any:
    """The declared field without its default: the Lambdas must be told."""
    info: FieldInfo = copy(ContextAndEnv.model_fields[name])
    info.default = PydanticUndefined
    return info


class Settings(EnvOnly, ContextAndEnv):
    """What the Lambdas and the CLI run with: the declared settings that have a variable."""

    #: Defaulted for a deployment; a Lambda or the CLI is told (or falls back to its region).
    regions: tuple[str, ...] = _required("regions")

    @property
    def tag_keys(self) -> TagKeys:
        return TagKeys(project=self.project_tag_keys)

    def project_table(self) -> dict[str, ProjectConfig]:
        """The central table, names normalised as project tags are (see config_spec)."""
        return project_table(self.projects)

    def team_table(self) -> dict[str, TeamConfig]:
        """The central team table, names normalised as team tags are (see config_spec)."""
        return team_table(self.teams)

    @classmethod
    def from_env(cls, environ: Mapping[str, str]) -> Settings:
        """Build settings from environment variables, with errors that name the variable.

        An empty variable is unset, except a flag (``COSTGUARD_DRY_RUN=`` is an error, not
        the default), a setting without a default (``COSTGUARD_REGIONS=`` is an error) and a
        setting for which empty is a value of its own (``COSTGUARD_S3_KEEP_PREFIX=``: no keep
        prefix; :attr:`SettingSpec.empty_is_value`), which the stack writes for ``-c key=``.
        An unset variable falls back to its spec's ``env_fallbacks``: without
        ``COSTGUARD_REGIONS`` the region the Lambda or the CLI runs in is scanned.
        """
        raw: dict[str, str] = {}
        missing = []
        for spec in ENV_SETTINGS:
            assert spec.env_var is not None
            text = environ.get(spec.env_var)
            empty_means_unset = spec.kind is not Kind.FLAG and not spec.env_required
            if text is None or (text == "" and empty_means_unset and not spec.empty_is_value):
                text = next((environ[f] for f in spec.env_fallbacks if environ.get(f)), None)
            if text is not None:
                raw[spec.name] = text
            elif spec.env_required:
                nor = "".join(f", nor {f}" for f in spec.env_fallbacks)
                missing.append(f"{spec.env_var} is not set{nor} (e.g. {spec.to_env(spec.default)})")
        if missing:
            raise SettingsError.of(missing)
        try:
            settings = cls.model_validate(raw)
        except ValidationError as exc:
            # ``from None``: the chained pydantic text would bring its links back into logs.
            raise SettingsError.of(validation_problems(exc, FIELD_ENV)) from None
        try:
            settings.project_table()  # names and owners held to the tag contract
        except ValueError as exc:
            raise SettingsError.of([one_line(f"{FIELD_ENV['projects']}: {exc}")]) from None
        try:
            settings.team_table()
        except ValueError as exc:
            raise SettingsError.of([one_line(f"{FIELD_ENV['teams']}: {exc}")]) from None
        problem = org_problem(
            settings.org_accounts, settings.org_id, accounts_name=FIELD_ENV["org_accounts"]
        )
        if problem:
            raise SettingsError.of([f"{FIELD_ENV['org_id']}: {problem}"])
        return settings
