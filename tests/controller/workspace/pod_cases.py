"""The pod builder's golden cases: each ``testdata/pod/<case>.yaml`` holds a Workspace and the
controller settings that differ from ``BASE``; ``load`` reads one as the builder takes it."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import yaml

from controller.agentd_uploads import parse_upload_staging
from controller.settings import WorkspaceSettings
from tests.webhook.conftest import example_config
from wspin.core.delivery import AgentdDelivery, OpencodeDelivery

TESTDATA = Path(__file__).parent / "testdata" / "pod"
RELEASE = example_config()

BASE = WorkspaceSettings(
    inference_relay_url="http://relay-router.wspin.svc.cluster.local:8080",
    api_service_url="http://llmsafespaces-api.llmsafespaces.svc.cluster.local:8080",
    api_public_url="https://api.example.com",
    preview_origin_base_domain="preview.example.com",
    default_runtime_class="gvisor",
    termination_grace=40,
    agentd=AgentdDelivery(RELEASE.agentd.image),
    opencode=OpencodeDelivery(RELEASE.opencode.image),
)
"""The controller settings every case starts from: the example release, all URLs set."""

CASES = sorted(p.name.removesuffix(".yaml") for p in TESTDATA.glob("*.yaml"))


def load(case: str) -> tuple[dict[str, Any], WorkspaceSettings]:
    doc = yaml.safe_load((TESTDATA / f"{case}.yaml").read_text())
    overrides = dict(doc.get("settings") or {})
    if "upload_staging" in overrides:
        overrides["upload_staging"] = parse_upload_staging(overrides["upload_staging"])
    return doc["workspace"], dataclasses.replace(BASE, **overrides)
