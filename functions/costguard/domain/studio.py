"""A SageMaker Studio app as the idle-notebook guard sees it (shared by the Studio
inventory adapter, which builds it, and the idle policy, which judges it)."""

from __future__ import annotations

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
