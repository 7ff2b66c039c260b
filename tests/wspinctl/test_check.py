"""``wspin check`` against a whole installation: intact it passes; each broken piece fails its
own check, with its fix, and nothing else."""

from __future__ import annotations

import asyncio
import base64
import datetime
import json
from pathlib import Path

import pytest

from certs.build import new_ca
from tests.kubeapi import KubeServer
from tests.wspinctl.installation import NAMES, Installed, hold_leader_lease, mark_ready
from wspin.core.kinds import (
    CUSTOM_RESOURCE_DEFINITIONS,
    LEASES,
    MUTATING_WEBHOOKS,
    VALIDATING_WEBHOOKS,
    Resource,
)
from wspin.kube.client import Kube
from wspinctl import cli
from wspinctl.check import Result, bundle_problem, lease_problem, run_checks
from wspinctl.install import LEADER_LEASE


async def check(kube: Kube, installed: Installed) -> dict[str, Result]:
    results = await run_checks(
        kube,
        installed.install,
        probe_namespace=installed.probe_namespace,
        now=datetime.datetime.now(datetime.UTC),
    )
    return {result.name: result for result in results}


def failed(results: dict[str, Result]) -> dict[str, Result]:
    return {name: result for name, result in results.items() if not result.ok}


async def test_an_intact_installation_passes_every_check(kube: Kube, installed: Installed) -> None:
    results = await check(kube, installed)
    assert list(results) == NAMES
    assert failed(results) == {}
    assert "workspaces.llmsafespaces.dev" in results["crds"].detail
    assert "agentd sha256:" in results["dry-run-injection"].detail
    assert "calls allowed" in results["rbac-controller"].detail


async def test_the_console_script_prints_json_and_exits_0_when_all_pass(
    installed: Installed, kubeconfig: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["check", "--kubeconfig", str(kubeconfig), "-o", "json"]
    argv += ["--namespace", installed.install.namespace, "--release", installed.install.release]
    argv += ["--probe-namespace", installed.probe_namespace]
    assert await asyncio.to_thread(cli.main, argv) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["ok"] is True
    assert [c["name"] for c in report["checks"]] == NAMES
    assert all(c["ok"] and c["fix"] == "" for c in report["checks"])


@pytest.mark.usefixtures("breaks_installation")
async def test_the_text_output_marks_each_check_and_prints_the_fix_under_a_failure(
    kube: Kube, installed: Installed, kubeconfig: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ns = installed.install.namespace
    await kube.delete(LEASES, LEADER_LEASE, ns)
    argv = ["check", "--kubeconfig", str(kubeconfig)]
    if ns != "wspin":  # the defaults name the release every other installation has
        argv += ["--namespace", ns, "--probe-namespace", installed.probe_namespace]
    assert await asyncio.to_thread(cli.main, argv) == 1
    out = capsys.readouterr().out.splitlines()
    leader = next(i for i, line in enumerate(out) if "controller-leader" in line)
    assert out[leader].startswith("✗ controller-leader")
    assert "no replica has ever led" in out[leader]
    assert f"fix: kubectl -n {ns} logs deploy/wspin-controller" in out[leader + 1]
    assert sum(line.startswith("✓ ") for line in out) == len(NAMES) - 1
    assert out[-1] == f"1 of {len(NAMES)} checks failed"


@pytest.mark.test_server_only(
    "it deletes a CRD, and on a real server with it every other test's objects of that kind"
)
async def test_a_missing_crd_fails_only_the_crd_check_naming_it(
    kube: Kube, installed: Installed, kube_server: KubeServer
) -> None:
    await kube.delete(CUSTOM_RESOURCE_DEFINITIONS, "inferencerelays.llmsafespaces.dev")
    broken = failed(await check(kube, installed))
    assert list(broken) == ["crds"]
    assert "inferencerelays.llmsafespaces.dev not installed" in broken["crds"].detail
    assert "kubectl apply --server-side -f charts/wspin/crds/" in broken["crds"].fix


@pytest.mark.test_server_only("a real one's CRD controllers set Established back at once")
async def test_a_crd_that_is_not_established_fails_the_crd_check(
    kube: Kube, installed: Installed, kube_server: KubeServer
) -> None:
    name = "workspaces.llmsafespaces.dev"
    crd = await kube.get(CUSTOM_RESOURCE_DEFINITIONS, name)
    crd["status"]["conditions"] = [
        {"type": "Established", "status": "False", "reason": "Installing", "message": "not yet"}
    ]
    await kube.replace(CUSTOM_RESOURCE_DEFINITIONS, crd, sub="status")
    broken = failed(await check(kube, installed))
    assert list(broken) == ["crds"]
    assert f"{name} not Established: not yet" in broken["crds"].detail


async def _set_ca_bundle(kube: Kube, res: Resource, name: str, pem: bytes) -> None:
    config = await kube.get(res, name)
    for webhook in config["webhooks"]:
        webhook["clientConfig"]["caBundle"] = base64.b64encode(pem).decode()
    await kube.replace(res, config)


@pytest.mark.usefixtures("breaks_installation")
async def test_a_stale_ca_bundle_fails_the_bundle_check_and_the_dry_run_with_their_fixes(
    kube: Kube, installed: Installed
) -> None:
    other_ca = new_ca(datetime.datetime.now(datetime.UTC)).cert_pem
    await _set_ca_bundle(kube, MUTATING_WEBHOOKS, installed.install.mutating_webhook, other_ca)
    broken = failed(await check(kube, installed))
    assert list(broken) == ["ca-bundle", "dry-run-injection"]
    assert "is not signed by any CA in the caBundle" in broken["ca-bundle"].detail
    assert broken["ca-bundle"].fix.startswith(
        f"kubectl -n {installed.install.namespace} rollout restart deployment/wspin-webhook"
    )
    # The API server really refuses the call: it verifies TLS against the stale bundle.
    assert "failed calling webhook" in broken["dry-run-injection"].detail
    assert "see webhook-ready and ca-bundle" in broken["dry-run-injection"].fix


@pytest.mark.usefixtures("breaks_installation")
async def test_a_missing_webhook_configuration_fails_its_own_check(
    kube: Kube, installed: Installed
) -> None:
    await kube.delete(VALIDATING_WEBHOOKS, installed.install.validating_webhook)
    broken = failed(await check(kube, installed))
    assert list(broken) == ["validating-webhook"]
    assert broken["validating-webhook"].detail == "missing"
    ns = installed.install.namespace
    assert f"helm upgrade wspin charts/wspin -n {ns} --reuse-values" in (
        broken["validating-webhook"].fix
    )


@pytest.mark.usefixtures("breaks_installation")
async def test_an_unready_webhook_fails_the_readiness_check_with_where_to_look(
    kube: Kube, installed: Installed
) -> None:
    await mark_ready(kube, installed.install, installed.install.webhook, ready=0)
    broken = failed(await check(kube, installed))
    assert list(broken) == ["webhook-ready"]
    assert broken["webhook-ready"].detail == "0/2 replicas ready, 2/2 updated"
    ns = installed.install.namespace
    assert f"kubectl -n {ns} logs deploy/wspin-webhook" in broken["webhook-ready"].fix


@pytest.mark.usefixtures("breaks_installation")
async def test_an_expired_leader_lease_fails_the_leader_check(
    kube: Kube, installed: Installed
) -> None:
    await hold_leader_lease(kube, installed.install, renewed_ago=120)
    broken = failed(await check(kube, installed))
    assert list(broken) == ["controller-leader"]
    assert "expired: held by wspin-controller-7d9f_1a2b3c4d" in broken["controller-leader"].detail


@pytest.mark.image_volume_gate
async def test_the_image_volume_probe_and_the_dry_run_find_the_gate_as_the_api_server_has_it(
    kube: Kube, installed: Installed, image_volume_gate: bool
) -> None:
    results = await check(kube, installed)
    probe, dry_run = results["image-volumes"], results["dry-run-injection"]
    assert (probe.ok, dry_run.ok) == (image_volume_gate, image_volume_gate)
    if not image_volume_gate:
        assert "--feature-gates=ImageVolume=true" in probe.fix
        assert "no agentd image volume: the API server dropped it" in dry_run.detail


async def test_with_the_image_volume_gate_off_the_probe_and_the_dry_run_say_so(
    kube: Kube, installed: Installed, kube_server: KubeServer
) -> None:
    kube_server.image_volume_gate = False
    broken = failed(await check(kube, installed))
    assert list(broken) == ["image-volumes", "dry-run-injection"]
    assert "--feature-gates=ImageVolume=true" in broken["image-volumes"].fix
    assert "no agentd image volume: the API server dropped it" in (
        broken["dry-run-injection"].detail
    )


async def test_a_probe_namespace_the_webhook_excludes_says_which_flag_to_pass(
    kube: Kube, installed: Installed
) -> None:
    installed.probe_namespace = installed.install.namespace  # never injected
    broken = failed(await check(kube, installed))
    assert list(broken) == ["dry-run-injection"]
    assert "the webhook was not called" in broken["dry-run-injection"].detail
    assert broken["dry-run-injection"].fix.startswith("pass --probe-namespace")


@pytest.mark.usefixtures("breaks_installation")
async def test_a_removed_binding_fails_that_service_accounts_rbac_check_listing_the_calls(
    kube: Kube, installed: Installed
) -> None:
    bindings = Resource("rbac.authorization.k8s.io", "v1", "clusterrolebindings", namespaced=False)
    await kube.delete(bindings, f"{installed.install.controller}-{installed.install.namespace}")
    broken = failed(await check(kube, installed))
    assert list(broken) == ["rbac-controller"]
    detail = broken["rbac-controller"].detail
    assert "list workspaces (cluster-wide)" in detail and "create pods (cluster-wide)" in detail
    assert "get leases wspin-controller" not in detail  # the Role binding is intact


# -- pure parts -----------------------------------------------------------------------------


def test_a_lease_renewed_within_its_duration_is_held() -> None:
    now = datetime.datetime(2026, 12, 1, 10, 0, 10, tzinfo=datetime.UTC)
    lease = {"spec": {"holderIdentity": "a", "leaseDurationSeconds": 15,
                      "renewTime": "2026-12-01T10:00:00.000000Z"}}  # fmt: skip
    assert lease_problem(lease, now) == (None, "held by a, renewed 10s ago (lease 15s)")
    later = now + datetime.timedelta(seconds=10)
    assert (lease_problem(lease, later)[0] or "").startswith("expired: held by a")
    assert lease_problem({"spec": {}}, now)[0] == (
        "no holder: the last leader released the Lease and none took over"
    )


def test_a_bundle_verifies_only_a_leaf_it_signed_for_the_service_name() -> None:
    from certs.build import issue_serving, service_dns_names

    now = datetime.datetime.now(datetime.UTC)
    ca = new_ca(now)
    leaf = issue_serving(ca, service_dns_names("wspin-webhook", "wspin"), now).cert_pem
    assert bundle_problem(ca.cert_pem, leaf, "wspin-webhook.wspin.svc", now) is None
    assert "does not name other.wspin.svc" in (
        bundle_problem(ca.cert_pem, leaf, "other.wspin.svc", now) or ""
    )
    assert "not valid now" in (
        bundle_problem(ca.cert_pem, leaf, "wspin-webhook.wspin.svc", now.replace(year=2040)) or ""
    )
    assert "caBundle" in (bundle_problem(b"", leaf, "wspin-webhook.wspin.svc", now) or "")
