"""The relay controller on a running manager with ``--relay-cloud=fake``: a fleet gets a VM."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import uuid

import pytest
from prometheus_client import CollectorRegistry

from controller.relay import wiring
from controller.settings import (
    ControllerSettings,
    InferenceRelaySettings,
    LeaderElectionSettings,
    OrphanSweepSettings,
    RelayArtifactConfig,
    RelayTokenStoreSettings,
    RuntimeSettings,
)
from controller.setup import new_manager
from tests.controller.relay.conftest import AWS_SLOT, SHA_AMD64, SHA_ARM64
from tests.support.waiting import eventually
from wspin.core.errors import ConfigError
from wspin.core.kinds import CONFIGMAPS, INFERENCE_RELAYS, LEASES, NAMESPACES
from wspin.kube.client import Kube

GOOD_ARTIFACTS = RelayArtifactConfig(("https://mirror.example/relay",), SHA_ARM64, SHA_AMD64)


def _settings(namespace: str, artifact: RelayArtifactConfig = GOOD_ARTIFACTS) -> ControllerSettings:
    return ControllerSettings(
        namespace=namespace,
        runtime=RuntimeSettings(health_port=0, metrics_port=0, bind_host="127.0.0.1"),
        inference_relay=InferenceRelaySettings(
            enabled=True,
            cloud="fake",
            router_url="http://127.0.0.1:9",  # no router: health is simply unknown
            artifact=artifact,
            orphans=OrphanSweepSettings(interval=3600),
        ),
    )


async def test_an_applied_fleet_gets_a_vm_status_and_peers_through_the_manager(
    kube: Kube, namespace: str
) -> None:
    settings = _settings(namespace)
    registry = CollectorRegistry()
    manager = new_manager(kube, settings, registry=registry)
    wiring.register(manager, settings)
    running = asyncio.create_task(manager.run())
    name = f"wired-{uuid.uuid4().hex[:8]}"
    try:
        await kube.create(
            INFERENCE_RELAYS,
            {
                "metadata": {"name": name},
                "spec": {"upstreamURL": "https://u.example", "providers": [AWS_SLOT]},
            },
        )

        async def launched() -> bool:
            status = (await kube.get(INFERENCE_RELAYS, name)).get("status") or {}
            instances = status.get("instances") or []
            return bool(instances) and instances[0]["id"].startswith("i-")

        await eventually(launched, "the fleet's VM in status")
        peers = await kube.get(CONFIGMAPS, "relay-router-peers", namespace)
        assert len(json.loads(peers["data"]["peers.json"])["relays"]) == 1
        assert (
            registry.get_sample_value(
                "llmsafespaces_relay_orphan_sweeps_total", {"outcome": "completed"}
            )
            == 1
        )
        await kube.delete(INFERENCE_RELAYS, name)

        async def gone() -> bool:
            return await kube.get_or_none(INFERENCE_RELAYS, name) is None

        await eventually(gone, "the finalizer to release the deleted fleet")
    finally:
        manager.stop()
        await asyncio.wait_for(running, 10)
        if await kube.get_or_none(INFERENCE_RELAYS, name) is not None:
            await kube.patch(INFERENCE_RELAYS, name, {"metadata": {"finalizers": None}})
            await kube.delete(INFERENCE_RELAYS, name)


def test_bad_artifact_settings_stop_the_start_naming_the_flag(kube: Kube) -> None:
    settings = _settings("ns", artifact=RelayArtifactConfig((), SHA_ARM64, SHA_AMD64))
    with pytest.raises(ConfigError, match="--relay-artifact-url"):
        wiring.register(new_manager(kube, settings), settings)


def test_the_real_drivers_without_a_token_store_stop_the_start_naming_the_flag(
    kube: Kube,
) -> None:
    """Rule: the VM token never goes into user data, so without a secret store to put it in
    the controller does not start."""
    fake = _settings("ns")
    settings = dataclasses.replace(
        fake, inference_relay=dataclasses.replace(fake.inference_relay, cloud="")
    )
    with pytest.raises(ConfigError, match="--relay-aws-instance-profile"):
        wiring.register(new_manager(kube, settings), settings)


def test_the_fake_cloud_serves_every_provider_and_real_mode_builds_the_sdk_drivers(
    kube: Kube,
) -> None:
    from controller.relay.drivers.aws import AwsDriver
    from controller.relay.drivers.fake import FakeCloud
    from controller.relay.drivers.oci import OciDriver
    from controller.relay.drivers.select import build_drivers

    fake = build_drivers("fake", kube, "ns")
    assert set(fake) == {"aws", "oci"} and all(isinstance(d, FakeCloud) for d in fake.values())
    store = RelayTokenStoreSettings("relay-vm", "/p", "ocid1.vault.oc1.x", "ocid1.key.oc1.x")
    real = build_drivers("", kube, "ns", store)
    aws, oci = real["aws"], real["oci"]
    assert isinstance(aws, AwsDriver) and isinstance(oci, OciDriver)
    assert (aws.instance_profile, aws.parameter_prefix) == ("relay-vm", "/p")
    assert (oci.vault, oci.key) == ("ocid1.vault.oc1.x", "ocid1.key.oc1.x")
    with pytest.raises(ConfigError, match="--relay-cloud"):
        build_drivers("gcp-sim", kube, "ns")


async def test_the_orphan_sweep_runs_only_on_the_leader(kube: Kube, namespace: str) -> None:
    await kube.create(
        LEASES,
        {
            "metadata": {"name": "wspin-controller", "namespace": namespace},
            "spec": {"holderIdentity": "someone-else", "leaseDurationSeconds": 3600},
        },
    )
    base = _settings(namespace)
    election = LeaderElectionSettings(
        enabled=True, namespace=namespace, identity="me",
        lease_duration=1.5, renew_deadline=1.0, retry_period=0.2,
    )  # fmt: skip
    settings = dataclasses.replace(
        base, runtime=dataclasses.replace(base.runtime, leader_election=election)
    )
    registry = CollectorRegistry()
    manager = new_manager(kube, settings, registry=registry)
    wiring.register(manager, settings)
    followers: list[int] = []

    async def on_every_replica() -> None:
        followers.append(1)

    manager.add_periodic("probe", 3600, on_every_replica, leader_only=False)

    def sweeps() -> float | None:
        value: float | None = registry.get_sample_value(
            "llmsafespaces_relay_orphan_sweeps_total", {"outcome": "completed"}
        )
        return value

    running = asyncio.create_task(manager.run())
    try:
        await eventually(lambda: bool(followers), "the manager to start")
        elector = manager.elector
        assert elector is not None
        await eventually(lambda: elector.observed_holder == "someone-else", "a read")
        assert not manager.is_leader and sweeps() is None
        lease = await kube.get(LEASES, "wspin-controller", namespace)
        lease["spec"]["holderIdentity"] = None
        await kube.replace(LEASES, lease)
        await eventually(lambda: sweeps() == 1, "the new leader's first sweep")
    finally:
        manager.stop()
        await asyncio.wait_for(running, 10)


async def test_the_cluster_id_is_the_kube_system_uid_unless_configured(kube: Kube) -> None:
    from controller.relay.identity import ClusterIdentity

    kube_system = await kube.get(NAMESPACES, "kube-system")
    assert await ClusterIdentity(kube).resolve() == kube_system["metadata"]["uid"]
    assert await ClusterIdentity(kube, "prod-eu-1").resolve() == "prod-eu-1"


@pytest.mark.parametrize("bad", ["-leading-dash", "has space", "x" * 64, "quote'd"])
def test_a_bad_cluster_id_stops_the_start_naming_the_flag(kube: Kube, bad: str) -> None:
    settings = dataclasses.replace(
        _settings("ns"),
        inference_relay=dataclasses.replace(_settings("ns").inference_relay, cluster_id=bad),
    )
    with pytest.raises(ConfigError, match="--relay-cluster-id") as raised:
        wiring.register(new_manager(kube, settings), settings)
    assert "controller.inferenceRelay.clusterID" in raised.value.fix
