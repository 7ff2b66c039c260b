"""The webhook process's readiness gate for image-volume support, against the API test server."""

from __future__ import annotations

import asyncio

import pytest

from tests.kubeapi import KubeServer
from tests.webhook.conftest import AGENTD_IMAGE
from webhook import server
from wspin.resources import Kube


async def test_readiness_waits_for_the_probe_then_passes_on_a_supporting_cluster(
    kube: Kube, namespace: str
) -> None:
    gate = server.ImageVolumeGate(required=True)
    assert gate.check() == "image-volume support probe has not run yet"
    await gate.run(kube, namespace, AGENTD_IMAGE)
    assert gate.check() is None


async def test_readiness_stays_failed_naming_the_feature_gate_when_volumes_are_dropped(
    kube: Kube, namespace: str, kube_server: KubeServer
) -> None:
    kube_server.image_volume_gate = False
    gate = server.ImageVolumeGate(required=True)
    await gate.run(kube, namespace, AGENTD_IMAGE)
    problem = gate.check()
    assert problem is not None
    assert "ImageVolume feature gate" in problem
    assert "1.35" in problem


async def test_an_api_error_keeps_readiness_failed_and_the_probe_retries(
    kube: Kube, namespace: str, kube_server: KubeServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(server, "PROBE_RETRY_SECONDS", 0.05)
    kube_server.fail_next(503, method="POST", path=f"/api/v1/namespaces/{namespace}/pods")
    gate = server.ImageVolumeGate(required=True)
    probing = asyncio.create_task(gate.run(kube, namespace, AGENTD_IMAGE))
    async with asyncio.timeout(5):
        while gate.check() == "image-volume support probe has not run yet":
            await asyncio.sleep(0.01)
        assert "retrying" in (gate.check() or "")
        await probing
    assert gate.check() is None


def test_no_probe_is_required_without_api_access() -> None:
    assert server.ImageVolumeGate(required=False).check() is None
