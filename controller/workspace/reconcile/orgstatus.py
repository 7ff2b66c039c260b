"""Org status from the API service: is the organisation that owns a Workspace suspended?

``GET <api-service-url>/api/v1/internal/orgs/<orgID>/status`` with the internal token in
``X-Internal-Token`` answers ``{"status": "active" | "suspended" | ...}``. The Workspace
reconciler asks on every Active reconcile of an org-owned Workspace, so the answer is cached:
- per org for ``ttl`` seconds (30 by default), with at most one request in flight per org, so
  a thousand Workspaces of one org cost one request per TTL;
- a failed refresh serves the last known status: a blip in the API service neither suspends
  nor resumes anything;
- with no status known at all the lookup fails open (``None``): the API service being down must
  not stop every tenant's workspaces. Failures are counted and logged at most once per
  ``log_interval`` per process.
The token never appears in a log line, an error or a metric label; org IDs are checked before
they are put in a URL path, so a hostile ``spec.owner.orgID`` cannot steer the request.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections import OrderedDict
from dataclasses import dataclass
from typing import Final

import aiohttp
import orjson
from prometheus_client import CollectorRegistry, Counter
from yarl import URL

from wspin.core.clock import Monotonic, monotonic

log = logging.getLogger("controller.orgstatus")

SUSPENDED: Final = "suspended"
TOKEN_HEADER: Final = "X-Internal-Token"  # noqa: S105 (a header name)
# Org IDs are UUIDs or short slugs; anything else is not looked up.
_ORG_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
# The answer is one short JSON object; a larger body is a misrouted request.
MAX_BODY_BYTES: Final = 64 * 1024
# Bounded memory however many orgs the Workspaces name; least recently used go first.
MAX_ORGS: Final = 10_000


class OrgStatusError(Exception):
    """The API service did not give a usable answer (the message never holds the token)."""


@dataclass
class _Entry:
    status: str
    fresh_until: float


class OrgStatusMetrics:
    """``llmsafespaces_org_status_lookup_failures_total{reason}``."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.failures = Counter(
            "llmsafespaces_org_status_lookup_failures_total",
            "Org status lookups against the API service that failed; the last known status "
            "(or, with none, 'not suspended') was used instead.",
            ["reason"],
            registry=registry,
        )


class OrgStatusCache:
    """Cached, single-flight org status lookups; see the module docstring for the rules."""

    def __init__(
        self,
        session: aiohttp.ClientSession | None,
        base_url: str,
        token: str,
        metrics: OrgStatusMetrics,
        *,
        ttl: float = 30.0,
        timeout: float = 5.0,
        log_interval: float = 60.0,
        clock: Monotonic = monotonic,
    ) -> None:
        self._session = session
        """The HTTP session; None: one of its own, opened on first use and closed by close()."""
        self._owns_session = session is None
        self._base = URL(base_url.rstrip("/"))
        self._token = token
        self._metrics = metrics
        self.ttl = ttl
        self._timeout = aiohttp.ClientTimeout(total=timeout)
        self._log_interval = log_interval
        self._clock = clock
        self._entries: OrderedDict[str, _Entry] = OrderedDict()
        self._inflight: dict[str, asyncio.Task[str]] = {}
        self._last_log = -float("inf")

    async def status(self, org_id: str) -> str | None:
        """The org's status, the last known one when a refresh fails, or None when unknown."""
        entry = self._entries.get(org_id)
        now = self._clock()
        if entry is not None:
            self._entries.move_to_end(org_id)
            if entry.fresh_until > now:
                return entry.status
        try:
            status = await asyncio.shield(self._fetch_once(org_id))
        except OrgStatusError as err:
            self._failed(str(err), org_id)
            return entry.status if entry is not None else None
        self._entries[org_id] = _Entry(status, self._clock() + self.ttl)
        self._entries.move_to_end(org_id)
        while len(self._entries) > MAX_ORGS:
            self._entries.popitem(last=False)
        return status

    def fresh_for(self, org_id: str) -> float:
        """Seconds until the cached status goes stale (0 when there is none): when to look again."""
        entry = self._entries.get(org_id)
        return max(0.0, entry.fresh_until - self._clock()) if entry is not None else 0.0

    async def close(self) -> None:
        """Cancel lookups still in flight and close an own session (at shutdown)."""
        tasks = list(self._inflight.values())
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        if self._owns_session and self._session is not None:
            await self._session.close()
            self._session = None

    def _fetch_once(self, org_id: str) -> asyncio.Task[str]:
        task = self._inflight.get(org_id)
        if task is None:
            task = asyncio.create_task(self._fetch(org_id), name=f"org-status-{org_id}")
            self._inflight[org_id] = task
            task.add_done_callback(lambda _: self._inflight.pop(org_id, None))
        return task

    async def _fetch(self, org_id: str) -> str:
        if not _ORG_ID.match(org_id):
            raise OrgStatusError("invalid-org-id")
        url = self._base / "api/v1/internal/orgs" / org_id / "status"
        if self._session is None:
            self._session = aiohttp.ClientSession()
        try:
            async with self._session.get(
                url,
                headers={TOKEN_HEADER: self._token},
                timeout=self._timeout,
                allow_redirects=False,
            ) as response:
                if response.status != 200:
                    raise OrgStatusError(f"http-{response.status}")
                body = await response.content.read(MAX_BODY_BYTES + 1)
        except TimeoutError as err:
            raise OrgStatusError("timeout") from err
        except aiohttp.ClientError as err:
            raise OrgStatusError("unreachable") from err
        if len(body) > MAX_BODY_BYTES:
            raise OrgStatusError("oversized")
        try:
            decoded = orjson.loads(body)
        except orjson.JSONDecodeError as err:
            raise OrgStatusError("malformed") from err
        status = decoded.get("status") if isinstance(decoded, dict) else None
        if not isinstance(status, str) or not status:
            raise OrgStatusError("malformed")
        return status.strip().lower()

    def _failed(self, reason: str, org_id: str) -> None:
        self._metrics.failures.labels(reason).inc()
        now = self._clock()
        if now - self._last_log >= self._log_interval:
            self._last_log = now
            log.warning(
                "org status lookup failed (%s) for org %s; using the last known status, or "
                "treating the org as active when none is known",
                reason,
                org_id if _ORG_ID.match(org_id) else "<invalid org id>",
            )


@dataclass(frozen=True)
class OrgVerdict:
    """What the org's status means for one Workspace."""

    suspended: bool
    detail: str
    recheck: float
    """Seconds until the status is looked up again (a suspension or a resumption then)."""


async def verdict(cache: OrgStatusCache, org_id: str) -> OrgVerdict:
    """Suspended only on a known ``suspended`` status; unknown fails open."""
    status = await cache.status(org_id)
    suspended = status == SUSPENDED
    detail = f"organisation {org_id} is suspended: the pod is stopped, the volume is kept"
    return OrgVerdict(suspended, detail if suspended else "", cache.fresh_for(org_id) or cache.ttl)
