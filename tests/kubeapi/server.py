"""The test API server: REST routing over the store, fault injection and a write log.

``KubeServer`` is what fixtures hand to tests: ``url`` for ``Configuration(host=…)``, the
``store`` for direct inspection, ``writes`` (every POST/PUT/PATCH/DELETE it received, as
``(method, path)``), ``requests`` (every request, reads and watches too, with its query),
and the fault controls ``fail_next``, ``deny_creates`` (an admission policy's or webhook's
refusal, ``tests.kubeapi.admission``), ``compact``, ``drop_watches`` and
``send_bookmarks``. It listens on 127.0.0.1, port 0, plain HTTP.
"""

from __future__ import annotations

import asyncio
import copy
import json
import logging
import random
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, NamedTuple

from aiohttp import web

from tests.kubeapi import patch as patches
from tests.kubeapi.admission import Denial
from tests.kubeapi.authorization import review
from tests.kubeapi.kinds import (
    BUILTIN_KINDS,
    Kind,
    KindRegistry,
    chart_crd_files,
    crd_documents,
    load_crds,
)
from tests.kubeapi.listing import list_page
from tests.kubeapi.review import CALLER, impersonated
from tests.kubeapi.runtime_classes import admit_runtime_class
from tests.kubeapi.selectors import field_selector, label_selector
from tests.kubeapi.service_accounts import admit_service_account
from tests.kubeapi.status import ApiError, bad_request
from tests.kubeapi.store import Signal, Store
from tests.kubeapi.watch import is_true, serve_watch
from tests.kubeapi.webhooks import admit as admit_webhooks
from wspin.core.objects import Obj

log = logging.getLogger(__name__)
_WRITES = frozenset({"POST", "PUT", "PATCH", "DELETE"})
_NO_ROUTE = "the server could not find the requested resource"
EPHEMERAL_CONTAINERS = "ephemeralcontainers"
BINDING = "binding"


class Write(NamedTuple):
    """One write request as received (recorded even when it then failed)."""

    method: str
    path: str


class Request(NamedTuple):
    """One request of any kind as received: reads, lists and watches too."""

    method: str
    path: str
    query: dict[str, str]

    @property
    def is_watch(self) -> bool:
        return is_true(self.query.get("watch"))


@dataclass
class _Fault:
    status: int
    method: str | None
    path: str
    remaining: int
    message: str
    query: str = ""
    exact: bool = False
    selecting: str = ""

    def matches(self, method: str, path: str, query: Mapping[str, str]) -> bool:
        wanted = not self.query or self.query in query
        if self.selecting:
            wanted = wanted and self.selecting in query.get("labelSelector", "")
        where = path == self.path if self.exact else path.startswith(self.path)
        return (self.method in (None, method)) and where and wanted


class KubeServer:
    """A Kubernetes API test server on loopback; use ``async with KubeServer() as server``."""

    def __init__(
        self,
        *,
        crd_files: Iterable[Path] | None = None,
        image_volume_gate: bool = True,
        bookmark_interval: float = 1.0,
        history_limit: int = 10_000,
        latency: float = 0.0,
    ) -> None:
        files = list(crd_files) if crd_files is not None else chart_crd_files()
        self.kinds = KindRegistry([*BUILTIN_KINDS, *load_crds(files)])
        self.store = Store(self.kinds, history_limit=history_limit)
        self.store.image_volume_gate = image_volume_gate
        self._seed_crds(crd_documents(files))
        #: Service (namespace, name) → loopback port: where admission reaches a webhook.
        self.routes: dict[tuple[str, str], int] = {}
        #: Seconds between BOOKMARKs on watches that allow them.
        self.bookmark_interval = bookmark_interval
        #: Seconds every request but a watch waits before it is served (without holding the
        #: loop): a real API server's network and etcd round trip, for benchmarks that
        #: compare clients by how they overlap their requests.
        self.latency = latency
        #: Every POST/PUT/PATCH/DELETE received, in order; clear it to start counting.
        self.writes: list[Write] = []
        #: Every request received (reads, lists, watches and writes), in order.
        self.requests: list[Request] = []
        self.url = ""
        self._faults: list[_Fault] = []
        self._denials: list[Denial] = []
        self._runner: web.AppRunner | None = None

    # -- lifecycle ------------------------------------------------------------------------

    async def start(self) -> KubeServer:
        app = web.Application(client_max_size=8 * 1024 * 1024)
        app.router.add_route("*", "/{path:.*}", self._handle)
        # handler_cancellation: a client that hangs up ends its watch handler at once.
        self._runner = web.AppRunner(
            app, handler_cancellation=True, shutdown_timeout=1.0, access_log=None
        )
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        host, port = self._runner.addresses[0][:2]
        self.url = f"http://{host}:{port}"
        return self

    async def close(self) -> None:
        self.store.signal_watches(Signal.CLOSE)
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def __aenter__(self) -> KubeServer:
        return await self.start()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    # -- test controls --------------------------------------------------------------------

    @property
    def image_volume_gate(self) -> bool:
        """False: pods lose image volumes and their mounts on create, as with the gate off."""
        return self.store.image_volume_gate

    @image_volume_gate.setter
    def image_volume_gate(self, enabled: bool) -> None:
        self.store.image_volume_gate = enabled

    def route_service(self, namespace: str, name: str, port: int) -> None:
        """Send calls to Service ``namespace/name`` (any port) to 127.0.0.1:``port``."""
        self.routes[(namespace, name)] = port

    def _seed_crds(self, documents: list[Obj]) -> None:
        """The served CRDs exist as objects, Established, as after `kubectl apply` settles."""
        kind = self._kind("apiextensions.k8s.io", "v1", "customresourcedefinitions")
        for doc in documents:
            created = self.store.create(kind, "", {**doc, "status": {}})
            names = created["spec"]["names"]
            created["status"] = {
                "acceptedNames": names,
                "storedVersions": [v["name"] for v in created["spec"]["versions"] if v["storage"]],
                "conditions": [
                    {"type": kind_type, "status": "True", "reason": reason, "message": message}
                    for kind_type, reason, message in (
                        ("NamesAccepted", "NoConflicts", "no conflicts found"),
                        (
                            "Established",
                            "InitialNamesAccepted",
                            "the initial names have been accepted",
                        ),
                    )
                ],
            }
            self.store.update(kind, "", created["metadata"]["name"], created, status=True)

    def _kind(self, group: str, version: str, plural: str) -> Kind:
        kind = self.kinds.find(group, version, plural)
        assert kind is not None, plural
        return kind

    @property
    def open_watches(self) -> int:
        """How many watch streams are open now (wait for one before signalling it)."""
        return self.store.open_watches

    def fail_next(
        self,
        status: int = 500,
        *,
        method: str | None = None,
        path: str = "/",
        count: int = 1,
        message: str = "injected failure",
        query: str = "",
        exact: bool = False,
        selecting: str = "",
    ) -> None:
        """Answer the next ``count`` requests matching method and path prefix (the whole path
        with ``exact``, so an object's subresources are spared), carrying the query parameter
        ``query`` when given, and a label selector containing ``selecting`` when given, with
        ``status``.

        The failed requests change nothing (they are still recorded in ``writes``).
        """
        fault = _Fault(
            status, method and method.upper(), path, count, message, query, exact, selecting
        )
        self._faults.append(fault)

    def deny_creates(self, denial: Denial) -> None:
        """Refuse matching creates (dry runs too) as the denial's policy or webhook would."""
        self._denials.append(denial)

    def compact(self) -> None:
        """Compact history: a watch resuming from an older resourceVersion gets 410 Expired."""
        self.store.compact()

    def drop_watches(self, *, abort: bool = False) -> int:
        """End every open watch (cleanly, or by cutting the connection); returns how many."""
        return self.store.signal_watches(Signal.ABORT if abort else Signal.CLOSE)

    def send_bookmarks(self) -> int:
        """A BOOKMARK now on every open watch that allows them; returns how many watches."""
        return self.store.signal_watches(Signal.BOOKMARK)

    # -- HTTP -----------------------------------------------------------------------------

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        self.requests.append(Request(request.method, request.path, dict(request.query)))
        if request.method in _WRITES:
            self.writes.append(Write(request.method, request.path))
        if self.latency and not is_true(request.query.get("watch")):
            await asyncio.sleep(self.latency)
        CALLER.set(
            impersonated(
                request.headers.get("Impersonate-User"),
                request.headers.getall("Impersonate-Group", []),
            )
        )
        try:
            self._inject_fault(request.method, request.path, request.query)
            if request.path == "/version":
                return web.json_response({"major": "1", "minor": "32", "gitVersion": "v1.32.0"})
            if request.path == "/metrics":
                # Only the gauge tests ask for: which feature gates are on.
                gate = int(self.store.image_volume_gate)
                text = f'kubernetes_feature_enabled{{name="ImageVolume",stage="BETA"}} {gate}\n'
                return web.Response(text=text, content_type="text/plain")
            if request.path.startswith("/apis/authorization.k8s.io/v1/"):
                return await self._access_review(request)
            return await self._dispatch(request)
        except ApiError as err:
            return web.json_response(err.status(), status=err.code)
        except Exception as err:
            log.exception("test API server failed on %s %s", request.method, request.path)
            failure = ApiError(
                500, f"test API server bug on {request.method} {request.path}: {err!r}"
            )
            return web.json_response(failure.status(), status=500)

    def _inject_fault(self, method: str, path: str, query: Mapping[str, str]) -> None:
        for fault in self._faults:
            if fault.remaining > 0 and fault.matches(method, path, query):
                fault.remaining -= 1
                raise ApiError(fault.status, fault.message)

    def _admit(self, kind: Kind, path: str, body: Any) -> None:
        for denial in self._denials:
            if denial.matches(path):
                denial.count -= 1
                meta = (body.get("metadata") or {}) if isinstance(body, dict) else {}
                # The API server names a generateName object before validating admission.
                name = meta.get("name") or str(meta.get("generateName") or "") + "".join(
                    random.choices("bcdfghjklmnpqrstvwxz2456789", k=5)
                )
                raise denial.error(kind.plural, kind.group, str(name))

    def _route(self, path: str) -> tuple[Kind, str, str, str]:
        """(kind, namespace, name, subresource) for a REST path, or a 404."""
        parts = [p for p in path.split("/") if p]
        if parts[:1] == ["api"] and len(parts) >= 3:
            group, version, rest = "", parts[1], parts[2:]
        elif parts[:1] == ["apis"] and len(parts) >= 4:
            group, version, rest = parts[1], parts[2], parts[3:]
        else:
            raise ApiError(404, _NO_ROUTE, details={})
        namespace = ""
        if len(rest) >= 3 and rest[0] == "namespaces":
            inner = self.kinds.find(group, version, rest[2])
            if inner is not None and inner.namespaced:
                namespace, rest = rest[1], rest[2:]
        kind = self.kinds.find(group, version, rest[0])
        if kind is None or len(rest) > 3 or (kind.namespaced and len(rest) > 1 and not namespace):
            raise ApiError(404, _NO_ROUTE, details={})
        name = rest[1] if len(rest) > 1 else ""
        sub = rest[2] if len(rest) > 2 else ""
        pod_sub = (
            sub in (EPHEMERAL_CONTAINERS, BINDING) and kind.plural == "pods" and not kind.group
        )
        if sub and not pod_sub and (sub != "status" or not kind.status_subresource):
            raise ApiError(404, _NO_ROUTE, details={})
        return kind, namespace, name, sub

    async def _dispatch(self, request: web.Request) -> web.StreamResponse:
        kind, ns, name, sub = self._route(request.path)
        query = request.query
        dry_run = _dry_run(query.getall("dryRun", []))
        method = request.method
        store = self.store
        if sub == BINDING:
            if method != "POST":
                raise ApiError(405, f"the server does not allow {method} on {request.path}")
            return _reply(store.bind(kind, ns, name, await _body(request), dry_run=dry_run), 201)
        if method == "GET" and name:
            return _reply(store.get(kind, ns, name))
        if method == "GET":
            labels = label_selector(query.get("labelSelector"))
            fields = field_selector(query.get("fieldSelector"), kind)

            def matches(obj: Obj) -> bool:
                in_ns = not ns or obj["metadata"].get("namespace") == ns
                return in_ns and labels(obj) and fields(obj)

            if is_true(query.get("watch")):
                return await serve_watch(
                    request, store, kind, matches, bookmark_interval=self.bookmark_interval
                )
            items, meta = list_page(
                store,
                kind,
                ns,
                matches,
                limit=_limit(query.get("limit")),
                token=query.get("continue"),
                selected=bool(query.get("labelSelector") or query.get("fieldSelector")),
            )
            return _reply(self._list(kind, items, meta))
        if kind.namespaced and not ns:
            raise ApiError(405, f"{method} needs a namespace for {kind.plural}")
        if method == "POST" and not name:
            body = await _body(request)
            pod = kind.plural == "pods" and not kind.group
            if pod and isinstance(body, dict):
                self._admit_pod(ns, body)
            if (kind.custom or pod) and isinstance(body, dict):
                body = await self._admit_webhooks(kind, "CREATE", ns, body, None, dry_run)
            self._admit(kind, request.path, body)
            return _reply(store.create(kind, ns, body, dry_run=dry_run), 201)
        status, ephemeral = sub == "status", sub == EPHEMERAL_CONTAINERS
        if method in ("PUT", "PATCH") and name and kind.custom and not sub:
            old = store.get(kind, ns, name)
            if method == "PUT":
                new = await _body(request)
            else:
                new = _patcher(kind, request.content_type, await _body(request))(copy.deepcopy(old))
            if isinstance(new, dict):
                new = await self._admit_webhooks(kind, "UPDATE", ns, new, old, dry_run)
            if method == "PUT" and isinstance(new, dict):
                return _reply(store.update(kind, ns, name, new, dry_run=dry_run))
            return _reply(store.patch(kind, ns, name, lambda _: new, dry_run=dry_run))
        if method == "PUT" and name:
            body = await _body(request)
            return _reply(
                store.update(
                    kind, ns, name, body, status=status, ephemeral=ephemeral, dry_run=dry_run
                )
            )
        if method == "PATCH" and name:
            apply = _patcher(kind, request.content_type, await _body(request))
            return _reply(
                store.patch(
                    kind, ns, name, apply, status=status, ephemeral=ephemeral, dry_run=dry_run
                )
            )
        if method == "DELETE":
            options = await _delete_options(request)
            if name and not sub:
                return _reply(store.delete(kind, ns, name, options, dry_run=dry_run))
            if not name:
                labels = label_selector(query.get("labelSelector"))
                fields = field_selector(query.get("fieldSelector"), kind)
                # The objects themselves, as kube-apiserver answers a collection delete (a
                # single delete of most kinds answers a Status instead).
                deleted = []
                for obj in store.select(kind, ns, labels, fields):
                    store.delete(kind, ns, obj["metadata"]["name"], options, dry_run=dry_run)
                    deleted.append(obj)
                meta = {"resourceVersion": str(store.resource_version)}
                return _reply(self._list(kind, deleted, meta))
        raise ApiError(405, f"the server does not allow {method} on {request.path}")

    async def _admit_webhooks(
        self,
        kind: Kind,
        operation: str,
        namespace: str,
        obj: Obj,
        old: Obj | None,
        dry_run: bool,
    ) -> Obj:
        """Admission webhooks for a pod's CREATE and a custom resource's CREATE or UPDATE,
        after the built-in plugins and before the object's strategy runs (which is where the
        ImageVolume gate drops image volumes, as on v1.32) (``webhooks``)."""
        admission = "admissionregistration.k8s.io"
        mutating = self.store.select(
            self._kind(admission, "v1", "mutatingwebhookconfigurations"), ""
        )
        validating = self.store.select(
            self._kind(admission, "v1", "validatingwebhookconfigurations"), ""
        )
        if not mutating and not validating:
            return obj
        found = self.store.select(
            self._kind("", "v1", "namespaces"), "", lambda o: o["metadata"]["name"] == namespace
        )
        if kind.namespaced and not found:
            return obj  # the create is refused as a missing namespace further on
        labels = (found[0]["metadata"].get("labels") or {}) if found else {}
        obj.setdefault("metadata", {}).setdefault("namespace", namespace)
        return await admit_webhooks(
            mutating,
            validating,
            self.routes,
            kind=kind,
            operation=operation,
            namespace=namespace,
            namespace_labels=labels,
            obj=obj,
            old=old,
            dry_run=dry_run,
        )

    def _admit_pod(self, namespace: str, pod: Obj) -> None:
        """The built-in plugins a pod create meets before the webhooks: its ServiceAccount
        and RuntimeClass must exist (``service_accounts``, ``runtime_classes``)."""
        if not self._lookup("", "v1", "namespaces")("", namespace):
            return  # the create is refused as a missing namespace further on
        admit_service_account(namespace, pod, self._lookup("", "v1", "serviceaccounts"))
        classes = self._lookup("node.k8s.io", "v1", "runtimeclasses")
        admit_runtime_class(pod, lambda name: classes("", name))

    def _lookup(self, group: str, version: str, plural: str) -> Callable[[str, str], Obj | None]:
        """``lookup(namespace, name)``: the stored object of that kind, or None."""
        kind = self._kind(group, version, plural)

        def lookup(namespace: str, name: str) -> Obj | None:
            try:
                return self.store.get(kind, namespace, name)
            except ApiError as err:
                if err.code == 404:
                    return None
                raise

        return lookup

    async def _access_review(self, request: web.Request) -> web.Response:
        """SubjectAccessReview by RBAC; SelfSubjectAccessReview as the unauthenticated
        caller, who is cluster-admin here. Nothing is stored."""
        kind = request.path.rstrip("/").rsplit("/", 1)[-1]
        if request.method != "POST" or kind not in (
            "subjectaccessreviews",
            "selfsubjectaccessreviews",
        ):
            raise ApiError(404, _NO_ROUTE, details={})
        body = await _body(request)
        spec = body.get("spec") if isinstance(body, dict) else None
        if not isinstance(spec, dict) or not spec.get("resourceAttributes"):
            raise ApiError(422, f"{kind}: spec.resourceAttributes is required")
        if kind == "selfsubjectaccessreviews":
            status: Obj = {"allowed": True, "reason": "cluster-admin"}
        else:
            if not spec.get("user") and not spec.get("groups"):
                raise ApiError(422, "spec.user or spec.groups: at least one is required")
            rbac = "rbac.authorization.k8s.io"
            bindings = [
                (plural, obj)
                for plural in ("clusterrolebindings", "rolebindings")
                for obj in self.store.select(self._kind(rbac, "v1", plural), "")
            ]

            def lookup(plural: str, namespace: str, name: str) -> Obj | None:
                found = self.store.select(
                    self._kind(rbac, "v1", plural),
                    namespace,
                    lambda obj: obj["metadata"]["name"] == name,
                )
                return found[0] if found else None

            status = review(spec, bindings, lookup)
        answer = {**body, "status": status}
        answer.setdefault("metadata", {})["creationTimestamp"] = None
        return web.json_response(answer, status=201)

    def _list(self, kind: Kind, items: list[Obj], meta: Obj) -> Obj:
        """A List object; built-in items carry no kind/apiVersion, like kube-apiserver's."""
        if not kind.custom:
            items = [{k: v for k, v in i.items() if k not in ("kind", "apiVersion")} for i in items]
        return {
            "kind": f"{kind.kind}List",
            "apiVersion": kind.api_version,
            "metadata": meta,
            "items": items,
        }


def _reply(body: Obj, status: int = 200) -> web.Response:
    return web.json_response(body, status=status)


def _dry_run(values: list[str]) -> bool:
    for value in values:
        if value != "All":
            raise bad_request(f'unsupported dryRun value {value!r}: only "All" is allowed')
    return bool(values)


def _limit(value: str | None) -> int:
    """``limit`` as kube-apiserver reads it: absent, zero or negative means no limit."""
    if not value:
        return 0
    try:
        return int(value)
    except ValueError as err:
        raise bad_request(f"invalid limit {value!r}: {err}") from err


async def _body(request: web.Request) -> Any:
    raw = await request.read()
    if not raw:
        raise bad_request(f"{request.method} {request.path} needs a JSON body")
    try:
        return json.loads(raw)
    except ValueError as err:
        raise bad_request(f"the request body is not valid JSON: {err}") from err


async def _delete_options(request: web.Request) -> Obj:
    raw = await request.read()
    options: Obj = {}
    if raw:
        try:
            decoded = json.loads(raw)
        except ValueError as err:
            raise bad_request(f"DeleteOptions are not valid JSON: {err}") from err
        options = decoded if isinstance(decoded, dict) else {}
    for key in ("propagationPolicy", "gracePeriodSeconds"):
        if key in request.query:
            options[key] = request.query[key]
    if "orphanDependents" in request.query:
        options["orphanDependents"] = is_true(request.query["orphanDependents"])
    return options


def _patcher(kind: Kind, content_type: str, body: Any) -> Callable[[Obj], Any]:
    if content_type == patches.MERGE:
        return lambda obj: patches.merge_patch(obj, body)
    if content_type == patches.JSON:
        return lambda obj: patches.json_patch(obj, body)
    if content_type == patches.STRATEGIC and not kind.custom:
        return lambda obj: patches.strategic_merge_patch(obj, body)
    accepted = [patches.JSON, patches.MERGE] + ([] if kind.custom else [patches.STRATEGIC])
    raise ApiError(
        415,
        f"the body of the request was in an unknown format ({content_type or 'none'}) - "
        f"accepted media types include: {', '.join(accepted)}"
        + (" (server-side apply is not emulated)" if content_type == patches.APPLY else ""),
    )
