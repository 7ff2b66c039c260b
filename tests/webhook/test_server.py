"""The webhook process's readiness gate for image-volume support, against the API test server."""

from __future__ import annotations

import pytest
from prometheus_client import CollectorRegistry

from tests.kubeapi import KubeServer
from tests.support.clock import RecordingSleep
from tests.webhook.conftest import AGENTD_IMAGE
from webhook.imagevolume_probe import ImageVolumeGate
from wspin.core.backoff import Backoff
from wspin.kube.client import Kube


async def test_readiness_waits_for_the_probe_then_passes_on_a_supporting_cluster(
    kube: Kube, namespace: str
) -> None:
    gate = ImageVolumeGate(required=True, registry=CollectorRegistry())
    assert gate.check() == "image-volume support probe has not run yet"
    await gate.run(kube, namespace, AGENTD_IMAGE)
    assert gate.check() is None


async def test_readiness_stays_failed_naming_the_feature_gate_when_volumes_are_dropped(
    kube: Kube, namespace: str, kube_server: KubeServer
) -> None:
    kube_server.image_volume_gate = False
    sleep = RecordingSleep()
    gate = ImageVolumeGate(required=True, registry=CollectorRegistry(), sleep=sleep)
    await gate.run(kube, namespace, AGENTD_IMAGE)
    problem = gate.check()
    assert problem is not None
    assert "ImageVolume feature gate" in problem
    assert "1.35" in problem
    assert sleep.delays == []  # a dropped volume is a definitive answer: no retry


@pytest.mark.parametrize("status", [503, 500, 403])
async def test_an_api_error_keeps_readiness_failed_and_the_probe_retries_with_backoff(
    kube: Kube, namespace: str, kube_server: KubeServer, status: int
) -> None:
    kube_server.fail_next(
        status, method="POST", path=f"/api/v1/namespaces/{namespace}/pods", count=4
    )
    sleep = RecordingSleep()
    gate = ImageVolumeGate(
        required=True,
        registry=CollectorRegistry(),
        backoff=Backoff(1.0, 4.0),
        sleep=sleep,
    )
    sleep.observe = gate.check
    await gate.run(kube, namespace, AGENTD_IMAGE)
    assert sleep.delays == [1.0, 2.0, 4.0, 4.0]
    assert all("image-volume support probe failed" in str(p) for p in sleep.seen)
    assert "retrying in 4 s" in str(sleep.seen[-1])
    assert gate.check() is None


def test_no_probe_is_required_without_api_access() -> None:
    assert ImageVolumeGate(required=False, registry=CollectorRegistry()).check() is None
