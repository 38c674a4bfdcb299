"""Shared fixtures: fake AWS credentials for everything, moto in-process or over HTTP."""

from __future__ import annotations

import gc
import os
from collections.abc import Iterator

import pytest

import tests.support.profiles  # noqa: F401  (loads the Hypothesis profile)

os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")


def _quicker_moto_and_botocore() -> None:
    """Every boto3 session in a test process reads botocore's service models once, and
    moto's server lists its own package once (``costguard_demo.server.quicken``): a
    session and five clients cost about 0.3 s of CPU with the models read again, 0.04 s
    without; the product makes a session per member account it enters, and the tests
    make thousands."""
    from costguard_demo.server import quicken

    quicken()


_quicker_moto_and_botocore()


def pytest_collection_finish(session: pytest.Session) -> None:
    """What collection built (modules, fixtures, models) lives all session: it is frozen out
    of the cycle collector's walks (which ``quicken`` has made rarer)."""
    gc.collect()
    gc.freeze()


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Under pytest-xdist (``make test``: ``--dist loadgroup``), every test of a module that
    reads a module-scoped fixture goes to one worker, so the fixture (an Organization demo
    run, a CDK synth, a deployed template, a seeded fleet) is built once, not once per
    worker; so does a session-scoped fixture that the module defines itself (the Lambda
    asset's bundle and probes). Every test that reads one of the shared session-scoped CDK
    synths (cached per process: ``tests/infra/synth.py``) goes to one worker too, with the
    grouped tests of its module. The other tests spread as usual, the longest first
    (:func:`_longest_first`).

    The tests listed in ``tests/support/slow.py`` are marked ``slow``, and every test that
    reads a CDK synth of ``tests/infra/conftest.py`` is marked ``infra``, whether its module
    says so or not (``make check`` skips both; ``make test`` runs them).

    ``tryfirst``: pytest-xdist reads the ``xdist_group`` marks in its own hook of this name,
    which runs before a conftest's otherwise (a worker registers it after loading this
    file), and finds none; see also :class:`_GroupInNodeId`."""
    from tests.support.slow import SLOW

    reads_a_synth: set[pytest.Item] = set()
    for item in items:
        path, _, name = item.nodeid.partition("::")
        if name.partition("[")[0] in SLOW.get(path, ()):
            item.add_marker(pytest.mark.slow)
        info = getattr(item, "_fixtureinfo", None)
        synths = (info.name2fixturedefs.get(n, ()) for n in info.names_closure) if info else ()
        if any(defs and defs[-1].baseid == "tests/infra" for defs in synths):
            item.add_marker(pytest.mark.infra)  # it reads a synth (tests/infra/conftest.py)
            reads_a_synth.add(item)
    grouped: dict[pytest.Item, str] = {}
    for item in items:
        info = getattr(item, "_fixtureinfo", None)
        if info is None:
            continue
        module = item.nodeid.split("::")[0]
        for name in sorted(info.names_closure):
            defs = info.name2fixturedefs.get(name, ())
            if defs and (
                defs[-1].scope == "module"
                or (defs[-1].scope == "session" and defs[-1].baseid == module)
            ):
                grouped[item] = module
                break
    # The CDK synths of tests/infra/conftest.py are built once per process: every test that
    # reads one, and the grouped tests of its module, go to one worker, which builds each
    # synth once (spread over both, each worker built each synth: 10-20 CPU-s apiece).
    synth_modules = {i.nodeid.split("::")[0] for i in reads_a_synth} | set(SYNTH_READERS)
    for item in items:
        if item in reads_a_synth or grouped.get(item) in synth_modules:
            grouped[item] = SYNTHS
    for item, group in grouped.items():
        item.add_marker(pytest.mark.xdist_group(group))
    _longest_first(items, grouped)


#: The xdist group of every test that reads a CDK synth (tests/infra/conftest.py).
SYNTHS = "cdk-synths"
#: Modules outside tests/infra whose module fixtures read those synths themselves
#: (``tests/infra/synth.py``): the IAM-enforced e2e tests deploy them onto moto.
SYNTH_READERS = (
    "tests/e2e/test_iam_enforced.py",
    "tests/e2e/test_answers_iam_enforced.py",
    "tests/e2e/test_org_act_iam_enforced.py",
)


def _longest_first(items: list[pytest.Item], grouped: dict[pytest.Item, str]) -> None:
    """The work units (a group, or a test alone) that take longest run first: the order
    pytest-xdist hands them out in (``--no-loadscope-reorder``, the Makefile), so that
    the last to start are short ones and both workers finish together. A unit's cost is
    what ``tests/support/slow.py`` measured (``LONGEST``); the others keep their order.
    Run serially, the order changes nothing but when each test runs."""
    from tests.support.slow import LONGEST

    def unit(item: pytest.Item) -> str:
        group = grouped.get(item)
        return f"@{group}" if group else item.nodeid.partition("[")[0]

    first_seen = {u: n for n, u in enumerate(dict.fromkeys(map(unit, items)))}
    items.sort(key=lambda item: (-LONGEST.get(unit(item), 0.0), first_seen[unit(item)]))


class _GroupInNodeId:
    """pytest-xdist 3.8 tells the controller a test's group by appending ``@group`` to the
    node id it reports (``item._nodeid``); pytest 9.2 builds ``nodeid`` from a structured
    id instead, so the suffix is lost and ``--dist loadgroup`` silently spreads every group
    over the workers (pytest-xdist issue 1386): each worker ran the Organization demo and
    the synths again. This puts the suffix where pytest 9.2 reads it, after xdist's hook,
    and does nothing where the id carries it already (older pytest, or a fixed xdist)."""

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(
        self, config: pytest.Config, items: list[pytest.Item]
    ) -> None:
        if not getattr(config.option, "loadgroup", False):
            return
        for item in items:
            names = sorted(
                {
                    str(m.args[0] if m.args else m.kwargs.get("name", "default"))
                    for m in item.iter_markers("xdist_group")
                }
            )
            suffix = "@" + "_".join(names)
            structured = getattr(item, "_id", None)
            if names and structured is not None and not item.nodeid.endswith(suffix):
                item._id = type(structured).parse(item.nodeid + suffix)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "slow: 0.75 CPU-s or more (tests/support/slow.py): `make check` skips it, `make test` not",
    )
    config.pluginmanager.register(_GroupInNodeId(), "costguard-xdist-group-ids")


@pytest.fixture(autouse=True)
def _fake_aws(monkeypatch: pytest.MonkeyPatch) -> None:
    """No test may reach a real account, whatever the developer's shell holds."""
    for key in ("AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_ENDPOINT_URL", "AWS_REGION"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_SESSION_TOKEN", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv("MOTO_EC2_LOAD_DEFAULT_AMIS", "false")
    monkeypatch.setenv("POWERTOOLS_METRICS_DISABLED", "true")
    # A warm Lambda's stored price catalog must not outlive the test (and moto) that made it.
    from costguard.wiring import CATALOG_CACHE

    CATALOG_CACHE.clear()
    # Nor a warm Lambda's secrets: Powertools keeps each value, and a client bound to the
    # endpoint of the moto that served it, for the whole process.
    from aws_lambda_powertools.utilities import parameters
    from aws_lambda_powertools.utilities.parameters import base

    parameters.clear_caches()
    base.DEFAULT_PROVIDERS.clear()


@pytest.fixture(autouse=True, scope="session")
def _cloudtrail_history() -> None:
    """moto answers CloudTrail's LookupEvents from the AttachVolume calls it accepted (it
    implements neither): the stale-volume guard's proof before deleting a volume."""
    from costguard_demo.cloudtrail import install

    install()


@pytest.fixture(scope="session")
def _moto_server_url() -> Iterator[str]:
    """moto's HTTP server, started once per test process (see tests/support/moto_server.py)."""
    from tests.support.moto_server import start

    url, server = start()
    yield url
    server.stop()  # type: ignore[attr-defined]


@pytest.fixture
def moto_server(_moto_server_url: str) -> Iterator[str]:
    """moto's HTTP server, reset to an empty AWS for this test; boto3 pointed at it."""
    from tests.support.moto_server import reset_aws

    with reset_aws(_moto_server_url) as url:
        yield url


@pytest.fixture
def aws() -> Iterator[object]:
    """moto in-process, and a boto3 session bound to it."""
    import boto3
    from moto import mock_aws

    with mock_aws():
        yield boto3.Session()
