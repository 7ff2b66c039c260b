"""Webhook test fixtures: an example release, captures, and a live HTTPS server.

- ``inject_config``: agentd/opencode images and pins used by every capture's manifests.
- ``capture(name)``: an AdmissionReview body from ``shared/fixtures/admission``.
- ``webhook``: the real application (``make_app``) served over TLS on 127.0.0.1 with a
  throwaway CA; ``webhook.post(body)`` sends as the API server does (``?timeout=10s``,
  verified TLS to the Service's DNS name).
"""

from __future__ import annotations

import datetime
import io
import json
import logging
import ssl
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import aiohttp
import pytest

from certs.build import issue_serving, new_ca, service_dns_names
from certs.tls import context_for
from tests.fixtures import ADMISSION
from webhook.app import make_app
from webhook.demo import DEMO_CONFIG
from webhook.inject import InjectConfig
from webhook.validate import ValidatorConfig
from wspin.core.logs import JSONFormatter
from wspin.http.probes import Readiness
from wspin.http.server import serve

if TYPE_CHECKING:
    from tests.webhook.rawhttps import Server

FIXTURES = ADMISSION
AGENTD_IMAGE = DEMO_CONFIG.agentd.image
OPENCODE_IMAGE = DEMO_CONFIG.opencode.image
SERVICE_HOST = "wspin-webhook.wspin-system.svc"


def example_config() -> InjectConfig:
    """The release the captured manifests were made with (agentd a/b, opencode c/d pins)."""
    return DEMO_CONFIG


@pytest.fixture
def inject_config() -> InjectConfig:
    return example_config()


def load_capture(name: str) -> dict[str, Any]:
    path = FIXTURES / name
    assert path.exists(), f"missing capture {path}: the shared fixtures must sit beside the repo"
    body: dict[str, Any] = json.loads(path.read_text())
    return body


@dataclass
class LiveWebhook:
    url: str
    session: aiohttp.ClientSession
    trust: ssl.SSLContext

    async def post(
        self, body: Any, path: str = "/mutate-pods?timeout=10s", **kwargs: Any
    ) -> aiohttp.ClientResponse:
        kwargs.setdefault("headers", {"Content-Type": "application/json"})
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        return await self.session.post(
            self.url + path, data=data, ssl=self.trust, server_hostname=SERVICE_HOST, **kwargs
        )


@pytest.fixture
async def webhook(tmp_path: Path) -> AsyncIterator[LiveWebhook]:
    now = datetime.datetime.now(datetime.UTC)
    ca = new_ca(now)
    leaf = issue_serving(ca, service_dns_names("wspin-webhook", "wspin-system"), now)
    trust = ssl.create_default_context(cadata=ca.cert_pem.decode())
    app = make_app(example_config(), ValidatorConfig(), Readiness())
    runner = await serve(app, "127.0.0.1", 0, ssl_context=context_for(leaf.cert_pem, leaf.key_pem))
    port = runner.port
    async with aiohttp.ClientSession() as session:
        yield LiveWebhook(f"https://127.0.0.1:{port}", session, trust)
    await runner.shutdown()


@pytest.fixture
async def server() -> AsyncIterator[Server]:
    """The admission routes over TLS on loopback with the ``QUICK`` deadlines."""
    # Imported here: rawhttps imports this module's helpers.
    from tests.webhook.rawhttps import QUICK, serving

    async with serving(QUICK) as running:
        yield running


@pytest.fixture
def log_lines() -> Iterator[io.StringIO]:
    """What the process logs meanwhile, as its JSON lines (INFO and above)."""
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(JSONFormatter())
    root = logging.getLogger()
    level = root.level
    root.addHandler(handler)
    root.setLevel(logging.INFO)
    try:
        yield stream
    finally:
        root.removeHandler(handler)
        root.setLevel(level)
