"""How an alert reads in each channel. Pure functions: golden-tested, no I/O.

- ``email``: plain text a busy person can act on, with console links;
- ``https``: Amazon Q Developer in chat apps' custom-notification schema (it drops anything else);
- ``sqs``/``lambda``: versioned machine JSON with a stable ``alert_id``;
- Slack Block Kit, for the incoming-webhook notifier, with every user string escaped.
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import quote

from costguard.domain.alerts import Alert, AlertResource
from costguard.domain.money import per_hour, rate

MACHINE_SCHEMA = "costguard.alert/v1"
_SEVERITY_MARK = {"critical": "CRITICAL", "warning": "WARNING", "info": "INFO"}


def console_url(resource_key: str) -> str | None:
    """A link to the resource in the AWS console, from its ``region/kind/id`` key."""
    try:
        region, kind, rid = resource_key.split("/", 2)
    except ValueError:
        return None
    base = f"https://{region}.console.aws.amazon.com"
    q = quote(rid, safe="")
    return {
        "ec2-instance": f"{base}/ec2/home?region={region}#InstanceDetails:instanceId={q}",
        "ebs-volume": f"{base}/ec2/home?region={region}#VolumeDetails:volumeId={q}",
        "eks-cluster": f"{base}/eks/home?region={region}#/clusters/{q}",
        "eks-nodegroup": f"{base}/eks/home?region={region}#/clusters/{quote(rid.split('/')[0], safe='')}",
        "sagemaker-notebook": f"{base}/sagemaker/home?region={region}#/notebook-instances/{q}",
        "sagemaker-endpoint": f"{base}/sagemaker/home?region={region}#/endpoints/{quote(rid.split('/')[0], safe='')}",
        "sagemaker-training-job": f"{base}/sagemaker/home?region={region}#/jobs/{q}",
        "sagemaker-studio-app": f"{base}/sagemaker/home?region={region}#/studio",
    }.get(kind)


def _resource_line(r: AlertResource) -> str:
    price = "unpriced" if r.usd_per_hour is None else per_hour(r.usd_per_hour)
    parts = [f"{r.instance_type or r.kind} {r.key}", price]
    if r.change:
        parts.append(r.change)
    if r.owner:
        parts.append(f"owner {r.owner}")
    return " - ".join(parts)


def email_subject(alert: Alert) -> str:
    """SNS subjects: ASCII printable, no newlines, at most 100 characters."""
    text = f"[CostGuard {_SEVERITY_MARK[alert.severity.value]}] {alert.title}"
    ascii_text = "".join(ch if 32 <= ord(ch) < 127 else "?" for ch in text)
    return ascii_text if len(ascii_text) <= 100 else ascii_text[:99] + "~"


def email_text(alert: Alert) -> str:
    lines = [alert.title, "", alert.summary, ""]
    if alert.project is not None:
        lines.append(f"Project:  {alert.project}")
    lines.append(f"Severity: {alert.severity.value}")
    if alert.owners:
        lines.append(f"Owners:   {', '.join(alert.owners)}")
    lines.append(f"When:     {alert.at:%Y-%m-%d %H:%M} UTC")
    if alert.why:
        lines += ["", f"Why: {alert.why}."]
    if alert.facts:
        lines += ["", *[f"  {k.replace('_', ' ')}: {v}" for k, v in alert.facts.items()]]
    if alert.resources:
        lines += ["", "Resources:"]
        for r in alert.resources:
            lines.append(f"  - {_resource_line(r)}")
            url = console_url(r.key)
            if url:
                lines.append(f"    {url}")
    if alert.details:
        lines += ["", *[f"  - {d}" for d in alert.details]]
    if alert.next_steps:
        lines += [
            "",
            "What to do next:",
            *[f"  {i}. {s}" for i, s in enumerate(alert.next_steps, 1)],
        ]
    lines += ["", f"Alert id: {alert.alert_id}", "Sent by CostGuard."]
    return "\n".join(lines)


def machine_json(alert: Alert) -> dict[str, Any]:
    return {
        "schema": MACHINE_SCHEMA,
        "alert_id": alert.alert_id,
        "kind": alert.kind.value,
        "project": alert.project,
        "severity": alert.severity.value,
        "title": alert.title,
        "summary": alert.summary,
        "why": alert.why,
        "at": alert.at.isoformat(),
        "owners": list(alert.owners),
        "facts": dict(alert.facts),
        "details": list(alert.details),
        "next_steps": list(alert.next_steps),
        "resources": [
            {
                "key": r.key,
                "kind": r.kind,
                "region": r.region,
                "instance_type": r.instance_type,
                "usd_per_hour": None if r.usd_per_hour is None else float(rate(r.usd_per_hour)),
                "owner": r.owner,
                "change": r.change or None,
                "console_url": console_url(r.key),
            }
            for r in alert.resources
        ],
    }


def chat_notification(alert: Alert) -> dict[str, Any]:
    """Amazon Q Developer in chat apps custom notification (version 1.0)."""
    description = alert.summary
    if alert.resources:
        description += "\n" + "\n".join(f"• {_resource_line(r)}" for r in alert.resources[:5])
    return {
        "version": "1.0",
        "source": "custom",
        "id": alert.alert_id,
        "content": {
            "textType": "client-markdown",
            "title": f"{_SEVERITY_MARK[alert.severity.value]}: {alert.title}",
            "description": description,
            "nextSteps": list(alert.next_steps),
            "keywords": [k for k in ("CostGuard", alert.kind.value, alert.project) if k],
        },
        "metadata": {
            "threadId": alert.project or alert.kind.value,
            "summary": alert.title,
            "eventType": alert.kind.value,
            "additionalContext": {"alert_id": alert.alert_id, "severity": alert.severity.value},
        },
    }


def sns_message(alert: Alert) -> str:
    """The ``MessageStructure=json`` body: one rendering per protocol."""
    text = email_text(alert)
    machine = json.dumps(machine_json(alert), ensure_ascii=False, sort_keys=True)
    return json.dumps(
        {
            "default": text,
            "email": text,
            "email-json": machine,
            "https": json.dumps(chat_notification(alert), ensure_ascii=False),
            "http": json.dumps(chat_notification(alert), ensure_ascii=False),
            "sqs": machine,
            "lambda": machine,
        },
        ensure_ascii=False,
    )


def sns_attributes(alert: Alert) -> dict[str, dict[str, str]]:
    """Routing attributes for subscription filter policies."""
    return {
        "project": {"DataType": "String", "StringValue": alert.project or "-"},
        "severity": {"DataType": "String", "StringValue": alert.severity.value},
        "kind": {"DataType": "String", "StringValue": alert.kind.value},
    }


# -- Slack Block Kit ---------------------------------------------------------------------


def slack_escape(text: str) -> str:
    """Slack mrkdwn control characters. ``<!channel>`` and ``<http://x|y>`` become inert text."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def slack_blocks(alert: dict[str, Any]) -> dict[str, Any]:
    """Block Kit for one machine-JSON alert (what the notifier receives from SNS)."""
    e = slack_escape
    icon = {
        "critical": ":rotating_light:",
        "warning": ":warning:",
        "info": ":information_source:",
    }.get(str(alert.get("severity")), ":information_source:")
    blocks: list[dict[str, Any]] = [
        {
            "type": "header",
            "text": {
                "type": "plain_text",
                "text": str(alert.get("title", ""))[:150],
                "emoji": False,
            },
        },
        {
            "type": "section",
            "text": {"type": "mrkdwn", "text": f"{icon} {e(str(alert.get('summary', '')))}"},
        },
    ]
    fields = []
    if alert.get("project"):
        fields.append({"type": "mrkdwn", "text": f"*Project*\n{e(str(alert['project']))}"})
    fields.append({"type": "mrkdwn", "text": f"*Severity*\n{e(str(alert.get('severity', '')))}"})
    if alert.get("owners"):
        fields.append(
            {"type": "mrkdwn", "text": "*Owners*\n" + e(", ".join(map(str, alert["owners"])))}
        )
    for k, v in list((alert.get("facts") or {}).items())[:6]:
        fields.append({"type": "mrkdwn", "text": f"*{e(str(k).replace('_', ' '))}*\n{e(str(v))}"})
    blocks.append({"type": "section", "fields": fields[:10]})
    resources = alert.get("resources") or []
    if resources:
        lines = []
        for r in resources[:8]:
            price = "unpriced" if r.get("usd_per_hour") is None else f"${r['usd_per_hour']}/h"
            label = e(f"{r.get('instance_type') or r.get('kind')} {r.get('key')}")
            url = r.get("console_url")
            head = f"<{url}|{label}>" if url and str(url).startswith("https://") else label
            extra = " · ".join(e(str(x)) for x in (r.get("change"), r.get("owner")) if x)
            lines.append(f"• {head} — {price}" + (f" · {extra}" if extra else ""))
        blocks.append(
            {"type": "section", "text": {"type": "mrkdwn", "text": "\n".join(lines)[:3000]}}
        )
    if alert.get("next_steps"):
        steps = "\n".join(f"{i}. {e(str(s))}" for i, s in enumerate(alert["next_steps"], 1))
        blocks.append(
            {"type": "section", "text": {"type": "mrkdwn", "text": f"*Next steps*\n{steps}"[:3000]}}
        )
    blocks.append(
        {
            "type": "context",
            "elements": [
                {"type": "mrkdwn", "text": f"CostGuard · {e(str(alert.get('alert_id', '')))}"}
            ],
        }
    )
    return {"text": e(str(alert.get("title", "CostGuard alert"))), "blocks": blocks}
