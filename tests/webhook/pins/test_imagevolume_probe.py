"""The image-volume support probe against the Kubernetes API test server (or a real cluster)."""

from __future__ import annotations

import json
import logging

import pytest
from prometheus_client import CollectorRegistry

from tests.kubeapi import KubeServer
from tests.kubeapi.admission import Denial
from tests.support.clock import RecordingSleep
from tests.support.metrics import sample
from webhook.imagevolume_probe import (
    PROBE_BACKOFF,
    ImageVolumeGate,
    kept_image_volume,
    probe_image_volume_support,
    probe_pod,
)
from wspin.core.backoff import Backoff
from wspin.core.kinds import PODS
from wspin.kube.client import Kube

IMAGE = "ghcr.io/example/agentd@sha256:" + "0123456789abcdef" * 4
GAUGE = "wspin_webhook_image_volume_supported"


async def gate_verdict(kube: Kube, namespace: str) -> float | None:
    """The gauge a gate sets once the probe gave a definitive answer."""
    registry = CollectorRegistry()
    await ImageVolumeGate(required=True, registry=registry).run(kube, namespace, IMAGE)
    return sample(registry, GAUGE)


@pytest.mark.image_volume_gate
async def test_the_probe_finds_the_gate_as_the_api_server_reports_it(
    kube: Kube, namespace: str, image_volume_gate: bool, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO, logger="webhook.imagevolume_probe"):
        outcome = (await probe_image_volume_support(kube, namespace, IMAGE)).outcome
    assert outcome == ("supported" if image_volume_gate else "dropped")
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert len(errors) == (0 if image_volume_gate else 1)
    assert await gate_verdict(kube, namespace) == (1.0 if image_volume_gate else 0.0)


@pytest.mark.image_volume_gate
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
    with caplog.at_level(logging.INFO, logger="webhook.imagevolume_probe"):
        assert (await probe_image_volume_support(kube, namespace, IMAGE)).outcome == "dropped"
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert len(errors) == 1
    line = errors[0].getMessage()
    assert "ImageVolume feature gate is off" in line
    assert "1.35" in line
    assert errors[0].fields["feature_gate"] == "ImageVolume"  # type: ignore[attr-defined]
    assert await gate_verdict(kube, namespace) == 0.0


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


async def test_a_probe_rbac_forbids_is_a_failure_that_says_how_to_get_past_it(
    kube: Kube, namespace: str, kube_server: KubeServer
) -> None:
    kube_server.fail_next(
        403,
        method="POST",
        path=f"/api/v1/namespaces/{namespace}/pods",
        message=f'pods is forbidden: User "system:serviceaccount:{namespace}:wspin-webhook" '
        f'cannot create resource "pods" in API group "" in the namespace "{namespace}"',
    )
    result = await probe_image_volume_support(kube, namespace, IMAGE)
    assert result.outcome == "failed"
    assert "cannot create resource" in result.detail
    assert "--skip-image-volume-probe" in result.fix
    assert "webhook.skipImageVolumeProbe" in result.fix


POLICY_DENIALS = [
    Denial("policy", "no-image-volumes", "image volumes are not allowed here"),
    Denial("policy", "no-image-volumes", "image volumes are not allowed here", code=403),
    Denial("webhook", "validate.kyverno.svc-fail", "disallow-image-volumes: blocked"),
    Denial("webhook", "gatekeeper.sh", "[image-volumes] denied", code=422),
    Denial("pod-security", "restricted:latest", 'runAsNonRoot != true (pod "x")'),
]


@pytest.mark.parametrize("denial", POLICY_DENIALS, ids=lambda d: f"{d.source}-{d.code or 0}")
async def test_a_policy_that_refuses_the_probe_pod_is_named_not_reported_as_the_gate_off(
    kube: Kube,
    namespace: str,
    kube_server: KubeServer,
    caplog: pytest.LogCaptureFixture,
    denial: Denial,
) -> None:
    denial.path = f"/api/v1/namespaces/{namespace}/pods"
    kube_server.deny_creates(denial)
    with caplog.at_level(logging.INFO, logger="webhook.imagevolume_probe"):
        result = await probe_image_volume_support(kube, namespace, IMAGE)
    assert result.outcome == "refused-by-policy"
    assert not result.definitive  # nothing was learnt about the gate: no gauge is set
    assert denial.message in result.detail and denial.name in result.detail
    problem = result.problem or ""
    assert "admission policy refused the image-volume probe pod" in problem
    assert "says nothing about the ImageVolume gate" in problem
    assert "feature gate is off" not in caplog.text
    (line,) = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert "admission policy refused" in line.getMessage()
    assert denial.message in line.fields["api_error"]  # type: ignore[attr-defined]
    assert "exempt the probe pod" in line.fields["fix"]  # type: ignore[attr-defined]


async def test_a_validation_error_without_a_policy_is_a_failure_not_the_gate(
    kube: Kube, namespace: str, kube_server: KubeServer
) -> None:
    kube_server.fail_next(
        422,
        method="POST",
        path=f"/api/v1/namespaces/{namespace}/pods",
        message='Pod "p" is invalid: spec.volumes[0].image: Forbidden: not supported',
    )
    result = await probe_image_volume_support(kube, namespace, IMAGE)
    assert result.outcome == "failed"
    assert "ImageVolume gate" not in (result.problem or "")


async def test_a_refusing_policy_is_retried_with_backoff_until_it_lets_the_probe_through(
    kube: Kube, namespace: str, kube_server: KubeServer, caplog: pytest.LogCaptureFixture
) -> None:
    kube_server.deny_creates(
        Denial(
            "policy",
            "no-image-volumes",
            "image volumes are not allowed here",
            path=f"/api/v1/namespaces/{namespace}/pods",
            count=5,
        )
    )
    sleep = RecordingSleep()
    gate = ImageVolumeGate(
        required=True,
        registry=CollectorRegistry(),
        backoff=Backoff(2.0, 10.0),
        sleep=sleep,
    )
    sleep.observe = gate.check
    with caplog.at_level(logging.INFO, logger="webhook.imagevolume_probe"):
        await gate.run(kube, namespace, IMAGE)
    assert sleep.delays == [2.0, 4.0, 8.0, 10.0, 10.0]
    for problem in sleep.seen:
        assert isinstance(problem, str)
        assert "admission policy refused the image-volume probe pod" in problem
        assert "no-image-volumes" in problem and "retrying in" in problem
    assert "retrying in 10 s" in str(sleep.seen[-1])
    assert gate.check() is None  # the sixth attempt got through: supported
    retries = [r for r in caplog.records if r.getMessage() == "image-volume probe will retry"]
    assert [r.fields["outcome"] for r in retries] == ["refused-by-policy"] * 5  # type: ignore[attr-defined]


async def test_after_a_refusal_a_dropped_volume_still_reports_the_gate_off(
    kube: Kube, namespace: str, kube_server: KubeServer
) -> None:
    kube_server.image_volume_gate = False
    kube_server.deny_creates(
        Denial("webhook", "policy.example", "not yet", path=f"/api/v1/namespaces/{namespace}/pods")
    )
    sleep = RecordingSleep()
    gate = ImageVolumeGate(required=True, registry=CollectorRegistry(), sleep=sleep)
    await gate.run(kube, namespace, IMAGE)
    assert sleep.delays == [PROBE_BACKOFF.base]
    assert "enable the ImageVolume feature gate" in (gate.check() or "")
    assert gate.result is not None and gate.result.outcome == "dropped"
