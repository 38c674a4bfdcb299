"""boto3 plumbing shared by the adapters: clients, retries and error translation."""

from __future__ import annotations

import difflib
import functools
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Protocol, cast

import botocore
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError
from botocore.handlers import BUILTIN_HANDLERS
from botocore.loaders import create_loader
from botocore.parsers import ResponseParserError

from costguard.domain.text import truncate
from costguard.ports import AccessDeniedError, SourceError, ThrottledError

if TYPE_CHECKING:
    from mypy_boto3_ce import CostExplorerClient
    from mypy_boto3_dynamodb import DynamoDBClient
    from mypy_boto3_ec2 import EC2Client
    from mypy_boto3_eks import EKSClient
    from mypy_boto3_resourcegroupstaggingapi import ResourceGroupsTaggingAPIClient
    from mypy_boto3_sagemaker import SageMakerClient
    from mypy_boto3_sns import SNSClient

    from costguard.domain.decisions import Observed, Target

#: Adaptive retries back off on throttling across the threads of one scan.
RETRY_CONFIG = Config(
    retries={"max_attempts": 5, "mode": "adaptive"},
    connect_timeout=5,
    read_timeout=30,
    max_pool_connections=20,
)

THROTTLING_CODES = frozenset(
    {"Throttling", "ThrottlingException", "RequestLimitExceeded", "TooManyRequestsException"}
)
ACCESS_CODES = frozenset(
    {
        "AccessDenied",
        "AccessDeniedException",
        "UnauthorizedOperation",
        "UnrecognizedClientException",
    }
)


#: What a call can raise instead of an answer: AWS's refusal (``ClientError``), a transport
#: or configuration failure (``BotoCoreError``), or an answer botocore could not parse
#: (``ResponseParserError``, which is neither: e.g. an HTML page where EC2's XML was due).
AWS_ERRORS: tuple[type[Exception], ...] = (ClientError, BotoCoreError, ResponseParserError)
#: The error code of an answer that could not be parsed, when its HTTP status is unknown.
UNPARSEABLE = "UnparseableResponse"
#: What a finding says of an HTML page where an answer was due.
HTML_PAGE = "the endpoint answered with an HTML error page"
#: Statuses botocore retries (throttling, transient server errors): left to its retries.
_RETRIED_STATUSES = frozenset({429, 500, 502, 503, 504})


class HtmlAnswerError(ResponseParserError):
    """An endpoint answered an API call with an HTML page (a proxy, a captive portal, a
    wrong endpoint): no AWS answer at all, whatever its HTTP status."""

    def __init__(self, status: int) -> None:
        super().__init__(f"HTTP {status}: the endpoint answered with an HTML page")
        self.status = status


class RepeatedPageTokenError(BotoCoreError):
    """A page's token was one already followed: the pages would never end."""

    fmt = "the answer repeated {token} {value!r}: the pages would never end"


def _html(body: object) -> bool:
    if not isinstance(body, bytes | bytearray):
        return False  # a streamed body (S3 GetObject) is the caller's data, not an answer
    head = bytes(body[:512]).lstrip().lower()
    return head.startswith((b"<!doctype html", b"<html"))


def refuse_html_answers(response_dict: Mapping[str, Any], **_: Any) -> None:
    """botocore's ``before-parse`` hook (every client :class:`ClientFactory` makes): an
    HTML page is never an answer. botocore would read one as an *empty* answer (a JSON
    protocol's parser keeps an unparseable body as a message, and a well-formed
    ``<html>`` page is XML to EC2's), so a proxy's page would make a region look empty;
    or, for a malformed one, raise :class:`ResponseParserError` without the status.

    Raising here makes both the same :class:`ResponseParserError`, which
    :func:`translate` turns into a :class:`SourceError` naming the status. The statuses
    botocore retries are left to its retries (and its own generic-error parsing).
    """
    status = int(response_dict.get("status_code") or 0)
    if status not in _RETRIED_STATUSES and _html(response_dict.get("body")):
        raise HtmlAnswerError(status)


def refuse_html_first(client: Any) -> None:
    """Register :func:`refuse_html_answers` on the client before botocore's own hooks of the
    same event: botocore turns an S3 answer of 200 whose body is not XML into a 500 (so as
    to retry it), which would hide an HTML page behind "Internal Server Error"."""
    events = client.meta.events
    name = f"before-parse.{client.meta.service_model.service_id.hyphenize()}.*"
    theirs = [h[1] for h in BUILTIN_HANDLERS if h[0] == name]
    for handler in theirs:
        events.unregister(name, handler)
    events.register_first(name, refuse_html_answers)
    for handler in theirs:
        events.register_first(name, handler)


def translate(service: str, region: str, operation: str, exc: Exception) -> SourceError:
    """The domain error for any of :data:`AWS_ERRORS`, with one readable line."""
    if isinstance(exc, HtmlAnswerError):
        return SourceError(service, region, operation, f"HTTP {exc.status}", HTML_PAGE)
    if isinstance(exc, ResponseParserError):
        # botocore's message carries the whole body after the parser's complaint.
        text = str(exc)
        html = any(m in text.lower() for m in ("<!doctype html", "<html"))
        detail = HTML_PAGE if html else "the endpoint's answer could not be parsed"
        return SourceError(service, region, operation, UNPARSEABLE, detail)
    if isinstance(exc, ClientError):
        error = exc.response.get("Error", {})
        code = str(error.get("Code", "Unknown"))
        message = _first_line(str(error.get("Message", "")))
        if code in ACCESS_CODES:
            return AccessDeniedError(service, region, operation, code, message)
        if code in THROTTLING_CODES:
            return ThrottledError(service, region, operation, code, message)
        return SourceError(service, region, operation, code, message)
    return SourceError(service, region, operation, type(exc).__name__, _first_line(str(exc)))


def _first_line(text: str, limit: int = 300) -> str:
    """Error bodies can be whole HTML pages; a finding needs one readable line."""
    text = text.strip()
    if text.lstrip().startswith("<"):
        return HTML_PAGE
    line = text.splitlines()[0] if text else ""
    return truncate(line, limit)


@contextmanager
def reading(service: str, region: str, operation: str) -> Iterator[None]:
    """Translate botocore failures inside the block (:data:`AWS_ERRORS`) into
    :class:`SourceError`: every adapter's calls go through here, so a refusal, an
    unreachable endpoint and an unparseable answer end the same way in every adapter."""
    try:
        yield
    except AWS_ERRORS as exc:
        raise translate(service, region, operation, exc) from exc


@functools.cache
def known_regions() -> frozenset[str]:
    """Every region of every partition in botocore's endpoint data (``aws``, ``aws-cn``,
    ``aws-us-gov``, ...), opt-in regions (ap-east-1, me-central-1, ...) included: the
    regions this botocore can reach. A name outside it resolves to no endpoint AWS runs
    (``us-east-9``), or is newer than this botocore."""
    partitions = create_loader().load_data("endpoints")["partitions"]
    return frozenset(str(r) for p in partitions for r in p.get("regions", {}))


def unknown_region(region: str) -> str | None:
    """None for a region botocore knows; else one line saying so, for the user."""
    known = known_regions()
    if region in known:
        return None
    near = difflib.get_close_matches(region, sorted(known), n=2)
    hint = f"did you mean {' or '.join(near)}?" if near else "for example us-east-1."
    return (
        f"unknown AWS region {region!r}: no partition botocore {botocore.__version__} knows "
        f"has it ({hint} Opt-in regions count; a region newer than this botocore needs a "
        "newer boto3)"
    )


class ClientFactory:
    """Creates (and caches) one client per service and region from one boto3 session.

    boto3 sessions are not thread-safe to create clients from concurrently, so
    creation is serialised; the clients themselves are thread-safe.
    """

    def __init__(self, session: Any, config: Config = RETRY_CONFIG, *, account: str = "") -> None:
        #: The account these clients read, put in every resource key ("" when unknown).
        self.account = account
        self._session = session
        self._config = config
        self._clients: dict[tuple[str, str], Any] = {}
        self._lock = threading.Lock()

    def __call__(self, service: str, region: str) -> Any:
        with self._lock:
            key = (service, region)
            if key not in self._clients:
                client = self._session.client(service, region_name=region, config=self._config)
                refuse_html_first(client)
                self._clients[key] = client
            return self._clients[key]

    # Typed accessors: mypy checks every call and response field against the stubs.

    def ec2(self, region: str) -> EC2Client:
        return cast("EC2Client", self("ec2", region))

    def eks(self, region: str) -> EKSClient:
        return cast("EKSClient", self("eks", region))

    def sagemaker(self, region: str) -> SageMakerClient:
        return cast("SageMakerClient", self("sagemaker", region))

    def tagging(self, region: str) -> ResourceGroupsTaggingAPIClient:
        return cast("ResourceGroupsTaggingAPIClient", self("resourcegroupstaggingapi", region))

    def dynamodb(self, region: str) -> DynamoDBClient:
        return cast("DynamoDBClient", self("dynamodb", region))

    def sns(self, region: str) -> SNSClient:
        return cast("SNSClient", self("sns", region))

    def cloudwatch(self, region: str) -> Any:
        """CloudWatch (no stubs are installed for it: ``mypy-boto3-cloudwatch`` would type it)."""
        return self("cloudwatch", region)

    def cloudtrail(self, region: str) -> Any:
        """CloudTrail (no stubs are installed for it: ``mypy-boto3-cloudtrail`` would type it)."""
        return self("cloudtrail", region)

    def cost_explorer(self) -> CostExplorerClient:
        return cast("CostExplorerClient", self("ce", "us-east-1"))  # a global service

    @property
    def session(self) -> Any:
        """The boto3 session (for the API-call counter's event hooks)."""
        return self._session


class ClientFor(Protocol):
    """Typed clients per region (what the inventory and actuator adapters receive)."""

    account: str

    def ec2(self, region: str) -> EC2Client: ...

    def eks(self, region: str) -> EKSClient: ...

    def sagemaker(self, region: str) -> SageMakerClient: ...

    def tagging(self, region: str) -> ResourceGroupsTaggingAPIClient: ...

    def cloudtrail(self, region: str) -> Any: ...


class OneLookActuator:
    """An actuator whose resource kind has no batched read of state and tags: ``inspect``
    looks at one target at a time (``_inspect_one``: None when it is gone)."""

    opt_in_tags: tuple[str, ...] = ()

    def __init__(self, clients: ClientFor) -> None:
        self._clients = clients

    def _inspect_one(self, target: Target) -> Observed | None:
        raise NotImplementedError

    def inspect(self, targets: Sequence[Target]) -> Mapping[str, Observed]:
        return {t.key: seen for t in targets if (seen := self._inspect_one(t)) is not None}


def tags_of(
    items: Iterable[Mapping[str, object]] | None, key: str = "Key", value: str = "Value"
) -> dict[str, str]:
    return {str(t[key]): str(t.get(value, "")) for t in items or []}


def chunks(items: list[Any], size: int) -> Iterator[list[Any]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


def token_pages(
    call: Callable[..., Mapping[str, Any]],
    token: str = "NextPageToken",  # noqa: S107 - the name of a response field
    **kwargs: Any,
) -> Iterator[Mapping[str, Any]]:
    """Pages of an operation botocore has no paginator for (e.g. ce:GetCostAndUsage).

    One shared loop instead of one per call: the request is repeated with the last
    response's ``token`` until a response has none. A token that comes back again ends
    the read with :class:`RepeatedPageTokenError` (as botocore's paginators do): asking
    again would loop forever, and some of these calls are billed.
    """
    seen: set[str] = set()
    while True:
        page = call(**kwargs)
        yield page
        next_token = page.get(token)
        if not next_token:
            return
        if next_token in seen:
            raise RepeatedPageTokenError(token=token, value=truncate(str(next_token), 80))
        seen.add(next_token)
        kwargs = {**kwargs, token: next_token}
