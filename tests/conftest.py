"""Shared fixtures for every test package.

Kubernetes API fixtures (API-level tests use only these, so they run unchanged against a
real cluster when ``WSPIN_TEST_KUBECONFIG`` names a kubeconfig):

- ``real_cluster`` -> bool: whether the tests run on a real API server: ``WSPIN_TEST_KUBECONFIG``
  names one, or ``KUBEBUILDER_ASSETS`` names the binaries of one this session starts
  (``tests.support.apiserver``; its kubeconfig then becomes ``WSPIN_TEST_KUBECONFIG``, so
  everything that reads that variable, subprocesses included, reaches it).
- ``image_volume_gate`` -> bool: whether the API server keeps image volumes (the ImageVolume
  feature gate), asked of the server itself. Tests about the gate are marked
  ``image_volume_gate``: they are what runs with the gate off (``WSPIN_TEST_FEATURE_GATES=``).
- ``kube_server`` -> ``tests.kubeapi.KubeServer``: the in-process API test server (``.url``,
  ``.store``, ``.writes``, ``.image_volume_gate``, ``fail_next()``, ``compact()``,
  ``drop_watches()``, ``send_bookmarks()``). It is a fault-injection fixture, so it skips
  on a real cluster; request it only in tests that need those controls. A test that needs it
  for another reason says which with ``@pytest.mark.test_server_only("reason")`` (its skip
  gives the reason).
- ``_test_server`` -> ``KubeServer | None``: the test API server, or None on a real one, for
  tests that inject a fault where they can and run unchanged where they cannot.
- ``kube_api`` -> the ApiClient ``wspin.kube.config.new_api_client`` makes for the fake server
  (``Configuration(host=kube_server.url)``) or the real cluster; closed at teardown.
- ``kube`` -> ``wspin.kube.client.Kube`` over ``kube_api``.
- ``kubeconfig`` -> Path: a kubeconfig file for the same API server (console scripts and
  subprocesses): ``WSPIN_TEST_KUBECONFIG`` itself, or one naming the test server's URL.
- ``kube_as`` -> ``kube_as(user, group=None)``: a ``Kube`` impersonating that user.
- ``namespace`` -> str: a fresh, uniquely named namespace (deleted at teardown on a real
  cluster; the fake server is discarded whole).

Options: ``--kube-only`` keeps only the tests that use these fixtures (the real-server lane).

Hygiene: ``_no_asyncio_pending_tasks`` (autouse) fails any async test that leaves asyncio
tasks running after its fixtures are torn down; sync tests are not affected.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import os
import re
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path

import pytest
import yaml
from kubernetes_asyncio import client, config

from tests.kubeapi import KubeServer
from tests.support.apiserver import (
    ASSETS_ENV,
    DEFAULT_FEATURE_GATES,
    FEATURE_GATES_ENV,
    ControlPlane,
    assets_dir,
)
from tests.support.feature_gates import image_volume_gate_of
from wspin.core.errors import NotFound
from wspin.core.kinds import NAMESPACES, WORKSPACES
from wspin.kube.client import Kube
from wspin.kube.config import new_api_client

KUBECONFIG_ENV = "WSPIN_TEST_KUBECONFIG"
KUBE_FIXTURES = frozenset({"real_cluster", "kube_api", "kube_server", "_kube_server_url"})
"""Every API-level test uses one of these (the others depend on them)."""


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--kube-only",
        action="store_true",
        help="run only the tests that use the Kubernetes API fixtures",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "image_volume_gate: about the API server's ImageVolume gate (run with it off)"
    )
    config.addinivalue_line(
        "markers", "test_server_only(reason): needs the test API server for the reason given"
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if not config.getoption("--kube-only"):
        return
    kept = [item for item in items if uses_kube(item)]
    config.hook.pytest_deselected(items=[item for item in items if not uses_kube(item)])
    items[:] = kept


def uses_kube(item: pytest.Item) -> bool:
    return not KUBE_FIXTURES.isdisjoint(getattr(item, "fixturenames", ()))


@pytest.fixture(scope="session", autouse=True)
def _control_plane(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ControlPlane | None]:
    """With ``KUBEBUILDER_ASSETS`` (and no ``WSPIN_TEST_KUBECONFIG``): a real control plane for
    the session, started only if a collected test talks to an API server (None otherwise:
    the fake, or a cluster ``WSPIN_TEST_KUBECONFIG`` names)."""
    assets = os.environ.get(ASSETS_ENV)
    if (
        os.environ.get(KUBECONFIG_ENV)
        or not assets
        or not any(map(uses_kube, request.session.items))
    ):
        yield None
        return
    gates = os.environ.get(FEATURE_GATES_ENV, DEFAULT_FEATURE_GATES)
    workdir = tmp_path_factory.mktemp("control-plane")
    with (
        ControlPlane.running(assets_dir(assets), workdir, gates) as plane,
        pytest.MonkeyPatch.context() as env,
    ):
        env.setenv(KUBECONFIG_ENV, str(plane.kubeconfig))
        yield plane


@pytest.fixture(scope="session")
def real_cluster(_control_plane: ControlPlane | None) -> bool:
    return bool(os.environ.get(KUBECONFIG_ENV))


#: What a test does with the test API server that a real one cannot be made to do, by the
#: control it uses (the reason its skip gives on a real cluster).
CONTROLS = {
    "fail_next": "fails chosen requests",
    "deny_creates": "refuses chosen creates",
    "compact": "compacts the history on demand",
    "drop_watches": "drops open watches",
    "send_bookmarks": "sends bookmarks on demand",
    "bookmark_interval": "sets the bookmark interval",
    "image_volume_gate": "switches the ImageVolume gate while running",
    "requests": "reads the log of requests it received",
    "writes": "reads the log of writes it received",
    "open_watches": "counts open watches",
    "route_service": "routes a Service to a loopback port",
    "url": "checks its own address",
    "store": "reads its store directly",
}


def injected_controls(test: object) -> list[str]:
    """What ``test``'s own source does with ``kube_server`` (best effort: a helper it hands
    the server to is not read)."""
    try:
        source = inspect.getsource(test)  # type: ignore[arg-type]
    except (OSError, TypeError):
        return []
    used = set(re.findall(r"\bkube_server\.(\w+)", source))
    return [CONTROLS[name] for name in CONTROLS if name in used]


@pytest.fixture
async def kube_server(
    real_cluster: bool, request: pytest.FixtureRequest
) -> AsyncIterator[KubeServer]:
    if real_cluster:
        marker = request.node.get_closest_marker("test_server_only")
        if marker is not None:
            pytest.skip(f"needs the test API server: {marker.args[0]}")
        controls = injected_controls(getattr(request, "function", None))
        what = "; ".join(controls) or "uses the test API server's own controls"
        pytest.skip(f"needs the test API server ({what}), which a real one cannot do")
    async with KubeServer() as server:
        yield server


@pytest.fixture
def _kube_server_url(real_cluster: bool, request: pytest.FixtureRequest) -> str | None:
    """Sync on purpose: resolving ``kube_server`` lazily cannot happen inside a running loop."""
    if real_cluster:
        return None
    server: KubeServer = request.getfixturevalue("kube_server")
    return server.url


@pytest.fixture
def _test_server(
    real_cluster: bool, _kube_server_url: str | None, request: pytest.FixtureRequest
) -> KubeServer | None:
    """The already started test API server, or None on a real one (sync: see
    ``_kube_server_url``): for tests that inject a fault when they can and run unchanged
    when they cannot."""
    if real_cluster:
        return None
    server: KubeServer = request.getfixturevalue("kube_server")
    return server


@pytest.fixture
async def kube_api(_kube_server_url: str | None) -> AsyncIterator[client.ApiClient]:
    configuration = client.Configuration()
    if _kube_server_url is None:
        await config.load_kube_config(
            config_file=os.environ[KUBECONFIG_ENV], client_configuration=configuration
        )
    else:
        configuration.host = _kube_server_url
    api = new_api_client(configuration)
    try:
        yield api
    finally:
        await api.close()


@pytest.fixture
def kubeconfig(_kube_server_url: str | None, tmp_path: Path) -> Path:
    """A kubeconfig file for the same API server, for console scripts and subprocesses."""
    if _kube_server_url is None:
        return Path(os.environ[KUBECONFIG_ENV])
    path = tmp_path / "kubeconfig"
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "test", "cluster": {"server": _kube_server_url}}],
                "users": [{"name": "test", "user": {"token": "test-token"}}],
                "contexts": [{"name": "test", "context": {"cluster": "test", "user": "test"}}],
                "current-context": "test",
            }
        )
    )
    return path


@pytest.fixture
def kube(kube_api: client.ApiClient) -> Kube:
    return Kube(kube_api)


@pytest.fixture
async def image_volume_gate(kube: Kube) -> bool:
    """Whether the API server's ImageVolume gate is on, as the server itself reports it."""
    return await image_volume_gate_of(kube)


@pytest.fixture
async def kube_as(kube_api: client.ApiClient) -> AsyncIterator[Callable[..., Kube]]:
    """``kube_as(user, group=None)``: a client that impersonates ``user`` (and one group) with
    the ``Impersonate-*`` headers, as a cluster admin may; admission policies judge its writes
    as that user's."""
    opened: list[client.ApiClient] = []

    def make(user: str, group: str | None = None) -> Kube:
        api = new_api_client(kube_api.configuration)
        api.set_default_header("Impersonate-User", user)
        if group is not None:
            api.set_default_header("Impersonate-Group", group)
        opened.append(api)
        return Kube(api)

    try:
        yield make
    finally:
        for api in opened:
            await api.close()


@pytest.fixture
async def namespace(kube: Kube, real_cluster: bool) -> AsyncIterator[str]:
    name = f"wspin-test-{uuid.uuid4().hex[:10]}"
    await kube.create(NAMESPACES, {"metadata": {"name": name, "labels": {"wspin-test": "1"}}})
    yield name
    if real_cluster:
        # Gone before the next test starts (the test server is discarded whole instead): no
        # controller is left to release a Workspace's finalizer, which would hold it (and the
        # namespace) forever, and until the namespace controller gets to it every later
        # cluster-wide informer sees it (a Workspace's name is claimed cluster-wide).
        for ws in (await kube.list(WORKSPACES, name))["items"]:
            with contextlib.suppress(NotFound):
                unheld = {"metadata": {"finalizers": None}}
                await kube.patch(WORKSPACES, ws["metadata"]["name"], unheld, name)
                await kube.delete(WORKSPACES, ws["metadata"]["name"], name)
        await kube.delete(NAMESPACES, name)


@pytest.fixture(autouse=True)
def _no_asyncio_pending_tasks(request: pytest.FixtureRequest) -> Iterator[None]:
    """Async tests only: sync tests must not get an event loop they never asked for."""
    if inspect.iscoroutinefunction(getattr(request.node, "obj", None)):
        request.getfixturevalue("_asyncio_task_leak_check")
    yield


@pytest.fixture
async def _asyncio_task_leak_check() -> AsyncIterator[None]:
    """Set up before, torn down after, every other fixture of the test, so tasks those
    fixtures leave behind count too."""
    before = asyncio.all_tasks()
    yield
    # Let tasks cancelled by other fixtures' teardown run their last callbacks.
    for _ in range(3):
        await asyncio.sleep(0)
    current = asyncio.current_task()
    leaked = {t for t in asyncio.all_tasks() - before if t is not current and not t.done()}
    if leaked:
        described = sorted(map(repr, leaked))
        for task in leaked:
            task.cancel()
        await asyncio.gather(*leaked, return_exceptions=True)
        pytest.fail(f"the test left asyncio tasks running: {described}")
