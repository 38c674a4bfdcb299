"""The names of the environment variables the CDK stack sets and the Lambdas read.

``Env.REGIONS`` is ``"COSTGUARD_REGIONS"``: each setting's variable is declared once, with
the setting (:mod:`costguard.config_spec`), and looked up there when first named; the few
variables that are not settings are listed here. Light on purpose: the Slack notifier names
its variable without loading the settings' pydantic models into its cold start.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Final

#: Variables the stack sets that are not settings, and who reads them.
OTHER_VARIABLES: Final[Mapping[str, str]] = {
    "COSTGUARD_SLACK_SECRET_NAME": "the Slack notifier's webhook secret, read by its handler",
    "COSTGUARD_SLACK_SIGNING_SECRET": "the Slack notifier's signing secret for answer buttons "
    "(unset: warnings carry no buttons), read by its handler",
    "COSTGUARD_ANSWER_ADMINS": "who may answer any warning besides its owners (comma-separated "
    "Slack IDs or e-mail addresses), read by the answer endpoint's and the guards' handlers",
    "COSTGUARD_LINK_SECRET": "the answer endpoint's key for e-mail links, read by its handler "
    "and by the guards' (which sign their warnings' links)",
    "COSTGUARD_ANSWER_URL": "the answer endpoint's address, the base of e-mailed answer links "
    "(unset: warnings carry no links), read by the guards' handlers",
    "COSTGUARD_SLACK_BOT_TOKEN": "the Slack app's bot token (the Exempt… dialog's views.open), "
    "read by the answer endpoint's handler",
    "COSTGUARD_GUARD_FUNCTIONS": "the answer endpoint's map of guard -> its Lambda (JSON)",
    "COSTGUARD_TIME_ZONE": "the answer endpoint's time zone for 'keep until tomorrow 09:00'",
    "POWERTOOLS_METRICS_NAMESPACE": "Powertools' own",
    "POWERTOOLS_SERVICE_NAME": "Powertools' own",
}


def _short(variable: str) -> str:
    return variable.removeprefix("COSTGUARD_").removeprefix("POWERTOOLS_")


_OTHERS: Final = {_short(v): v for v in OTHER_VARIABLES}


@functools.cache
def _declared() -> dict[str, str]:
    from costguard.config_spec import ENV_SETTINGS  # noqa: PLC0415 - only when a setting is named

    return {_short(s.env_var): s.env_var for s in ENV_SETTINGS if s.env_var}


class _EnvNames:
    """``Env.TTL_HOURS`` is ``"COSTGUARD_TTL_HOURS"``; ``Env.SERVICE_NAME`` is Powertools'
    ``POWERTOOLS_SERVICE_NAME``. A name nobody declared is an AttributeError
    (tests/unit/test_settings_spec.py also reads every ``Env.`` in the tree), so the stack
    and the handlers cannot drift apart."""

    def __getattr__(self, name: str) -> str:
        variable = _OTHERS.get(name) or _declared().get(name)
        if variable is None:
            raise AttributeError(f"no CostGuard variable is called {name!r}")
        return variable

    def __dir__(self) -> list[str]:
        return sorted({*_OTHERS, *_declared()})


#: The environment variables the handlers read and the CDK stack sets (``Env.REGIONS``).
Env: Final = _EnvNames()
