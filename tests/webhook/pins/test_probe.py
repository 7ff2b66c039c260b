"""The image-volume support probe against the Kubernetes API test server (or a real cluster)."""

from __future__ import annotations

import json
import logging

import pytest
from prometheus_client import REGISTRY

from tests.kubeapi import KubeServer
from webhook.probe import kept_image_volume, probe_image_volume_support, probe_pod
from wspin.resources import PODS, Forbidden, Kube

IMAGE = "ghcr.io/example/agentd@sha256:" + "0123456789abcdef" * 4
GAUGE = "wspin_webhook_image_volume_supported"


def gauge() -> float | None:
    value: float | None = REGISTRY.get_sample_value(GAUGE)
    return value


async def test_a_cluster_that_keeps_image_volumes_is_supported(
    kube: Kube, namespace: str, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO, logger="webhook.probe"):
        assert await probe_image_volume_support(kube, namespace, IMAGE) is True
    assert gauge() == 1.0
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]


async def test_the_probe_is_a_dry_run_and_stores_nothing(kube: Kube, namespace: str) -> None:
    await probe_image_volume_support(kube, namespace, IMAGE)
    assert (await kube.list(PODS, namespace))["items"] == []


async def test_an_api_server_that_drops_image_volumes_is_unsupported_with_one_error_line(
    kube: Kube,
    namespace: str,
    kube_server: KubeServer,
    caplog: pytest.LogCaptureFixture,
) -> None:
    kube_server.image_volume_gate = False
    with caplog.at_level(logging.INFO, logger="webhook.probe"):
        assert await probe_image_volume_support(kube, namespace, IMAGE) is False
    assert gauge() == 0.0
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert len(errors) == 1
    line = errors[0].getMessage()
    assert "ImageVolume feature gate is off" in line
    assert "1.35" in line
    assert errors[0].fields["feature_gate"] == "ImageVolume"  # type: ignore[attr-defined]


def test_the_probe_pod_carries_an_image_volume_its_container_mounts() -> None:
    pod = probe_pod("ns", IMAGE)
    assert kept_image_volume(pod)
    (volume,) = pod["spec"]["volumes"]
    (mount,) = pod["spec"]["containers"][0]["volumeMounts"]
    assert mount["name"] == volume["name"]
    assert volume["image"] == {"reference": IMAGE, "pullPolicy": "IfNotPresent"}
    assert "llmsafespaces.dev/workspace" not in json.dumps(pod["metadata"])


@pytest.mark.parametrize(
    "volumes",
    [None, [], [{"name": "wspin-image-volume-probe"}], [{"name": "other", "image": {}}]],
)
def test_a_pod_without_the_image_volume_source_did_not_keep_it(
    volumes: list[dict[str, object]] | None,
) -> None:
    assert not kept_image_volume({"spec": {"volumes": volumes}})


async def test_a_probe_the_api_server_forbids_says_how_to_get_past_it(
    kube: Kube, namespace: str, kube_server: KubeServer
) -> None:
    kube_server.fail_next(403, method="POST", path=f"/api/v1/namespaces/{namespace}/pods")
    with pytest.raises(Forbidden) as caught:
        await probe_image_volume_support(kube, namespace, IMAGE)
    assert "--skip-image-volume-probe" in str(caught.value)
    assert "webhook.skipImageVolumeProbe" in caught.value.fix
