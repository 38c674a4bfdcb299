"""The ledger on one DynamoDB table (``pk``/``sk`` strings, TTL attribute ``ttl``).

Item layout (``<p>`` is the project, percent-encoded so any name is a safe key):

=============================================  ======================  ==========================
pk                                             sk                      what
=============================================  ======================  ==========================
``SCOPE#<scope>``                              ``WATERMARK``           when the last scan committed
``SCOPE#<scope>#MONTH#<YYYY-MM>``              ``PROJECT#<p>``         month-to-date per project
``SCOPE#<scope>#OBS``                          ``<resource key>``      last observation (TTL 62 d)
``SCOPE#<scope>#FINDINGS#<YYYY-MM-DD>``        ``<code>#<resource>``   findings of the day (TTL 35 d)
``ONCE#<namespace>``                           ``<key>``               exactly-once records
``SCOPE#<scope>#AUDIT#<YYYY-MM>``              ``<time>#<event id>``   audit trail (kept)
=============================================  ======================  ==========================

Exactly-once accrual: the watermark moves by compare-and-set inside the same
transaction as the first 99 project-month additions, and every project row
remembers the last scan it took (``applied_at``), so a retried scan adds nothing
twice and a concurrent scan is refused instead of double-counted.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any
from urllib.parse import quote

from botocore.exceptions import ClientError

from costguard.adapters.aws import chunks
from costguard.domain.calendar import month_start, next_month_start
from costguard.domain.findings import Finding, FindingCode, Severity
from costguard.domain.spend import AccrualKey, Increment, Observation
from costguard.ports import AuditEvent, CommitOutcome, ProjectMonth, ScanCommit

UNATTRIBUTED_KEY = "%UNATTRIBUTED"  # quote() never yields a bare '%', so no project can collide
TRANSACT_LIMIT = 100
BATCH_WRITE_LIMIT = 25
OBSERVATION_TTL = timedelta(days=62)
FINDING_TTL = timedelta(days=35)
RATE_TTL = timedelta(days=3)
ALERT_TTL = timedelta(days=400)


class LedgerError(Exception):
    """The ledger table refused a write for a reason other than a lost race."""


def stamp(moment: datetime) -> str:
    """Fixed-width UTC ISO-8601, so that string order is time order in conditions."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def parse_stamp(text: str) -> datetime:
    return datetime.strptime(text, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC)


def project_key(project: str | None) -> str:
    return UNATTRIBUTED_KEY if project is None else quote(project, safe="")


def _epoch(moment: datetime) -> int:
    return int(moment.timestamp())


class DynamoDbLedger:
    def __init__(self, client: Any, table_name: str) -> None:
        self._ddb = client
        self._table = table_name

    # -- reads -------------------------------------------------------------------

    def _query(self, pk: str) -> Iterator[dict[str, Any]]:
        pages = self._ddb.get_paginator("query").paginate(
            TableName=self._table,
            KeyConditionExpression="pk = :pk",
            ExpressionAttributeValues={":pk": {"S": pk}},
            ConsistentRead=True,
        )
        for page in pages:
            yield from page.get("Items", [])

    def watermark(self, scope: str) -> datetime | None:
        item = self._ddb.get_item(
            TableName=self._table,
            Key={"pk": {"S": f"SCOPE#{scope}"}, "sk": {"S": "WATERMARK"}},
            ConsistentRead=True,
        ).get("Item")
        return parse_stamp(item["observed_at"]["S"]) if item and "observed_at" in item else None

    def observations(self, scope: str) -> dict[str, Observation]:
        found: dict[str, Observation] = {}
        for item in self._query(f"SCOPE#{scope}#OBS"):
            key = item["sk"]["S"]
            found[key] = Observation(
                key=key,
                project=item["project"]["S"] if "project" in item else None,
                usd_per_hour=Decimal(item["usd_per_hour"]["N"]),
                observed_at=parse_stamp(item["observed_at"]["S"]),
                first_seen_at=parse_stamp(item["first_seen_at"]["S"]),
            )
        return found

    def month_totals(self, scope: str, month: str) -> dict[str | None, ProjectMonth]:
        totals: dict[str | None, ProjectMonth] = {}
        for item in self._query(f"SCOPE#{scope}#MONTH#{month}"):
            project = item["project"]["S"] if "project" in item else None
            totals[project] = ProjectMonth(
                project,
                month,
                Decimal(item.get("usd", {"N": "0"})["N"]),
                Decimal(item.get("estimated_usd", {"N": "0"})["N"]),
            )
        return totals

    # -- the scan commit -----------------------------------------------------------

    def _watermark_update(self, commit: ScanCommit) -> dict[str, Any]:
        values: dict[str, Any] = {":now": {"S": stamp(commit.now)}}
        if commit.previous_watermark is None:
            condition = "attribute_not_exists(#observed) OR #observed = :now"
        else:
            condition = "#observed = :prev OR #observed = :now"
            values[":prev"] = {"S": stamp(commit.previous_watermark)}
        return {
            "TableName": self._table,
            "Key": {"pk": {"S": f"SCOPE#{commit.scope}"}, "sk": {"S": "WATERMARK"}},
            "UpdateExpression": "SET #observed = :now",
            "ConditionExpression": condition,
            "ExpressionAttributeNames": {"#observed": "observed_at"},
            "ExpressionAttributeValues": values,
        }

    def _month_update(
        self, scope: str, now: datetime, key: AccrualKey, inc: Increment
    ) -> dict[str, Any]:
        project, month = key
        values: dict[str, Any] = {
            ":usd": {"N": str(inc.usd)},
            ":est": {"N": str(inc.estimated_usd)},
            ":now": {"S": stamp(now)},
            ":month": {"S": month},
        }
        names = {
            "#usd": "usd",
            "#est": "estimated_usd",
            "#applied": "applied_at",
            "#month": "month",
        }
        expression = "ADD #usd :usd, #est :est SET #applied = :now, #month = :month"
        if project is not None:
            values[":project"] = {"S": project}
            names["#project"] = "project"
            expression += ", #project = :project"
        return {
            "TableName": self._table,
            "Key": {
                "pk": {"S": f"SCOPE#{scope}#MONTH#{month}"},
                "sk": {"S": f"PROJECT#{project_key(project)}"},
            },
            "UpdateExpression": expression,
            "ConditionExpression": "attribute_not_exists(#applied) OR #applied < :now",
            "ExpressionAttributeNames": names,
            "ExpressionAttributeValues": values,
        }

    def commit(self, commit: ScanCommit) -> CommitOutcome:
        current = self.watermark(commit.scope)
        retry = current == commit.now
        if not retry and current != commit.previous_watermark:
            return CommitOutcome.CONTENDED
        updates = [
            self._month_update(commit.scope, commit.now, k, v)
            for k, v in sorted(commit.increments.items(), key=lambda kv: (kv[0][0] or "", kv[0][1]))
        ]
        first, rest = updates[: TRANSACT_LIMIT - 1], updates[TRANSACT_LIMIT - 1 :]
        try:
            self._ddb.transact_write_items(
                TransactItems=[{"Update": self._watermark_update(commit)}]
                + [{"Update": u} for u in first]
            )
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") != "TransactionCanceledException":
                raise
            reasons = exc.response.get("CancellationReasons") or []
            if reasons and reasons[0].get("Code") == "ConditionalCheckFailed":
                return CommitOutcome.CONTENDED
            # The watermark is ours but some rows already took this scan: a retry after a
            # partial commit. Apply row by row; each row's condition keeps it exactly-once.
            retry = True
            self._ddb.update_item(**self._watermark_update(commit))
            rest = updates
        for update in rest:
            try:
                self._ddb.update_item(**update)
            except ClientError as exc:
                if exc.response.get("Error", {}).get("Code") != "ConditionalCheckFailedException":
                    raise
        self._write_observations(commit.scope, commit.observations)
        return CommitOutcome.ALREADY_APPLIED if retry else CommitOutcome.APPLIED

    def _batch_write(self, requests: list[dict[str, Any]]) -> None:
        for batch in chunks(requests, BATCH_WRITE_LIMIT):
            pending: dict[str, Any] = {self._table: batch}
            for attempt in range(8):
                response = self._ddb.batch_write_item(RequestItems=pending)
                pending = response.get("UnprocessedItems") or {}
                if not pending:
                    break
                time.sleep(min(0.05 * 2**attempt, 2.0))
            else:
                raise LedgerError(f"DynamoDB left {len(pending[self._table])} writes unprocessed")

    def _write_observations(self, scope: str, observations: Sequence[Observation]) -> None:
        requests = []
        for o in observations:
            item: dict[str, Any] = {
                "pk": {"S": f"SCOPE#{scope}#OBS"},
                "sk": {"S": o.key},
                "usd_per_hour": {"N": str(o.usd_per_hour)},
                "observed_at": {"S": stamp(o.observed_at)},
                "first_seen_at": {"S": stamp(o.first_seen_at)},
                "ttl": {"N": str(_epoch(o.observed_at + OBSERVATION_TTL))},
            }
            if o.project is not None:
                item["project"] = {"S": o.project}
            requests.append({"PutRequest": {"Item": item}})
        self._batch_write(requests)

    # -- findings, exactly-once records, audit -----------------------------------------

    def record_findings(self, scope: str, now: datetime, findings: Sequence[Finding]) -> None:
        day = now.astimezone(UTC).date().isoformat()
        unique = {(f.code.value, f.resource): f for f in findings}
        self._batch_write(
            [
                {
                    "PutRequest": {
                        "Item": {
                            "pk": {"S": f"SCOPE#{scope}#FINDINGS#{day}"},
                            "sk": {"S": f"{code}#{resource}"},
                            "code": {"S": code},
                            "resource": {"S": resource},
                            "message": {"S": f.message},
                            "severity": {"S": f.severity.value},
                            "seen_at": {"S": stamp(now)},
                            "ttl": {"N": str(_epoch(now + FINDING_TTL))},
                        }
                    }
                }
                for (code, resource), f in sorted(unique.items())
            ]
        )

    def findings(self, scope: str, day: str) -> list[Finding]:
        found = [
            Finding(
                FindingCode(item["code"]["S"]),
                item["resource"]["S"],
                item["message"]["S"],
                Severity(item["severity"]["S"]),
            )
            for item in self._query(f"SCOPE#{scope}#FINDINGS#{day}")
        ]
        return sorted(found, key=lambda f: (f.code.value, f.resource))

    def _put_if_absent(self, item: dict[str, Any]) -> bool:
        """The exactly-once primitive: a conditional put that only the first writer wins."""
        try:
            self._ddb.put_item(
                TableName=self._table, Item=item, ConditionExpression="attribute_not_exists(pk)"
            )
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") == "ConditionalCheckFailedException":
                return False
            raise
        return True

    def put_once(self, namespace: str, key: str, now: datetime, attrs: Mapping[str, Any]) -> bool:
        return self._put_if_absent(
            {
                "pk": {"S": f"ONCE#{namespace}"},
                "sk": {"S": key},
                "at": {"S": stamp(now)},
                "attrs": {"S": json.dumps(attrs, default=str, sort_keys=True)},
            }
        )

    def audit(self, event: AuditEvent) -> bool:
        return self._put_if_absent(
            {
                "pk": {"S": f"SCOPE#{event.scope}#AUDIT#{event.at.astimezone(UTC):%Y-%m}"},
                "sk": {"S": f"{stamp(event.at)}#{event.event_id}"},
                "event_id": {"S": event.event_id},
                "action": {"S": event.action},
                "resource": {"S": event.resource},
                "outcome": {"S": event.outcome},
                "details": {"S": json.dumps(dict(event.details), default=str, sort_keys=True)},
            }
        )

    def release_once(self, namespace: str, key: str) -> None:
        self._ddb.delete_item(
            TableName=self._table, Key={"pk": {"S": f"ONCE#{namespace}"}, "sk": {"S": key}}
        )

    def record_rates(self, scope: str, at: datetime, rates: Mapping[str, Decimal]) -> None:
        """One item per project and day; samples are appended as ``stamp=rate`` strings."""
        day = at.astimezone(UTC).date().isoformat()
        for project, usd in sorted(rates.items()):
            self._ddb.update_item(
                TableName=self._table,
                Key={
                    "pk": {"S": f"SCOPE#{scope}#RATES"},
                    "sk": {"S": f"{project_key(project)}#{day}"},
                },
                UpdateExpression="SET #s = list_append(if_not_exists(#s, :empty), :new), #p = :p, #ttl = :ttl",
                ExpressionAttributeNames={"#s": "samples", "#p": "project", "#ttl": "ttl"},
                ExpressionAttributeValues={
                    ":empty": {"L": []},
                    ":new": {"L": [{"S": f"{stamp(at)}={usd}"}]},
                    ":p": {"S": project},
                    ":ttl": {"N": str(_epoch(at + RATE_TTL))},
                },
            )

    def rate_history(
        self, scope: str, since: datetime
    ) -> dict[str, list[tuple[datetime, Decimal]]]:
        history: dict[str, dict[datetime, Decimal]] = {}
        for item in self._query(f"SCOPE#{scope}#RATES"):
            project = item["project"]["S"]
            for sample in item.get("samples", {}).get("L", []):
                when, _, usd = sample["S"].partition("=")
                at = parse_stamp(when)
                if at >= since:
                    history.setdefault(project, {})[at] = Decimal(
                        usd
                    )  # a retried append dedupes here
        return {p: sorted(samples.items()) for p, samples in history.items()}

    def get_state(self, scope: str, name: str) -> tuple[dict[str, Any], int]:
        item = self._ddb.get_item(
            TableName=self._table,
            Key={"pk": {"S": f"SCOPE#{scope}#STATE"}, "sk": {"S": name}},
            ConsistentRead=True,
        ).get("Item")
        if not item:
            return {}, 0
        return json.loads(item["value"]["S"]), int(item["version"]["N"])

    def put_state(
        self, scope: str, name: str, value: Mapping[str, Any], expected_version: int
    ) -> bool:
        condition = "attribute_not_exists(pk)" if expected_version == 0 else "#v = :expected"
        values: dict[str, Any] = {
            ":value": {"S": json.dumps(dict(value), sort_keys=True, default=str)},
            ":next": {"N": str(expected_version + 1)},
        }
        if expected_version:
            values[":expected"] = {"N": str(expected_version)}
        try:
            self._ddb.update_item(
                TableName=self._table,
                Key={"pk": {"S": f"SCOPE#{scope}#STATE"}, "sk": {"S": name}},
                UpdateExpression="SET #value = :value, #v = :next",
                ConditionExpression=condition,
                ExpressionAttributeNames={"#value": "value", "#v": "version"},
                ExpressionAttributeValues=values,
            )
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") == "ConditionalCheckFailedException":
                return False
            raise
        return True

    def record_alert(self, scope: str, at: datetime, alert: Mapping[str, Any]) -> None:
        self._ddb.put_item(
            TableName=self._table,
            Item={
                "pk": {"S": f"SCOPE#{scope}#ALERTS#{at.astimezone(UTC):%Y-%m}"},
                "sk": {"S": f"{stamp(at)}#{alert.get('alert_id', '')}"},
                "alert": {"S": json.dumps(dict(alert), sort_keys=True, default=str)},
                "ttl": {"N": str(_epoch(at + ALERT_TTL))},
            },
        )

    def recent_alerts(self, scope: str, since: datetime, until: datetime) -> list[dict[str, Any]]:
        months, cursor = [], month_start(since)
        while cursor <= until:
            months.append(f"{cursor:%Y-%m}")
            cursor = next_month_start(cursor)
        found = []
        for month in months:
            for item in self._query(f"SCOPE#{scope}#ALERTS#{month}"):
                if since <= parse_stamp(item["sk"]["S"].split("#", 1)[0]) <= until:
                    found.append(json.loads(item["alert"]["S"]))
        return found

    def audit_trail(self, scope: str, month: str) -> list[AuditEvent]:
        events = []
        for item in self._query(f"SCOPE#{scope}#AUDIT#{month}"):
            events.append(
                AuditEvent(
                    scope=scope,
                    at=parse_stamp(item["sk"]["S"].split("#", 1)[0]),
                    event_id=item["event_id"]["S"],
                    action=item["action"]["S"],
                    resource=item["resource"]["S"],
                    outcome=item["outcome"]["S"],
                    details=json.loads(item["details"]["S"]),
                )
            )
        return events
