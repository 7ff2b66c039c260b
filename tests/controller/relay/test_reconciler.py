"""The InferenceRelay reconciler against the API test server, fake clouds and fake router."""

from __future__ import annotations

import base64
import json
import logging
from collections.abc import Mapping, Sequence

import pytest

from controller.relay.drivers.base import (
    CloudInstance,
    ConfigurationError,
    QuotaExceeded,
    Throttled,
)
from controller.relay.spec import FINALIZER, PAUSED_ANNOTATION, ROTATE_ANNOTATION
from controller.relay.tokens import read_tokens, write_tokens
from controller.types import ObjectKey, Requeue
from tests.controller.relay.conftest import AWS_SLOT, CLUSTER, OCI_SLOT, SHA_ARM64, Fleet
from wspin.core.kinds import CONFIGMAPS, INFERENCE_RELAYS
from wspin.core.logs import JSONFormatter


async def test_a_missing_relay_is_not_an_error_and_is_not_requeued(fleet: Fleet) -> None:
    await fleet.reader.refresh()
    assert await fleet.reconciler.reconcile(ObjectKey("", "no-such-fleet")) is None


async def test_a_paused_fleet_is_requeued_later_and_nothing_is_launched(fleet: Fleet) -> None:
    await fleet.create(AWS_SLOT)
    await fleet.kube.patch(
        INFERENCE_RELAYS, fleet.name, {"metadata": {"annotations": {PAUSED_ANNOTATION: "true"}}}
    )
    result = await fleet.reconcile()
    assert isinstance(result, Requeue) and result.after > 0
    assert fleet.clouds["aws"].calls_of("launch") == []
    assert "instances" not in ((await fleet.get()).get("status") or {})


async def test_the_first_pass_adds_the_finalizer(fleet: Fleet) -> None:
    await fleet.create(AWS_SLOT)
    await fleet.reconcile()
    assert FINALIZER in (await fleet.get())["metadata"]["finalizers"]


async def test_a_missing_vm_is_launched_tagged_and_recorded_with_a_requeue(fleet: Fleet) -> None:
    await fleet.create(AWS_SLOT)
    result = await fleet.reconcile()
    assert isinstance(result, Requeue) and result.after == 10.0
    [call] = fleet.clouds["aws"].calls_of("launch")
    uid = await fleet.uid()
    assert call.args["tags"] == {
        "managed-by": "llmsafespaces-relay",
        "llmsafespaces-cluster": CLUSTER,
        "inferencerelay-uid": uid,
        "inferencerelay-provider": "aws",
        "inferencerelay-launch": call.args["client_token"],
        "inferencerelay-token-ref": f"fake-secret/{uid}/{call.args['client_token'][:32]}",
    }
    assert call.args["name"] == "relay-aws" and call.args["shape"] == "t4g.micro"
    [instance] = await fleet.instances()
    assert instance["provider"] == "aws" and instance["state"] == "provisioning"
    assert instance["id"] in fleet.clouds["aws"].live_ids()
    assert instance["healthy"] is False and instance["launchedAt"]
    await fleet.reconcile()  # the public IP is read from the cloud on the next pass
    [instance] = await fleet.instances()
    assert instance["publicIP"] == fleet.clouds["aws"].vm(instance["id"]).public_ip
    user_data = call.args["user_data_decoded"]
    assert SHA_ARM64 in user_data and "relay-proxy-arm64" in user_data


async def test_the_vm_token_is_stored_and_reaches_the_peers_configmap(fleet: Fleet) -> None:
    await fleet.create(AWS_SLOT)
    await fleet.reconcile()
    await fleet.reconcile()
    tokens = await read_tokens(fleet.kube, fleet.namespace)
    assert len(tokens["aws"]) == 64
    [call] = fleet.clouds["aws"].calls_of("launch")
    [instance] = await fleet.instances()
    assert fleet.clouds["aws"].token_of(instance["id"]) == tokens["aws"]
    assert tokens["aws"] not in call.args["user_data_decoded"]
    peers = await fleet.kube.get(CONFIGMAPS, "relay-router-peers", fleet.namespace)
    [peer] = json.loads(peers["data"]["peers.json"])["relays"]
    [instance] = await fleet.instances()
    assert peer == {
        "id": instance["id"],
        "endpoint": f"{instance['publicIP']}:8080",
        "provider": "aws",
        "state": "provisioning",
        "token": tokens["aws"],
    }


async def test_a_healthy_relay_makes_the_fleet_ready_and_not_degraded(fleet: Fleet) -> None:
    await fleet.create(AWS_SLOT)
    await fleet.reconcile()
    [instance] = await fleet.instances()
    fleet.report(instance["id"], healthy=True)
    result = await fleet.reconcile()
    [instance] = await fleet.instances()
    assert instance["state"] == "healthy" and instance["healthy"] is True
    assert (await fleet.get())["status"]["healthyReplicas"] == 1
    assert (await fleet.condition("Ready"))["status"] == "True"
    assert (await fleet.condition("Degraded"))["status"] == "False"
    assert result == Requeue(after=30.0)


async def test_scraped_traffic_is_copied_into_status(fleet: Fleet) -> None:
    await fleet.create(AWS_SLOT)
    await fleet.reconcile()
    [instance] = await fleet.instances()
    fleet.report(
        instance["id"],
        requests_by_status={"200": 9992, "429": 7},
        egress_bytes=123456789,
        active_streams=2,
    )
    await fleet.reconcile()
    [instance] = await fleet.instances()
    assert instance["429Count"] == 7
    assert instance["totalRequests"] == 9999
    assert instance["egressBytes"] == 123456789


async def test_one_unhealthy_relay_of_two_is_degraded_but_still_ready(fleet: Fleet) -> None:
    await fleet.create(AWS_SLOT, OCI_SLOT)
    await fleet.reconcile()
    aws_vm, oci_vm = await fleet.instances()
    fleet.report(aws_vm["id"], healthy=True)
    fleet.report(oci_vm["id"], healthy=True)
    await fleet.reconcile()
    fleet.report(oci_vm["id"], healthy=False)
    await fleet.reconcile()
    states = {i["provider"]: i["state"] for i in await fleet.instances()}
    assert states == {"aws": "healthy", "oci": "unhealthy"}
    degraded = await fleet.condition("Degraded")
    assert degraded["status"] == "True" and "oci unhealthy" in degraded["message"]
    ready = await fleet.condition("Ready")
    assert ready["status"] == "True" and ready["message"] == "1/2 relays healthy"


async def test_a_configuration_error_leaves_a_failed_placeholder_with_one_attempt(
    fleet: Fleet,
) -> None:
    fleet.clouds["aws"].inject("launch", ConfigurationError("bad AMI"))
    await fleet.create(AWS_SLOT)
    assert await fleet.reconcile() is not None
    [instance] = await fleet.instances()
    assert instance["state"] == "provisioning-failed"
    assert instance["id"] == "aws-provisioning"
    assert instance["provisioningAttempts"] == 1
    assert "provider configuration error" in instance["lastProvisionError"]
    assert "bad AMI" in instance["lastProvisionError"]


async def test_a_provider_without_a_driver_fails_its_slot_without_an_error(fleet: Fleet) -> None:
    # The CRD offers only providers with a driver; a controller started without one of them
    # (a fleet built before the driver existed) still fails the slot, not the reconcile.
    fleet.deps.drivers = {"aws": fleet.clouds["aws"]}
    await fleet.create(OCI_SLOT)
    await fleet.reconcile()
    [instance] = await fleet.instances()
    assert instance["state"] == "provisioning-failed"
    assert "no driver for provider oci" in instance["lastProvisionError"]


async def test_a_missing_artifact_sha_fails_the_slot_visibly(
    fleet: Fleet,
) -> None:
    from dataclasses import replace

    fleet.deps.artifacts = replace(fleet.deps.artifacts, sha256_arm64="")
    await fleet.create(AWS_SLOT)
    await fleet.reconcile()
    [instance] = await fleet.instances()
    assert instance["state"] == "provisioning-failed"
    assert "artifact SHA-256" in instance["lastProvisionError"]
    assert fleet.clouds["aws"].calls_of("launch") == []


async def test_a_credentials_ref_the_driver_does_not_read_is_a_configuration_error(
    fleet: Fleet,
) -> None:
    await fleet.create(AWS_SLOT | {"credentialsRef": {"name": "my-aws"}})
    await fleet.reconcile()
    [instance] = await fleet.instances()
    assert instance["state"] == "provisioning-failed"
    assert "'my-aws'" in instance["lastProvisionError"]
    assert "aws-relay-irwa" in instance["lastProvisionError"]
    # Found before any cloud call: no token is stored for a VM that never launches.
    assert fleet.clouds["aws"].calls_of("store_token") == [] and fleet.clouds["aws"].tokens == {}


async def test_an_unknown_shape_is_an_error_not_a_guess(fleet: Fleet) -> None:
    await fleet.create(AWS_SLOT | {"shape": "zz9.plural"})
    await fleet.reconcile()
    [instance] = await fleet.instances()
    assert instance["state"] == "provisioning-failed"
    assert "zz9.plural" in instance["lastProvisionError"]
    assert fleet.clouds["aws"].tokens == {}


async def test_an_amd64_shape_gets_the_amd64_binary_and_pin(fleet: Fleet) -> None:
    await fleet.create(OCI_SLOT | {"shape": "VM.Standard.E2.1.Micro"})
    await fleet.reconcile()
    [call] = fleet.clouds["oci"].calls_of("launch")
    assert "relay-proxy-amd64" in call.args["user_data_decoded"]
    assert "b" * 64 in call.args["user_data_decoded"]


async def test_a_secret_store_that_fails_holds_the_launch_back_and_the_retry_stores_again(
    fleet: Fleet,
) -> None:
    """A VM never launches without its token stored where it reads it at boot."""
    aws = fleet.clouds["aws"]
    aws.inject("store_token", Throttled("secret store throttled"))
    await fleet.create(AWS_SLOT)
    await fleet.reconcile()
    [instance] = await fleet.instances()
    assert aws.calls_of("launch") == [] and instance["state"] == "provisioning"
    assert "secret store throttled" in instance["lastProvisionError"]
    fleet.clock.advance(31)
    await fleet.reconcile()
    assert len(aws.calls_of("launch")) == 1
    [instance] = await fleet.instances()
    token = (await read_tokens(fleet.kube, fleet.namespace))["aws"]
    assert aws.token_of(instance["id"]) == token


async def test_a_capacity_error_leaves_no_failed_entry_and_backs_off(fleet: Fleet) -> None:
    fleet.clouds["aws"].inject("launch", QuotaExceeded("no capacity"))
    await fleet.create(AWS_SLOT)
    result = await fleet.reconcile()
    [instance] = await fleet.instances()
    assert instance["state"] == "provisioning"
    assert "no capacity" in instance["lastProvisionError"]
    assert isinstance(result, Requeue) and result.after == 10.0
    await fleet.reconcile()  # still inside the 30 s backoff: no second launch
    assert len(fleet.clouds["aws"].calls_of("launch")) == 1
    fleet.clock.advance(31)
    await fleet.reconcile()
    assert len(fleet.clouds["aws"].calls_of("launch")) == 2
    [instance] = await fleet.instances()
    assert instance["id"] in fleet.clouds["aws"].live_ids()


async def test_configuration_errors_back_off_trip_the_breaker_and_a_spec_change_clears_it(
    fleet: Fleet,
) -> None:
    aws = fleet.clouds["aws"]
    aws.inject("launch", ConfigurationError("bad AMI"), times=3)
    await fleet.create(AWS_SLOT)
    await fleet.reconcile()
    await fleet.reconcile()  # backoff not over: no attempt
    assert len(aws.calls_of("launch")) == 1
    for expected in (2, 3):
        fleet.clock.advance(600)
        await fleet.reconcile()
        [instance] = await fleet.instances()
        assert instance["provisioningAttempts"] == expected
    breaker = await fleet.condition("ProvisioningFailed")
    assert breaker["status"] == "True" and breaker["reason"] == "CircuitBreakerTripped"
    assert "aws failed 3 times" in breaker["message"]
    fleet.clock.advance(3600)
    await fleet.reconcile()
    assert len(aws.calls_of("launch")) == 3  # tripped: no more launches
    await fleet.kube.patch(
        INFERENCE_RELAYS, fleet.name, {"spec": {"upstreamURL": "https://b.example/v1"}}
    )
    await fleet.reconcile()
    assert len(aws.calls_of("launch")) == 4
    [instance] = await fleet.instances()
    assert instance["state"] == "provisioning" and instance["id"] in aws.live_ids()
    assert (await fleet.condition("ProvisioningFailed"))["status"] == "False"


async def test_a_vm_of_a_provider_removed_from_the_spec_is_destroyed(fleet: Fleet) -> None:
    await fleet.create(AWS_SLOT, OCI_SLOT)
    await fleet.reconcile()
    oci_vm = next(i for i in await fleet.instances() if i["provider"] == "oci")
    await fleet.kube.patch(INFERENCE_RELAYS, fleet.name, {"spec": {"providers": [AWS_SLOT]}})
    await fleet.reconcile()
    [destroy] = fleet.clouds["oci"].calls_of("destroy")
    assert destroy.args == {"instance_id": oci_vm["id"], "region": "us-ashburn-1"}
    assert [i["provider"] for i in await fleet.instances()] == ["aws"]


async def test_a_placeholder_of_a_removed_provider_never_reaches_destroy(fleet: Fleet) -> None:
    fleet.clouds["oci"].inject("launch", ConfigurationError("no image"))
    await fleet.create(AWS_SLOT, OCI_SLOT)
    await fleet.reconcile()
    await fleet.kube.patch(INFERENCE_RELAYS, fleet.name, {"spec": {"providers": [AWS_SLOT]}})
    await fleet.reconcile()
    assert fleet.clouds["oci"].calls_of("destroy") == []
    assert [i["provider"] for i in await fleet.instances()] == ["aws"]


async def test_two_entries_for_one_provider_are_rejected_with_a_condition(fleet: Fleet) -> None:
    await fleet.create(AWS_SLOT, AWS_SLOT | {"region": "eu-west-1"})
    assert await fleet.reconcile() is None
    ready = await fleet.condition("Ready")
    assert ready["status"] == "False" and ready["reason"] == "InvalidSpec"
    assert "'aws' twice" in ready["message"]
    assert fleet.clouds["aws"].calls_of("launch") == []


async def test_a_vm_never_healthy_within_the_replacement_timeout_is_replaced_with_a_new_token(
    fleet: Fleet,
) -> None:
    await fleet.create(AWS_SLOT, healthCheck={"replacementTimeout": "10m"})
    await fleet.reconcile()
    [first] = await fleet.instances()
    token_before = (await read_tokens(fleet.kube, fleet.namespace))["aws"]
    fleet.report(first["id"], healthy=False)
    fleet.clock.advance(9 * 60)
    await fleet.reconcile()
    assert [i["id"] for i in await fleet.instances()] == [first["id"]]
    fleet.clock.advance(61)
    await fleet.reconcile()
    [second] = await fleet.instances()
    assert second["id"] != first["id"]
    assert fleet.clouds["aws"].live_ids() == {second["id"]}
    assert (await read_tokens(fleet.kube, fleet.namespace))["aws"] != token_before


async def test_a_vm_terminated_outside_the_controller_is_replaced(fleet: Fleet) -> None:
    await fleet.create(AWS_SLOT)
    await fleet.reconcile()
    [first] = await fleet.instances()
    fleet.report(first["id"], healthy=True)
    await fleet.reconcile()
    fleet.clouds["aws"].vm(first["id"]).terminated_at = fleet.clock()
    await fleet.reconcile()
    [second] = await fleet.instances()
    assert second["id"] != first["id"] and second["id"] in fleet.clouds["aws"].live_ids()


async def test_a_slow_boot_never_blocks_a_pass_and_is_followed_through_status(
    fleet: Fleet,
) -> None:
    aws = fleet.clouds["aws"]
    aws.boot_seconds = 120
    await fleet.create(AWS_SLOT)
    assert await fleet.reconcile() == Requeue(after=10.0)
    [booting] = await fleet.instances()
    assert booting["state"] == "provisioning" and booting["publicIP"] == ""
    fleet.clock.advance(60)
    assert await fleet.reconcile() == Requeue(after=10.0)
    assert (await fleet.instances())[0]["publicIP"] == ""
    fleet.clock.advance(60)
    await fleet.reconcile()
    [running] = await fleet.instances()
    assert running["id"] == booting["id"] and running["publicIP"]
    assert len(aws.calls_of("launch")) == 1


async def test_a_pass_that_changes_nothing_writes_nothing(fleet: Fleet) -> None:
    await fleet.create(AWS_SLOT)
    await fleet.reconcile()
    [instance] = await fleet.instances()
    fleet.report(instance["id"])
    await fleet.reconcile()
    version = (await fleet.get())["metadata"]["resourceVersion"]
    await fleet.reconcile()
    assert (await fleet.get())["metadata"]["resourceVersion"] == version


async def test_the_cloud_init_carries_no_token_only_where_the_cloud_stored_it(
    fleet: Fleet,
) -> None:
    await fleet.create(AWS_SLOT)
    await fleet.reconcile()
    token = (await read_tokens(fleet.kube, fleet.namespace))["aws"]
    [call] = fleet.clouds["aws"].calls_of("launch")
    decoded = base64.b64decode(call.args["user_data"]).decode()
    assert token not in decoded
    [store] = fleet.clouds["aws"].calls_of("store_token")
    assert store.args["launch"] == call.args["client_token"]
    assert call.args["tags"]["inferencerelay-token-ref"] in decoded
    assert call.args["client_token"] and token not in call.args["client_token"]


async def test_no_vm_token_reaches_a_log_line_through_a_whole_lifecycle(
    fleet: Fleet, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    fleet.clouds["oci"].inject("launch", QuotaExceeded("no capacity"))
    await fleet.create(AWS_SLOT, OCI_SLOT)
    await fleet.reconcile()
    fleet.clock.advance(60)
    await fleet.reconcile()
    tokens = set((await read_tokens(fleet.kube, fleet.namespace)).values())
    [aws_vm, _] = await fleet.instances()
    await fleet.kube.patch(
        INFERENCE_RELAYS,
        fleet.name,
        {"metadata": {"annotations": {ROTATE_ANNOTATION: aws_vm["id"]}}},
    )
    await fleet.reconcile()
    await fleet.reconcile()
    tokens |= set((await read_tokens(fleet.kube, fleet.namespace)).values())
    await fleet.kube.delete(INFERENCE_RELAYS, fleet.name)
    await fleet.reconcile()
    assert len(tokens) == 3  # two VMs, then a fresh token for the rotated one
    formatter = JSONFormatter()
    rendered = "\n".join(formatter.format(record) for record in caplog.records)
    assert "relay VM launched" in rendered
    for token in tokens:
        assert token not in rendered


async def test_a_launch_is_timed_in_the_provision_duration_histogram(fleet: Fleet) -> None:
    fleet.clouds["aws"].boot_seconds = 40
    await fleet.create(AWS_SLOT)
    await fleet.reconcile()
    fleet.clock.advance(45)
    await fleet.reconcile()
    await fleet.reconcile()  # timed once, when the IP first shows
    registry = fleet.deps.metrics.registry
    labels = {"provider": "aws"}
    assert (
        registry.get_sample_value("llmsafespaces_relay_provision_duration_seconds_count", labels)
        == 1
    )
    elapsed = registry.get_sample_value(
        "llmsafespaces_relay_provision_duration_seconds_sum", labels
    )
    assert elapsed == 45


async def test_an_adopted_old_vm_gets_the_whole_replacement_timeout_from_its_adoption(
    fleet: Fleet,
) -> None:
    """Launched an hour ago, but the router has never been told about it: not overdue yet."""
    cr = await fleet.create(AWS_SLOT, healthCheck={"replacementTimeout": "10m"})
    aws = fleet.clouds["aws"]
    old = aws.seed("us-east-1", owner_uid=cr["metadata"]["uid"], provider="aws", age_seconds=3600)
    await fleet.reconcile()
    assert [i["id"] for i in await fleet.instances()] == [old]
    assert aws.calls_of("destroy") == [] and old in aws.live_ids()
    fleet.clock.advance(9 * 60)
    await fleet.reconcile()
    assert aws.calls_of("destroy") == []
    fleet.clock.advance(61)
    await fleet.reconcile()
    assert [c.args["instance_id"] for c in aws.calls_of("destroy")] == [old]


async def test_a_vm_that_vanished_from_the_cloud_listing_is_replaced(fleet: Fleet) -> None:
    """Terminated outside the controller long ago: the cloud no longer lists it at all."""
    await fleet.create(AWS_SLOT)
    await fleet.reconcile()
    [first] = await fleet.instances()
    fleet.report(first["id"], healthy=True)
    await fleet.reconcile()
    aws = fleet.clouds["aws"]
    aws.vm(first["id"]).terminated_at = fleet.clock()
    fleet.clock.advance(aws.terminated_retention_seconds + 1)
    assert first["id"] not in {vm.instance_id for vm in await aws.list({}, ["us-east-1"])}
    await fleet.reconcile()
    [second] = await fleet.instances()
    assert second["id"] != first["id"] and second["id"] in aws.live_ids()


async def test_a_vm_missing_from_a_listing_but_still_running_is_kept(fleet: Fleet) -> None:
    """A listing that lags (or pages wrongly) is checked against the VM itself first."""
    await fleet.create(AWS_SLOT)
    await fleet.reconcile()
    [first] = await fleet.instances()
    fleet.report(first["id"], healthy=True)
    aws = fleet.clouds["aws"]
    real_list = aws.list

    async def list_without_it(
        tags: Mapping[str, str], regions: Sequence[str]
    ) -> list[CloudInstance]:
        return [vm for vm in await real_list(tags, regions) if vm.instance_id != first["id"]]

    aws.list = list_without_it  # type: ignore[method-assign]
    await fleet.reconcile()
    assert [i["id"] for i in await fleet.instances()] == [first["id"]]
    assert aws.calls_of("destroy") == [] and len(aws.calls_of("launch")) == 1


async def test_a_launch_reuses_the_token_already_stored_for_its_provider(fleet: Fleet) -> None:
    """A token stored by an earlier process (a launch that failed, a restart) is kept."""
    stored = "c0ffee" * 10 + "abcd"
    await write_tokens(fleet.kube, fleet.namespace, {"aws": stored})
    await fleet.create(AWS_SLOT)
    await fleet.reconcile()
    [call] = fleet.clouds["aws"].calls_of("launch")
    [instance] = await fleet.instances()
    assert fleet.clouds["aws"].token_of(instance["id"]) == stored
    assert stored not in call.args["user_data_decoded"]
    assert (await read_tokens(fleet.kube, fleet.namespace)) == {"aws": stored}


async def test_a_region_change_keeps_the_running_vm_and_launches_nothing(fleet: Fleet) -> None:
    """Slots match by provider: the VM in the old region is still the slot's, and it is
    looked up where it runs, never declared gone (and leaked) from the new region."""
    await fleet.create(AWS_SLOT)
    await fleet.reconcile()
    [first] = await fleet.instances()
    fleet.report(first["id"], healthy=True)
    await fleet.kube.patch(
        INFERENCE_RELAYS, fleet.name, {"spec": {"providers": [AWS_SLOT | {"region": "eu-west-1"}]}}
    )
    await fleet.reconcile()
    [kept] = await fleet.instances()
    aws = fleet.clouds["aws"]
    assert kept["id"] == first["id"] and kept["region"] == "us-east-1"
    assert aws.live_ids() == {first["id"]} and len(aws.calls_of("launch")) == 1


async def test_a_vm_that_dies_before_serving_backs_off_before_the_next_launch(
    fleet: Fleet,
) -> None:
    """A boot that keeps failing (bad image, no capacity behind the API's back) must not
    launch a VM every pass: each death doubles the wait, and a VM that serves resets it."""
    aws = fleet.clouds["aws"]
    aws.boot_seconds = 30
    await fleet.create(AWS_SLOT)
    await fleet.reconcile()
    for expected, wait in ((1, 30), (2, 60)):
        [booting] = await fleet.instances()
        aws.vm(booting["id"]).terminated_at = fleet.clock()
        await fleet.reconcile()
        [waiting] = await fleet.instances()
        assert waiting["id"] == "aws-provisioning" and waiting["launchFailures"] == expected
        assert "stopped before it became healthy" in waiting["lastProvisionError"]
        fleet.clock.advance(wait - 1)
        await fleet.reconcile()
        assert len(aws.calls_of("launch")) == expected
        fleet.clock.advance(1)
        await fleet.reconcile()
        assert len(aws.calls_of("launch")) == expected + 1
    [third] = await fleet.instances()
    assert third["launchFailures"] == 2
    fleet.clock.advance(30)
    fleet.report(third["id"], healthy=True)
    await fleet.reconcile()
    [serving] = await fleet.instances()
    assert serving["state"] == "healthy" and "launchFailures" not in serving


async def test_a_removed_providers_vm_whose_destroy_fails_stays_in_status_until_destroyed(
    fleet: Fleet,
) -> None:
    await fleet.create(AWS_SLOT, OCI_SLOT)
    await fleet.reconcile()
    oci_vm = next(i for i in await fleet.instances() if i["provider"] == "oci")
    oci = fleet.clouds["oci"]
    oci.inject("destroy", Throttled("throttled"))
    await fleet.kube.patch(INFERENCE_RELAYS, fleet.name, {"spec": {"providers": [AWS_SLOT]}})
    await fleet.reconcile()
    assert oci_vm["id"] in [i["id"] for i in await fleet.instances()]
    await fleet.reconcile()
    assert [i["provider"] for i in await fleet.instances()] == ["aws"]
    assert oci.live_ids() == set() and len(oci.calls_of("destroy")) == 2
