"""boto3 plumbing shared by the adapters: clients, retries and error translation."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Protocol

from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError

from costguard.ports import AccessDeniedError, SourceError, ThrottledError

if TYPE_CHECKING:
    from mypy_boto3_ce import CostExplorerClient
    from mypy_boto3_dynamodb import DynamoDBClient
    from mypy_boto3_ec2 import EC2Client
    from mypy_boto3_eks import EKSClient
    from mypy_boto3_resourcegroupstaggingapi import ResourceGroupsTaggingAPIClient
    from mypy_boto3_sagemaker import SageMakerClient
    from mypy_boto3_sns import SNSClient

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


def translate(service: str, region: str, operation: str, exc: Exception) -> SourceError:
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
        return "the endpoint answered with an HTML error page"
    line = text.splitlines()[0] if text else ""
    return line if len(line) <= limit else line[: limit - 1] + "…"


@contextmanager
def reading(service: str, region: str, operation: str) -> Iterator[None]:
    """Translate botocore failures inside the block into :class:`SourceError`."""
    try:
        yield
    except (ClientError, BotoCoreError) as exc:
        raise translate(service, region, operation, exc) from exc


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
                self._clients[key] = self._session.client(
                    service, region_name=region, config=self._config
                )
            return self._clients[key]

    # Typed accessors: mypy checks every call and response field against the stubs.

    def ec2(self, region: str) -> EC2Client:
        client: EC2Client = self("ec2", region)
        return client

    def eks(self, region: str) -> EKSClient:
        client: EKSClient = self("eks", region)
        return client

    def sagemaker(self, region: str) -> SageMakerClient:
        client: SageMakerClient = self("sagemaker", region)
        return client

    def tagging(self, region: str) -> ResourceGroupsTaggingAPIClient:
        client: ResourceGroupsTaggingAPIClient = self("resourcegroupstaggingapi", region)
        return client

    def dynamodb(self, region: str) -> DynamoDBClient:
        client: DynamoDBClient = self("dynamodb", region)
        return client

    def sns(self, region: str) -> SNSClient:
        client: SNSClient = self("sns", region)
        return client

    def cloudwatch(self, region: str) -> Any:
        """CloudWatch (no stubs are installed for it: ``mypy-boto3-cloudwatch`` would type it)."""
        return self("cloudwatch", region)

    def cloudtrail(self, region: str) -> Any:
        """CloudTrail (no stubs are installed for it: ``mypy-boto3-cloudtrail`` would type it)."""
        return self("cloudtrail", region)

    def cost_explorer(self) -> CostExplorerClient:
        client: CostExplorerClient = self("ce", "us-east-1")  # a global service
        return client

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
    response's ``token`` until a response has none.
    """
    while True:
        page = call(**kwargs)
        yield page
        next_token = page.get(token)
        if not next_token:
            return
        kwargs = {**kwargs, token: next_token}
