"""The synthesized template as a concrete account: resolved ARNs and a small policy evaluator.

CloudFormation intrinsics (``Ref``, ``Fn::GetAtt``, ``Fn::Join``, ``Fn::Sub``…) are
resolved for a fake account, region and physical names, so that policies can be
asked the questions that matter: *may this principal do this action on this ARN,
in this request context?* Identity policies, resource policies (topic, queue) and
key policies are evaluated the way IAM does for one account: an explicit Deny wins,
then any Allow; a key policy that allows the account root delegates to IAM policies.

Only the condition operators the stack uses are understood; anything else raises,
so a new operator cannot silently pass a test.
"""

from __future__ import annotations

import fnmatch
import re
import zlib
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from costguard.iam import READ_ONLY_PREFIXES

ACCOUNT = "123456789012"
REGION = "us-east-1"
PARTITION = "aws"

#: AWS-managed policies a role may attach, by name (what they grant, from their documents).
MANAGED_POLICIES: dict[str, list[dict[str, Any]]] = {
    "service-role/AWSLambdaBasicExecutionRole": [
        {
            "Effect": "Allow",
            "Action": ["logs:CreateLogGroup", "logs:CreateLogStream", "logs:PutLogEvents"],
            "Resource": "*",
        }
    ],
}

#: Verbs that only read; every other action counts as mutating (the product's own list).
READ_ONLY = READ_ONLY_PREFIXES


def as_list(value: Any) -> list[Any]:
    if value is None:
        return []
    return value if isinstance(value, list) else [value]


def mutating(action: str) -> bool:
    return not action.split(":", 1)[1].startswith(READ_ONLY)


@dataclass
class World:
    """One deployed copy of the template: every logical ID has a physical name and ARN."""

    template: Mapping[str, Any]
    account: str = ACCOUNT
    region: str = REGION
    partition: str = PARTITION
    #: Overrides, e.g. ``{"LedgerTable…": {"Ref": "my-table", "Arn": "arn:…"}}``.
    physical: dict[str, dict[str, str]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for logical, resource in self.resources().items():
            defaults = self._default_physical(logical, resource)
            self.physical[logical] = {**defaults, **self.physical.get(logical, {})}

    # -- the template ------------------------------------------------------------------

    def resources(self, kind: str | None = None) -> dict[str, dict[str, Any]]:
        found: dict[str, dict[str, Any]] = self.template["Resources"]
        return {k: v for k, v in found.items() if kind is None or v["Type"] == kind}

    def props(self, logical: str) -> dict[str, Any]:
        props: dict[str, Any] = self.template["Resources"][logical].get("Properties", {})
        return props

    def logical_for(self, physical: str) -> str | None:
        """The logical ID whose Ref or ARN is ``physical``."""
        for logical, values in self.physical.items():
            if physical in values.values():
                return logical
        return None

    def arn(self, logical: str) -> str:
        return self.physical[logical]["Arn"]

    # -- physical names ------------------------------------------------------------------

    def _default_physical(self, logical: str, resource: Mapping[str, Any]) -> dict[str, str]:
        a, r, p = self.account, self.region, self.partition
        name = f"costguard-{logical.lower()}"
        props = resource.get("Properties", {})
        kind = resource["Type"]
        if kind == "AWS::DynamoDB::Table":
            return {"Ref": name, "Arn": f"arn:{p}:dynamodb:{r}:{a}:table/{name}"}
        if kind == "AWS::SNS::Topic":
            arn = f"arn:{p}:sns:{r}:{a}:{name}"
            return {"Ref": arn, "TopicArn": arn, "TopicName": name}
        if kind == "AWS::SQS::Queue":
            return {
                "Ref": f"https://sqs.{r}.amazonaws.com/{a}/{name}",
                "Arn": f"arn:{p}:sqs:{r}:{a}:{name}",
                "QueueName": name,
                "QueueUrl": f"https://sqs.{r}.amazonaws.com/{a}/{name}",
            }
        if kind == "AWS::KMS::Key":
            key_id = f"00000000-0000-0000-0000-{zlib.crc32(logical.encode()):012d}"
            return {"Ref": key_id, "KeyId": key_id, "Arn": f"arn:{p}:kms:{r}:{a}:key/{key_id}"}
        if kind == "AWS::Logs::LogGroup":
            group = f"/aws/lambda/{name}"
            return {"Ref": group, "Arn": f"arn:{p}:logs:{r}:{a}:log-group:{group}:*"}
        if kind == "AWS::SecretsManager::Secret":
            secret = props.get("Name", name)
            arn = f"arn:{p}:secretsmanager:{r}:{a}:secret:{secret}-AbCdEf"
            return {"Ref": arn, "Id": arn, "Name": secret}
        if kind == "AWS::Lambda::Function":
            # A name the stack gives (a plain string) is the function's physical name.
            given = props.get("FunctionName")
            function = given if isinstance(given, str) else name
            return {"Ref": function, "Arn": f"arn:{p}:lambda:{r}:{a}:function:{function}"}
        if kind == "AWS::Lambda::Url":
            return {
                "Ref": name,
                "FunctionUrl": f"https://{zlib.crc32(logical.encode()):032x}.lambda-url.{r}.on.aws/",
            }
        if kind == "AWS::IAM::Role":
            return {"Ref": name, "Arn": f"arn:{p}:iam::{a}:role/{name}", "RoleId": name}
        if kind == "AWS::IAM::ManagedPolicy":
            return {"Ref": f"arn:{p}:iam::{a}:policy/{name}"}
        if kind == "AWS::CloudWatch::Alarm":
            return {"Ref": name, "Arn": f"arn:{p}:cloudwatch:{r}:{a}:alarm:{name}"}
        if kind == "AWS::Scheduler::ScheduleGroup":
            group = props.get("Name", name)
            return {"Ref": group, "Arn": f"arn:{p}:scheduler:{r}:{a}:schedule-group/{group}"}
        if kind == "AWS::Events::Rule":
            return {"Ref": name, "Arn": f"arn:{p}:events:{r}:{a}:rule/{name}"}
        if kind == "AWS::Scheduler::Schedule":
            return {"Ref": name, "Arn": f"arn:{p}:scheduler:{r}:{a}:schedule/default/{name}"}
        return {"Ref": name}

    # -- intrinsics ------------------------------------------------------------------------

    def _pseudo(self, name: str) -> str:
        pseudo = {
            "AWS::AccountId": self.account,
            "AWS::Region": self.region,
            "AWS::Partition": self.partition,
            "AWS::URLSuffix": "amazonaws.com",
            "AWS::StackName": "CostGuard",
        }
        if name in pseudo:
            return pseudo[name]
        parameters = self.template.get("Parameters", {})
        if name in parameters:
            return str(parameters[name].get("Default", name))
        values = self.physical.get(name)
        if values is None:
            raise KeyError(f"Ref to unknown {name!r}")
        return values["Ref"]

    def _get_att(self, logical: str, attribute: str) -> str:
        values = self.physical.get(logical)
        if values is None or attribute not in values:
            raise KeyError(f"Fn::GetAtt {logical}.{attribute} has no physical value")
        return values[attribute]

    def resolve(self, value: Any) -> Any:
        """``value`` with every intrinsic replaced by a concrete string."""
        if isinstance(value, list):
            return [self.resolve(v) for v in value]
        if not isinstance(value, dict):
            return value
        if len(value) == 1:
            ((key, arg),) = value.items()
            if key == "Ref":
                return self._pseudo(arg)
            if key == "Fn::GetAtt":
                logical, attribute = arg if isinstance(arg, list) else arg.split(".", 1)
                return self._get_att(logical, attribute)
            if key == "Fn::Join":
                sep, parts = arg
                return sep.join(str(self.resolve(p)) for p in self.resolve(parts))
            if key == "Fn::Select":
                index, items = arg
                return self.resolve(items)[int(self.resolve(index))]
            if key == "Fn::Split":
                sep, text = arg
                return str(self.resolve(text)).split(sep)
            if key == "Fn::Sub":
                text, variables = (arg, {}) if isinstance(arg, str) else arg
                resolved = {k: str(self.resolve(v)) for k, v in variables.items()}

                def sub(match: re.Match[str]) -> str:
                    name = match.group(1)
                    if name in resolved:
                        return resolved[name]
                    if "." in name:
                        logical, attribute = name.split(".", 1)
                        return self._get_att(logical, attribute)
                    return self._pseudo(name)

                return re.sub(r"\$\{([^}!]+)\}", sub, text)
            if key.startswith("Fn::"):
                raise NotImplementedError(f"intrinsic {key} is not resolved by the test model")
        return {k: self.resolve(v) for k, v in value.items()}

    # -- who holds which policy --------------------------------------------------------------

    def role_statements(self, role: str) -> list[dict[str, Any]]:
        """Every identity-policy statement of a role, resolved (inline, attached, managed)."""
        statements: list[dict[str, Any]] = []
        props = self.props(role)
        for policy in props.get("Policies", []):
            statements += as_list(policy["PolicyDocument"]["Statement"])
        for arn in self.resolve(props.get("ManagedPolicyArns", [])):
            name = arn.split(":policy/", 1)[1]
            if name not in MANAGED_POLICIES:
                raise KeyError(f"managed policy {arn} is not modelled in iam_model")
            statements += MANAGED_POLICIES[name]
        for kind in ("AWS::IAM::Policy", "AWS::IAM::ManagedPolicy"):
            for policy in self.resources(kind).values():
                roles = [r.get("Ref") for r in policy["Properties"].get("Roles", [])]
                if role in roles:
                    statements += as_list(policy["Properties"]["PolicyDocument"]["Statement"])
        return [self.resolve(s) for s in statements]

    def policy_document(self, role: str) -> dict[str, Any]:
        """The role's policies as one concrete document, e.g. to create it in moto."""
        return {"Version": "2012-10-17", "Statement": self.role_statements(role)}

    def function_role(self, function: str) -> str:
        role = self.props(function)["Role"]
        return str(role["Fn::GetAtt"][0])

    def role_by_arn(self, arn: str) -> str:
        logical = self.logical_for(arn)
        if logical is None:
            raise KeyError(f"no role with ARN {arn}")
        return logical

    def resource_policies(self, arn: str) -> list[dict[str, Any]]:
        """Statements of every topic or queue policy attached to the resource ``arn``."""
        statements: list[dict[str, Any]] = []
        for kind, key in (("AWS::SNS::TopicPolicy", "Topics"), ("AWS::SQS::QueuePolicy", "Queues")):
            for policy in self.resources(kind).values():
                targets = self.resolve(policy["Properties"][key])
                logicals = {self.logical_for(t) for t in targets}
                if self.logical_for(arn) in logicals:
                    statements += as_list(
                        self.resolve(policy["Properties"]["PolicyDocument"]["Statement"])
                    )
        return statements

    def key_statements(self, key_arn: str) -> list[dict[str, Any]]:
        logical = self.logical_for(key_arn)
        if logical is None:
            raise KeyError(f"no key with ARN {key_arn}")
        statements = as_list(self.props(logical)["KeyPolicy"]["Statement"])
        return [self.resolve(s) for s in statements]

    def key_arn_of(self, reference: str) -> str:
        """A key reference as a template holds it (ID, ARN or alias) as the key's ARN."""
        logical = self.logical_for(reference)
        if logical is None or self.resources()[logical]["Type"] != "AWS::KMS::Key":
            raise KeyError(f"{reference} is not a key of this stack")
        return self.arn(logical)


# -- the evaluator -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Principal:
    """Who asks: a role (by ARN) or an AWS service principal."""

    role_arn: str | None = None
    service: str | None = None

    @property
    def account_root(self) -> str | None:
        if self.role_arn is None:
            return None
        account = self.role_arn.split(":")[4]
        return f"arn:{self.role_arn.split(':')[1]}:iam::{account}:root"


def _glob(pattern: str, value: str, *, ignore_case: bool = False) -> bool:
    if ignore_case:
        pattern, value = pattern.lower(), value.lower()
    return fnmatch.fnmatchcase(value, pattern)


def _principal_matches(spec: Any, who: Principal, *, allow_root: bool) -> bool:
    if spec == "*":
        return True
    if not isinstance(spec, dict):
        raise NotImplementedError(f"principal {spec!r}")
    services = as_list(spec.get("Service"))
    arns = as_list(spec.get("AWS"))
    if who.service is not None and who.service in services:
        return True
    if "*" in arns:
        return True
    if who.role_arn is not None and who.role_arn in arns:
        return True
    return allow_root and who.account_root is not None and who.account_root in arns


_OPERATORS = {
    "StringEquals": lambda want, have: have == want,
    "StringEqualsIgnoreCase": lambda want, have: have.lower() == want.lower(),
    "StringLike": _glob,
    "ArnEquals": lambda want, have: have == want,
    "ArnLike": _glob,
    "Bool": lambda want, have: have.lower() == str(want).lower(),
}
_NEGATED = {
    "StringNotEquals": "StringEquals",
    "StringNotEqualsIgnoreCase": "StringEqualsIgnoreCase",
    "StringNotLike": "StringLike",
}


def condition_holds(condition: Mapping[str, Any] | None, context: Mapping[str, str]) -> bool:
    """IAM's condition semantics for the operators CostGuard's policies use.

    A key missing from the request context fails a positive operator (unless the
    operator ends in ``IfExists``), as in IAM; ``Null`` tests presence. A context
    value may be a comma-free list given as ``a,b`` for ``ForAllValues``/``ForAnyValue``.
    """
    for operator, tests in (condition or {}).items():
        qualifier, _, base = operator.rpartition(":")
        for key, wanted in tests.items():
            if base == "Null":
                if (key not in context) != (str(wanted).lower() == "true"):
                    return False
                continue
            plain = base.removesuffix("IfExists")
            negate = plain in _NEGATED
            compare = _OPERATORS.get(_NEGATED.get(plain, plain))
            if compare is None:
                raise NotImplementedError(f"condition operator {operator}")
            if key not in context:
                if plain != base or negate or qualifier == "ForAllValues":
                    continue
                return False
            values = context[key].split(",") if qualifier else [context[key]]
            hits = [any(compare(str(w), v) for w in as_list(wanted)) for v in values]
            hit = all(hits) if qualifier == "ForAllValues" else any(hits)
            if hit == negate:
                return False
    return True


@dataclass(frozen=True)
class Decision:
    allowed: bool
    denied: bool
    via_root: bool = False  # allowed only by a statement naming the account root


def evaluate(
    statements: Iterable[Mapping[str, Any]],
    action: str,
    resource: str,
    context: Mapping[str, str] | None = None,
    principal: Principal | None = None,
) -> Decision:
    """Evaluate one request against identity-policy statements, or resource-policy ones
    (those carry a ``Principal`` and need ``principal``)."""
    allowed = denied = via_root_only = False
    direct = False
    for s in statements:
        if "Action" in s:
            action_hit = any(_glob(a, action, ignore_case=True) for a in as_list(s["Action"]))
        else:
            action_hit = not any(
                _glob(a, action, ignore_case=True) for a in as_list(s["NotAction"])
            )
        if not action_hit:
            continue
        if "Resource" in s:
            resource_hit = any(_glob(r, resource) for r in as_list(s["Resource"]))
        elif "NotResource" in s:
            resource_hit = not any(_glob(r, resource) for r in as_list(s["NotResource"]))
        else:
            resource_hit = True
        if not resource_hit:
            continue
        root_only = False
        if "Principal" in s:
            if principal is None:
                raise ValueError("a resource-policy statement needs the asking principal")
            if not _principal_matches(s["Principal"], principal, allow_root=False):
                if _principal_matches(s["Principal"], principal, allow_root=True):
                    root_only = True
                else:
                    continue
        if not condition_holds(s.get("Condition"), context or {}):
            continue
        if s["Effect"] == "Deny":
            denied = True
        elif root_only:
            via_root_only = True
        else:
            allowed = direct = True
    return Decision(
        allowed=(allowed or via_root_only) and not denied,
        denied=denied,
        via_root=via_root_only and not direct,
    )


def role_may(
    world: World,
    role: str,
    action: str,
    resource: str,
    context: Mapping[str, str] | None = None,
) -> bool:
    """May the role do ``action`` on ``resource``: its identity policies, and for a KMS
    key of this stack also the key policy (which either names the role or delegates to
    IAM through the account root)."""
    identity = evaluate(world.role_statements(role), action, resource, context)
    if identity.denied:
        return False
    if action.startswith("kms:") and world.logical_for(resource) is not None:
        who = Principal(role_arn=world.arn(role))
        key = evaluate(world.key_statements(resource), action, resource, context, who)
        if key.denied or not key.allowed:
            return False
        return identity.allowed if key.via_root else True
    return identity.allowed


def service_may_use_key(
    world: World, service: str, action: str, key_arn: str, context: Mapping[str, str]
) -> bool:
    decision = evaluate(
        world.key_statements(key_arn), action, key_arn, context, Principal(service=service)
    )
    return decision.allowed


def statements_of_roles(world: World) -> Iterator[tuple[str, dict[str, Any]]]:
    for role in world.resources("AWS::IAM::Role"):
        for statement in world.role_statements(role):
            yield role, statement
