"""caBundle patching: every entry of both configurations, idempotent, conflict-safe."""

from __future__ import annotations

import base64

import pytest

from certs.build import issue_serving, new_ca
from certs.cabundle import patch_ca_bundle, targets, trusts, with_ca_bundle
from tests.certs.conftest import NOW, Webhooks
from tests.kubeapi import KubeServer
from wspin.core.errors import NotFound
from wspin.core.kinds import MUTATING_WEBHOOKS, VALIDATING_WEBHOOKS
from wspin.core.objects import Obj
from wspin.kube.client import Kube


def _entry(name: str, bundle: str | None = None) -> Obj:
    client: Obj = {"service": {"name": "wspin-webhook", "namespace": "ns", "path": "/x"}}
    if bundle is not None:
        client["caBundle"] = bundle
    return {
        "name": name,
        "clientConfig": client,
        "admissionReviewVersions": ["v1"],
        "sideEffects": "None",
    }


def _configuration(name: str, entries: int) -> Obj:
    return {
        "metadata": {"name": name},
        "webhooks": [_entry(f"e{i}.llmsafespaces.dev") for i in range(entries)],
    }


def _bundles(config: Obj) -> list[bytes]:
    return [base64.b64decode(w["clientConfig"]["caBundle"]) for w in config["webhooks"]]


def test_every_entry_gets_the_bundle() -> None:
    bundle = new_ca(NOW).cert_pem
    config = _configuration("m", 3)
    config["webhooks"][1] = _entry("stale", base64.b64encode(b"old").decode())
    patched = with_ca_bundle(config, bundle)
    assert patched is not None
    assert _bundles(patched) == [bundle, bundle, bundle]
    assert "caBundle" not in config["webhooks"][0]["clientConfig"]  # the input is untouched


def test_a_configuration_already_carrying_the_bundle_needs_no_write() -> None:
    bundle = new_ca(NOW).cert_pem
    patched = with_ca_bundle(_configuration("m", 2), bundle)
    assert patched is not None
    assert with_ca_bundle(patched, bundle) is None


def test_filling_touches_only_entries_without_a_bundle() -> None:
    bundle, other = new_ca(NOW).cert_pem, new_ca(NOW).cert_pem
    config = _configuration("m", 3)
    config["webhooks"][1] = _entry("chosen", base64.b64encode(other).decode())
    config["webhooks"][2] = _entry("emptied", "")
    filled = with_ca_bundle(config, bundle, fill_only=True)
    assert filled is not None
    assert _bundles(filled) == [bundle, other, bundle]
    assert with_ca_bundle(filled, bundle, fill_only=True) is None


def test_a_configuration_trusts_a_leaf_when_every_entry_carries_its_issuer() -> None:
    old, new = new_ca(NOW), new_ca(NOW)
    leaf = issue_serving(new, ["hook"], NOW).cert
    config = _configuration("m", 2)
    assert not trusts(config, leaf)  # no bundle: the API server would use no CA of ours
    both = base64.b64encode(old.cert_pem + new.cert_pem).decode()
    config["webhooks"] = [_entry("a", both), _entry("b", base64.b64encode(old.cert_pem).decode())]
    assert not trusts(config, leaf)  # one entry still carries the old CA alone
    config["webhooks"][1] = _entry("b", both)
    assert trusts(config, leaf)
    config["webhooks"][1] = _entry("b", base64.b64encode(b"not PEM").decode())
    assert not trusts(config, leaf)


async def test_both_configurations_are_patched_once(kube: Kube, webhooks: Webhooks) -> None:
    bundle = new_ca(NOW).cert_pem
    both = targets(webhooks.mutating, webhooks.validating)
    assert await patch_ca_bundle(kube, bundle, both) == [webhooks.mutating, webhooks.validating]
    mutating = await kube.get(MUTATING_WEBHOOKS, webhooks.mutating)
    validating = await kube.get(VALIDATING_WEBHOOKS, webhooks.validating)
    assert _bundles(mutating) == [bundle, bundle]
    assert _bundles(validating) == [bundle]
    assert await patch_ca_bundle(kube, bundle, both) == []
    again = await kube.get(MUTATING_WEBHOOKS, webhooks.mutating)
    assert again["metadata"]["resourceVersion"] == mutating["metadata"]["resourceVersion"]


async def test_a_new_bundle_replaces_the_old_one(kube: Kube, webhooks: Webhooks) -> None:
    first, second = new_ca(NOW).cert_pem, new_ca(NOW).cert_pem
    only = targets(webhooks.mutating, None)
    await patch_ca_bundle(kube, first, only)
    assert await patch_ca_bundle(kube, first + second, only) == [webhooks.mutating]
    assert _bundles(await kube.get(MUTATING_WEBHOOKS, webhooks.mutating)) == [first + second] * 2


async def test_a_concurrent_change_is_reread_and_patched(
    kube: Kube, kube_server: KubeServer, webhooks: Webhooks
) -> None:
    bundle = new_ca(NOW).cert_pem
    kube_server.fail_next(409, method="PUT", path="/apis/admissionregistration.k8s.io", count=2)
    written = await patch_ca_bundle(kube, bundle, targets(webhooks.mutating, None))
    assert written == [webhooks.mutating]
    assert _bundles(await kube.get(MUTATING_WEBHOOKS, webhooks.mutating)) == [bundle] * 2


async def test_a_missing_configuration_is_not_found(kube: Kube) -> None:
    with pytest.raises(NotFound, match="no-such-hook"):
        await patch_ca_bundle(kube, new_ca(NOW).cert_pem, targets("no-such-hook", None))
