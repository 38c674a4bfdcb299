"""IAM's evaluation of CostGuard's declared statements for one call (moto checks no
conditions, so tests evaluate the declared ``Permission``s themselves)."""

from __future__ import annotations

import fnmatch
import re as _re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass as _dataclass
from dataclasses import field as _field
from typing import Any

from costguard.iam import Permission


def condition_holds(
    conditions: Mapping[str, Mapping[str, Any]],
    tags: Mapping[str, str],
    request_keys: Sequence[str],
) -> bool:
    for operator, clauses in conditions.items():
        for key, expected in clauses.items():
            values = [expected] if isinstance(expected, str) else list(expected)
            tag = (
                key.removeprefix("aws:ResourceTag/") if key.startswith("aws:ResourceTag/") else None
            )
            actual = tags.get(tag) if tag else None
            present = (tag in tags) if tag else bool(request_keys)
            if operator == "Null":
                if (values[0] == "false") != present:
                    return False
            elif operator == "StringNotEqualsIgnoreCase":
                if actual is not None and actual.lower() in {v.lower() for v in values}:
                    return False
            elif operator == "ForAllValues:StringEquals":
                if not set(request_keys) <= set(values):
                    return False
            else:  # pragma: no cover - a new operator needs modelling here
                raise AssertionError(f"unmodelled IAM operator {operator}")
    return True


def allowed(
    permissions: Iterable[Permission],
    action: str,
    arn: str,
    tags: Mapping[str, str],
    request_keys: Sequence[str] = (),
    *,
    account: str = "123456789012",
) -> bool:
    """True if some declared statement allows ``action`` on ``arn`` with these tags."""
    for p in permissions:
        if action not in p.actions:
            continue
        patterns = [r.format(partition="aws", account=account) for r in p.resources]
        if not any(fnmatch.fnmatchcase(arn, pattern) for pattern in patterns):
            continue
        if condition_holds(p.conditions, tags, request_keys):
            return True
    return False


# -- A faithful evaluator of whole policy documents (the guardrails' tests) ---------------
#
# moto checks actions only, never a Condition (FIELD-NOTES.md). This models IAM's own
# rules for the operators CostGuard's policies use, after the IAM User Guide ("Condition
# operators", "Single-valued vs multivalued context keys", "Policy evaluation logic"):
#
# - condition key *names* are case-insensitive (aws:RequestTag/CostGuard:Project is the
#   same key as aws:RequestTag/costguard:project); values are compared case-sensitively
#   except by the ...IgnoreCase operators;
# - a key missing from the request makes a positive operator false and a negated one
#   (StringNotEquals, StringNotLike, ArnNotLike, ...) true; ...IfExists makes it true;
# - ForAnyValue is false for a missing or empty set; ForAllValues is true for it;
# - the conditions of a statement, and the keys of an operator, are ANDed; the values
#   of one key are ORed (for a negated operator: none may match);
# - an explicit Deny wins; without an Allow the answer is an implicit deny.

Context = Mapping[str, "str | Sequence[str]"]

_NEGATED = {
    "StringNotEquals",
    "StringNotEqualsIgnoreCase",
    "StringNotLike",
    "ArnNotEquals",
    "ArnNotLike",
}


def _wildcard(pattern: str, value: str, *, ignore_case: bool = False) -> bool:
    """IAM's * and ? (no character classes, unlike fnmatch)."""
    rx = "".join(".*" if c == "*" else "." if c == "?" else _re.escape(c) for c in pattern)
    return _re.fullmatch(rx, value, _re.DOTALL | (_re.IGNORECASE if ignore_case else 0)) is not None


def _arn_like(pattern: str, value: str) -> bool:
    """ArnLike: the six colon-separated parts compared one by one, each with wildcards."""
    p, v = pattern.split(":", 5), value.split(":", 5)
    return len(p) == len(v) == 6 and all(_wildcard(a, b) for a, b in zip(p, v, strict=True))


def _matches(base: str, policy_value: str, value: str) -> bool:
    """The positive form of ``base`` (StringNotLike -> StringLike) on one value."""
    positive = base.replace("Not", "", 1)
    if positive == "StringEquals":
        return value == policy_value
    if positive == "StringEqualsIgnoreCase":
        return value.lower() == policy_value.lower()
    if positive == "StringLike":
        return _wildcard(policy_value, value)
    if positive in ("ArnLike", "ArnEquals"):
        return _arn_like(policy_value, value)
    raise AssertionError(f"unmodelled IAM operator {base}")  # pragma: no cover


def _one_value(base: str, policy_values: Sequence[str], value: str) -> bool:
    hit = any(_matches(base, pv, value) for pv in policy_values)
    return not hit if base in _NEGATED else hit


def condition_operator_holds(operator: str, key: str, expected: Any, context: Context) -> bool:
    policy_values = [expected] if isinstance(expected, str) else list(expected)
    lowered = {k.lower(): v for k, v in context.items()}
    present = key.lower() in lowered
    actual = lowered.get(key.lower())
    if operator == "Null":
        (want,) = policy_values
        return (want == "true") == (not present)
    quantifier, _, base = operator.rpartition(":")
    if_exists = base.endswith("IfExists")
    base = base.removesuffix("IfExists")
    if quantifier:
        values = [] if actual is None else [actual] if isinstance(actual, str) else list(actual)
        if quantifier == "ForAnyValue":
            return any(_one_value(base, policy_values, v) for v in values)
        if quantifier == "ForAllValues":
            return all(_one_value(base, policy_values, v) for v in values)
        raise AssertionError(f"unmodelled quantifier {quantifier}")  # pragma: no cover
    if not present:
        return if_exists or base in _NEGATED
    if not isinstance(actual, str):
        raise AssertionError(f"{key} is multivalued: {operator} needs ForAnyValue/ForAllValues")
    return _one_value(base, policy_values, actual)


def _listed(value: Any) -> list[str]:
    return [value] if isinstance(value, str) else list(value)


def statement_applies(
    statement: Mapping[str, Any], action: str, arn: str, context: Context
) -> bool:
    if "Action" in statement:
        if not any(_wildcard(a, action, ignore_case=True) for a in _listed(statement["Action"])):
            return False
    elif any(_wildcard(a, action, ignore_case=True) for a in _listed(statement["NotAction"])):
        return False
    if "Resource" in statement:
        if not any(_wildcard(r, arn) for r in _listed(statement["Resource"])):
            return False
    elif any(_wildcard(r, arn) for r in _listed(statement["NotResource"])):
        return False
    return all(
        condition_operator_holds(op, key, expected, context)
        for op, clauses in statement.get("Condition", {}).items()
        for key, expected in clauses.items()
    )


def policy_decision(
    documents: Sequence[Mapping[str, Any]], action: str, arn: str, context: Context
) -> str:
    """ "Deny" (an explicit deny), "Allow", or "ImplicitDeny" for one layer of policies
    (an identity's policies, an SCP's, a boundary) and one authorization."""
    applying = [
        s
        for doc in documents
        for s in _listed_statements(doc)
        if statement_applies(s, action, arn, context)
    ]
    if any(s["Effect"] == "Deny" for s in applying):
        return "Deny"
    return "Allow" if any(s["Effect"] == "Allow" for s in applying) else "ImplicitDeny"


def _listed_statements(doc: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    st = doc["Statement"]
    return [st] if isinstance(st, Mapping) else list(st)


ALLOW_ALL: dict[str, Any] = {
    "Version": "2012-10-17",
    "Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}],
}
#: The AWS-managed SCP every Organization root, OU and account has unless removed.
FULL_AWS_ACCESS = ALLOW_ALL


@_dataclass(frozen=True)
class Authorization:
    """One check AWS makes for a call: an action on one resource ARN, with its context."""

    action: str
    arn: str
    context: dict[str, Any] = _field(default_factory=dict)


@_dataclass(frozen=True)
class Principal:
    """Who calls, and the policy layers AWS intersects for them."""

    arn: str
    identity: tuple[Mapping[str, Any], ...] = (ALLOW_ALL,)
    scps: tuple[Mapping[str, Any], ...] = ()
    boundary: Mapping[str, Any] | None = None

    def allows(self, check: Authorization) -> bool:
        context = {"aws:PrincipalArn": self.arn, **check.context}
        layers = [list(self.identity)]
        if self.scps:
            layers.append([FULL_AWS_ACCESS, *self.scps])
        if self.boundary is not None:
            layers.append([self.boundary])
        return all(
            policy_decision(layer, check.action, check.arn, context) == "Allow" for layer in layers
        )

    def permitted(self, checks: Iterable[Authorization]) -> bool:
        """A call succeeds only if every authorization it needs is allowed."""
        return all(self.allows(c) for c in checks)


def _tag_context(tags: Mapping[str, str] | None) -> dict[str, Any]:
    """aws:RequestTag/<key> for each tag and aws:TagKeys; nothing for no tags."""
    if not tags:
        return {}
    out: dict[str, Any] = {f"aws:RequestTag/{k}": v for k, v in tags.items()}
    out["aws:TagKeys"] = list(tags)
    return out


def run_instances_checks(
    params: Mapping[str, Any], *, region: str = "us-east-1", account: str = "123456789012"
) -> list[Authorization]:
    """The authorizations of one ``RunInstances``, as EC2 makes them: one per resource
    ARN, each with the keys of its resource type; the tags of a ``TagSpecifications``
    entry in the context of the resource of its ``ResourceType``; and, for each resource
    tagged at launch, an ``ec2:CreateTags`` check with ``ec2:CreateAction=RunInstances``
    (EC2 User Guide, "Grant permission to tag Amazon EC2 resources during creation")."""
    base = f"arn:aws:ec2:{region}:{account}"
    region_key = {"aws:RequestedRegion": region}
    tags_by_type: dict[str, dict[str, str]] = {}
    for spec in params.get("TagSpecifications", []):
        tags_by_type.setdefault(spec["ResourceType"], {}).update(
            {t["Key"]: t["Value"] for t in spec.get("Tags", [])}
        )
    image = params["ImageId"]
    checks = [
        Authorization(
            "ec2:RunInstances",
            f"{base}:instance/*",
            {
                **region_key,
                "ec2:InstanceType": params["InstanceType"],
                **_tag_context(tags_by_type.get("instance")),
            },
        ),
        Authorization(
            "ec2:RunInstances",
            f"{base}:volume/*",
            {**region_key, **_tag_context(tags_by_type.get("volume"))},
        ),
        Authorization(
            "ec2:RunInstances",
            f"{base}:network-interface/*",
            {**region_key, **_tag_context(tags_by_type.get("network-interface"))},
        ),
        Authorization("ec2:RunInstances", f"arn:aws:ec2:{region}::image/{image}", region_key),
        Authorization("ec2:RunInstances", f"{base}:subnet/subnet-0", region_key),
        Authorization("ec2:RunInstances", f"{base}:security-group/sg-0", region_key),
    ]
    for rtype, tags in tags_by_type.items():
        checks.append(
            Authorization(
                "ec2:CreateTags",
                f"{base}:{rtype}/*",
                {**region_key, "ec2:CreateAction": "RunInstances", **_tag_context(tags)},
            )
        )
    return checks


def sagemaker_create_checks(
    operation: str,
    name: str,
    *,
    instance_types: Sequence[str] = (),
    tags: Mapping[str, str] | None = None,
    region: str = "us-east-1",
    account: str = "123456789012",
) -> list[Authorization]:
    """``sagemaker:Create<Thing>``: one check on the new resource's ARN, with
    ``sagemaker:InstanceTypes`` where the action carries it (notebook, training job,
    endpoint config; not ``CreateEndpoint``: Service Authorization Reference)."""
    kind = {
        "CreateNotebookInstance": "notebook-instance",
        "CreateTrainingJob": "training-job",
        "CreateEndpoint": "endpoint",
        "CreateEndpointConfig": "endpoint-config",
    }[operation]
    context: dict[str, Any] = {"aws:RequestedRegion": region, **_tag_context(tags)}
    if operation != "CreateEndpoint" and instance_types:
        context["sagemaker:InstanceTypes"] = list(instance_types)
    arn = f"arn:aws:sagemaker:{region}:{account}:{kind}/{name.lower()}"
    return [Authorization(f"sagemaker:{operation}", arn, context)]


def tag_change_checks(
    action: str,
    arn: str,
    *,
    keys: Sequence[str] | None = None,
    tags: Mapping[str, str] | None = None,
) -> list[Authorization]:
    """``ec2:DeleteTags``/``sagemaker:DeleteTags`` (``keys``; None: a DeleteTags without
    ``Tags``, no aws:TagKeys at all) and ``ec2:CreateTags``/``sagemaker:AddTags`` (``tags``)."""
    if tags is not None:
        return [Authorization(action, arn, _tag_context(tags))]
    context: dict[str, Any] = {} if keys is None else {"aws:TagKeys": list(keys)}
    return [Authorization(action, arn, context)]
