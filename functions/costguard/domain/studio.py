"""A SageMaker Studio app as the idle-notebook guard sees it (shared by the Studio
inventory adapter, which builds it, and the idle policy, which judges it)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime


@dataclass(frozen=True, slots=True)
class StudioApp:
    """One Studio app (JupyterLab, CodeEditor ...) in a space of a domain.

    ``last_user_activity`` is ``DescribeApp``'s ``LastUserActivityTimestamp``: None when
    Studio did not say (which the idle policy reads as "unknown", never idle).
    """

    domain_id: str
    space_name: str
    app_type: str
    app_name: str
    arn: str
    region: str
    status: str
    instance_type: str | None
    created: datetime | None
    last_user_activity: datetime | None
    tags: Mapping[str, str] = field(default_factory=dict, hash=False)


#: The Studio app types the idle-notebook guard judges (and may delete, never the space).
IDLE_APP_TYPES = frozenset({"JupyterLab", "CodeEditor"})
#: SageMaker's pattern for domain ids, space names and app names: no "/" is possible.
_NAME = re.compile(r"^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}$")
_DOMAIN = re.compile(r"^d-(-*[a-z0-9]){1,61}$")


def app_target_id(domain_id: str, space_name: str, app_type: str, app_name: str) -> str:
    """A Studio app's ``Target.id``: ``<domain id>/<space name>/<app type>/<app name>``.

    e.g. ``d-abc123/team-space/JupyterLab/default``. SageMaker forbids "/" in every
    part, so the id splits back unambiguously (:func:`parse_app_target_id`); it is also
    the tail of the app's ARN (``arn:aws:sagemaker:<region>:<account>:app/<id>``).
    """
    parts = (domain_id, space_name, app_type, app_name)
    _check(parts)
    return "/".join(parts)


def parse_app_target_id(target_id: str) -> tuple[str, str, str, str]:
    """``(domain id, space name, app type, app name)``; ValueError if malformed."""
    parts = target_id.split("/")
    if len(parts) != 4:
        raise ValueError(
            f"{target_id!r} is not a Studio app id (<domain id>/<space>/<app type>/<app name>)"
        )
    domain_id, space_name, app_type, app_name = parts
    _check((domain_id, space_name, app_type, app_name))
    return domain_id, space_name, app_type, app_name


def _check(parts: tuple[str, str, str, str]) -> None:
    domain_id, space_name, app_type, app_name = parts
    if not _DOMAIN.fullmatch(domain_id):
        raise ValueError(f"{domain_id!r} is not a SageMaker domain id (d-...)")
    for label, value in (("space name", space_name), ("app name", app_name)):
        if not _NAME.fullmatch(value):
            raise ValueError(f"{value!r} is not a SageMaker {label}")
    if not re.fullmatch(r"[A-Za-z]+", app_type):
        raise ValueError(f"{app_type!r} is not a SageMaker app type")
