"""Plain-dict access to Kubernetes resources over the official asyncio client's transport.

Why not the generated ``CoreV1Api`` models: both processes keep objects as the JSON the API
server sent (no model objects on the webhook's hot path, and 10,000 cached Workspaces fit
in memory as dicts). This module reuses ``ApiClient`` for auth,
TLS and kubeconfig handling and speaks the REST paths itself, so every resource (built-in or
custom) has the same small surface: get, list, create, replace, patch, delete, watch.

Errors become the ``KubeAPIError`` family, with the client exception chained as the cause.
Answers are decoded with orjson: a page of workspace pods decodes about three times faster
than with ``json``, and decoding holds the event loop.
"""

from __future__ import annotations

import builtins
import re
from collections.abc import AsyncIterator, Mapping
from typing import TYPE_CHECKING, Any, Literal

import orjson

from wspin.core.errors import (
    AlreadyExists,
    Conflict,
    Forbidden,
    Gone,
    Invalid,
    KubeAPIError,
    NamespaceTerminating,
    NotFound,
    UnsafeName,
)
from wspin.core.kinds import Resource
from wspin.core.objects import Obj

if TYPE_CHECKING:
    import aiohttp
    from kubernetes_asyncio.client import ApiClient

# aiohttp and the client package (about a second to import together) are loaded by the
# methods that send, never at import: flag-defining modules import this one, and
# `wspin <command> --help` must answer at once. An ApiClient has loaded both anyway.

PatchType = Literal["merge", "json", "strategic", "apply"]

_PATCH_CONTENT_TYPES: dict[PatchType, str] = {
    "merge": "application/merge-patch+json",
    "json": "application/json-patch+json",
    "strategic": "application/strategic-merge-patch+json",
    "apply": "application/apply-patch+yaml",
}


_SEGMENT = re.compile(r"^[A-Za-z0-9_.:-]{1,253}$")
"""What a name or namespace may be to go into a request path: one path segment of the
characters Kubernetes names use (DNS subdomains, plus ``_`` and ``:`` for the RBAC and system
names), never ``/``, ``%``, ``..``, blanks or nothing. An HTTP client normalises
``x/../y`` before it sends it, so a name taken from an object a tenant writes could otherwise
address another object than the one it names."""


def checked_segment(value: str, what: str) -> str:
    """``value`` when it is one safe path segment; ``UnsafeName`` naming ``what`` otherwise."""
    if not isinstance(value, str) or not _SEGMENT.match(value) or ".." in value or value == ".":
        raise UnsafeName(
            f"refusing {what} {value!r}: not a Kubernetes object name (one path segment of "
            "letters, digits, '-', '.', '_' or ':', without '..', '/' or '%')"
        )
    return value


def _path(res: Resource, namespace: str | None, name: str | None = None, sub: str = "") -> str:
    """``res``'s REST path, every variable part checked first (``checked_segment``)."""
    if namespace and res.namespaced:  # none (or "") is every namespace
        checked_segment(namespace, f"{res.plural} namespace")
    if name is not None:
        checked_segment(name, f"{res.plural} name")
    if sub:
        checked_segment(sub, f"{res.plural} subresource")
    return res.path(namespace, name, sub)


def _error_for(status: int, body: Obj | None, what: str) -> KubeAPIError:
    reason = str((body or {}).get("reason", ""))
    message = str((body or {}).get("message", "")) or f"HTTP {status}"
    text = f"{what}: {message}"
    if status == 404:
        return NotFound(text, status, reason)
    if status == 409:
        kind = AlreadyExists if reason == "AlreadyExists" else Conflict
        return kind(text, status, reason)
    if status == 403:
        terminating = _namespace_terminating(body)
        return (NamespaceTerminating if terminating else Forbidden)(text, status, reason)
    if status == 410:
        return Gone(text, status, reason)
    if status == 422:
        return Invalid(text, status, reason)
    return KubeAPIError(text, status, reason)


def _namespace_terminating(body: Obj | None) -> bool:
    """The admission plugin marks its refusal with a ``NamespaceTerminating`` cause."""
    details = (body or {}).get("details")
    causes = details.get("causes") if isinstance(details, dict) else None
    return any(
        isinstance(cause, dict) and cause.get("reason") == "NamespaceTerminating"
        for cause in causes or []
    )


class Kube:
    """Plain-dict REST calls through one ``ApiClient`` (auth, TLS and host come from it)."""

    def __init__(self, api: ApiClient) -> None:
        self.api = api

    async def request(
        self,
        method: str,
        path: str,
        *,
        query: Mapping[str, Any] | None = None,
        body: Any = None,
        content_type: str = "application/json",
        request_timeout: float | None = None,
        what: str = "",
    ) -> Obj:
        """One call; returns the decoded JSON body or raises a ``KubeAPIError``."""
        import aiohttp

        what = what or f"{method} {path}"
        response = await self._send(method, path, query, body, content_type, request_timeout, what)
        try:
            raw = await response.read()
        except (aiohttp.ClientError, TimeoutError) as err:  # the body was cut off
            raise KubeAPIError(
                f"{what}: reading the answer failed: {err or type(err).__name__}", response.status
            ) from err
        finally:
            response.release()
        try:
            decoded: Any = orjson.loads(raw) if raw else {}
        except ValueError:
            # A proxy in front of the API server (HTML error page) or a broken answer: callers
            # handle KubeAPIError, so it must not escape as a decoding error.
            raise KubeAPIError(
                f"{what}: HTTP {response.status} with a body that is not JSON "
                f"({response.content_type or 'no content type'})",
                response.status,
            ) from None
        if not 200 <= response.status <= 299:
            raise _error_for(response.status, decoded if isinstance(decoded, dict) else None, what)
        return decoded if isinstance(decoded, dict) else {"items": decoded}

    async def _send(
        self,
        method: str,
        path: str,
        query: Mapping[str, Any] | None,
        body: Any,
        content_type: str,
        request_timeout: float | None,
        what: str,
    ) -> aiohttp.ClientResponse:
        import aiohttp

        params = [(k, _query_value(v)) for k, v in (query or {}).items() if v is not None]
        try:
            response: aiohttp.ClientResponse = await self.api.call_api(
                path,
                method,
                query_params=params,
                header_params={"Content-Type": content_type, "Accept": "application/json"},
                body=body,
                auth_settings=["BearerToken"],
                _preload_content=False,
                _request_timeout=request_timeout,
            )
        except (aiohttp.ClientError, TimeoutError, OSError) as err:
            raise KubeAPIError(
                f"{what or method + ' ' + path}: {err or type(err).__name__}"
            ) from err
        return response

    # -- typed verbs ------------------------------------------------------------------------

    async def get(self, res: Resource, name: str, namespace: str | None = None) -> Obj:
        return await self.request(
            "GET", _path(res, namespace, name), what=f"get {res.plural} {_ref(namespace, name)}"
        )

    async def get_or_none(
        self, res: Resource, name: str, namespace: str | None = None
    ) -> Obj | None:
        try:
            return await self.get(res, name, namespace)
        except NotFound:
            return None

    async def list(
        self,
        res: Resource,
        namespace: str | None = None,
        *,
        labels: str | None = None,
        fields: str | None = None,
        resource_version: str | None = None,
        limit: int | None = None,
        continue_token: str | None = None,
    ) -> Obj:
        """The raw List object (``items``, ``metadata.resourceVersion`` and, when ``limit``
        cut it short, ``metadata.continue``)."""
        query = {
            "labelSelector": labels,
            "fieldSelector": fields,
            "resourceVersion": resource_version,
            "limit": limit,
            "continue": continue_token,
        }
        return await self.request(
            "GET", _path(res, namespace), query=query, what=f"list {res.plural}"
        )

    async def list_pages(
        self,
        res: Resource,
        namespace: str | None = None,
        *,
        labels: str | None = None,
        limit: int = 500,
    ) -> AsyncIterator[Obj]:
        """The List in pages of at most ``limit`` items, following ``continue`` to the end.

        Every page comes from one consistent snapshot (the first page's resourceVersion), so
        a caller can decode and drop each page before the next arrives instead of holding the
        whole list at once. A continue token whose snapshot was compacted meanwhile raises
        ``Gone``: the caller starts over (a fresh list, a fresh snapshot)."""
        token: str | None = None
        while True:
            page = await self.list(res, namespace, labels=labels, limit=limit, continue_token=token)
            token = str((page.get("metadata") or {}).get("continue") or "") or None
            yield page
            if token is None:
                return

    async def create(
        self, res: Resource, obj: Obj, namespace: str | None = None, *, dry_run: bool = False
    ) -> Obj:
        ns = namespace or obj.get("metadata", {}).get("namespace")
        name = obj.get("metadata", {}).get("name")
        if name is not None:  # none: a review, or generateName (the server names it)
            checked_segment(name, f"{res.plural} name")
        body = {"apiVersion": res.api_version, "kind": res.kind, **obj}
        return await self.request(
            "POST",
            _path(res, ns),
            body=body,
            query={"dryRun": "All" if dry_run else None},
            what=f"create {res.plural} {_ref(ns, obj.get('metadata', {}).get('name', ''))}",
        )

    async def replace(self, res: Resource, obj: Obj, *, sub: str = "") -> Obj:
        meta = obj.get("metadata", {})
        ns, name = meta.get("namespace"), meta["name"]
        body = {"apiVersion": res.api_version, "kind": res.kind, **obj}
        return await self.request(
            "PUT",
            _path(res, ns, name, sub),
            body=body,
            what=f"update {res.plural} {_ref(ns, name)}",
        )

    async def patch(
        self,
        res: Resource,
        name: str,
        patch: Any,
        namespace: str | None = None,
        *,
        patch_type: PatchType = "merge",
        sub: str = "",
        field_manager: str | None = None,
    ) -> Obj:
        return await self.request(
            "PATCH",
            _path(res, namespace, name, sub),
            body=patch,
            content_type=_PATCH_CONTENT_TYPES[patch_type],
            query={"fieldManager": field_manager},
            what=f"patch {res.plural}{'/' + sub if sub else ''} {_ref(namespace, name)}",
        )

    async def delete(
        self,
        res: Resource,
        name: str,
        namespace: str | None = None,
        *,
        grace_seconds: int | None = None,
        missing_ok: bool = True,
        uid: str | None = None,
    ) -> None:
        """Delete ``name``; ``uid``: only that very object (a Conflict when the name now holds
        another, e.g. one re-created meanwhile)."""
        body: Obj | None = None
        if grace_seconds is not None or uid is not None:
            body = {"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": "Background"}
            if grace_seconds is not None:
                body["gracePeriodSeconds"] = grace_seconds
            if uid is not None:
                body["preconditions"] = {"uid": uid}
        try:
            await self.request(
                "DELETE",
                _path(res, namespace, name),
                body=body,
                what=f"delete {res.plural} {_ref(namespace, name)}",
            )
        except NotFound:
            if not missing_ok:
                raise

    async def delete_collection(
        self, res: Resource, namespace: str, *, labels: str
    ) -> builtins.list[Obj]:
        """Delete every object in ``namespace`` the label selector ``labels`` selects, and only
        those; the objects deleted. An empty selector is refused: it would select everything."""
        if not labels.strip():
            raise UnsafeName(f"refusing to delete every {res.plural}: the label selector is empty")
        answer = await self.request(
            "DELETE",
            _path(res, checked_segment(namespace, f"{res.plural} namespace")),
            query={"labelSelector": labels},
            what=f"delete {res.plural} in {namespace} selected by {labels}",
        )
        items = answer.get("items")
        return [item for item in items if isinstance(item, dict)] if isinstance(items, list) else []

    async def watch(
        self,
        res: Resource,
        namespace: str | None = None,
        *,
        resource_version: str | None = None,
        labels: str | None = None,
        timeout_seconds: int = 300,
    ) -> AsyncIterator[Obj]:
        """Yield raw watch events (``{"type", "object"}``), BOOKMARKs included.

        An ``ERROR`` event with code 410 is raised as ``Gone`` so the caller re-lists.
        The stream ends when the server closes it (``timeoutSeconds``).
        """
        query = {
            "watch": "true",
            "allowWatchBookmarks": "true",
            "resourceVersion": resource_version,
            "labelSelector": labels,
            "timeoutSeconds": timeout_seconds,
        }
        import aiohttp

        what = f"watch {res.plural}"
        response = await self._send(
            "GET",
            _path(res, namespace),
            query,
            None,
            "application/json",
            timeout_seconds + 30,
            what,
        )
        try:
            if response.status != 200:
                raw = await response.read()
                try:
                    decoded = orjson.loads(raw) if raw else None
                except ValueError:
                    decoded = None  # not the API server's Status (a proxy's page): HTTP code only
                raise _error_for(
                    response.status, decoded if isinstance(decoded, dict) else None, what
                )
            async for line in response.content:
                if not line.strip():
                    continue
                event: Obj = orjson.loads(line)
                if event.get("type") == "ERROR":
                    status = event.get("object", {})
                    raise _error_for(int(status.get("code", 500)), status, what)
                yield event
        except (aiohttp.ClientError, TimeoutError) as err:
            raise KubeAPIError(f"{what}: stream broke: {err or type(err).__name__}") from err
        finally:
            response.release()


def _ref(namespace: str | None, name: str) -> str:
    return f"{namespace}/{name}" if namespace else name


def _query_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)
