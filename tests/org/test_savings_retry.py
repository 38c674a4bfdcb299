"""What the guards saved across accounts when noting the account fails once."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from costguard.domain.calendar import month_key
from costguard.domain.tags import Tags
from costguard.env import Env
from costguard.services import org_act as org_act_service
from tests.org.test_guards_across_accounts import (  # noqa: F401 - the hub fixture, by name
    HUB,
    REGION,
    A,
    H,
    _consume,
    _member,
    hub,
)


def test_a_stop_whose_index_write_failed_is_counted_once_its_retry_succeeds(
    hub: dict[str, Any],  # noqa: F811 - the fixture imported above
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """IndexContendedError says "the run is retried; its actions are claimed and done, so
    the retry only writes the index". But the retry finds the notebook stopped (skipped,
    not acted) and never writes the index: the roll-up's savings leave out that account's
    stop for the rest of the month. A throttled state write, or a timeout between the stop
    and the note, loses it the same way."""
    from moto.backends import get_backend

    from costguard.adapters.dynamodb import DynamoDbLedger
    from costguard.services.org_act import ACTED_ACCOUNTS, OrgSavings

    monkeypatch.setenv(Env.SAGEMAKER_TAGS, "per-resource")
    now = datetime(2026, 11, 18, 14, tzinfo=UTC)
    # GIVEN an idle notebook in A, warned by a first run
    sm = _member(hub, A).client("sagemaker", region_name=REGION)
    sm.create_notebook_instance(
        NotebookInstanceName="research",
        InstanceType="ml.t3.medium",
        RoleArn=f"arn:aws:iam::{A}:role/nb",
        Tags=[{"Key": Tags.PROJECT, "Value": "llm"}, {"Key": Tags.OWNER, "Value": "a@x.io"}],
    )
    nb = get_backend("sagemaker")[A][REGION].notebook_instances["research"]
    nb.creation_time = nb.last_modified_time = (now - 24 * H).replace(tzinfo=None).isoformat()  # type: ignore[assignment]
    run: list[tuple[str, str, tuple[str, ...]]] = [("idle-notebooks", A, (REGION,))]
    assert _consume(hub, run, now) == {"batchItemFailures": []}
    # AND the run past the grace period stops it, but its write of the index fails
    real_note = org_act_service.note_acted

    def contended(*_: Any) -> None:
        raise org_act_service.IndexContendedError("8 concurrent writes in a row")

    monkeypatch.setattr(org_act_service, "note_acted", contended)
    later = now + 2 * H
    assert _consume(hub, run, later)["batchItemFailures"]  # the run fails: SQS retries it
    # (the index is written before anything is done, so the failed write stopped nothing)
    assert (
        sm.describe_notebook_instance(NotebookInstanceName="research")["NotebookInstanceStatus"]
        == "InService"
    )
    # WHEN SQS delivers it again a minute later and the index write goes through
    monkeypatch.setattr(org_act_service, "note_acted", real_note)
    retry = later + H / 60
    assert _consume(hub, run, retry) == {"batchItemFailures": []}
    # THEN A is in the month's acted-accounts index, and the roll-up counts llm's stop
    ledger = DynamoDbLedger(hub["session"].client("dynamodb", region_name=REGION), "ledger")
    month = month_key(retry)
    assert ledger.get_state(HUB, f"{ACTED_ACCOUNTS}/{month}")[0].get("accounts") == [A]
    saved = OrgSavings(ledger, ledger, HUB)(month, retry + H)
    assert "llm" in saved and saved["llm"].actions == 1
