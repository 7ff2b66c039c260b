"""The certificates' Secret: what is stored, how damage is reported, conditional writes."""

from __future__ import annotations

import base64
import datetime

import pytest

from certs.build import issue_serving, new_ca
from certs.store import (
    BUNDLE,
    CA_KEY,
    PUBLISHED_AT,
    PUBLISHED_SHA,
    SecretStore,
    Stored,
    decode,
    encode,
)
from tests.certs.conftest import NOW
from wspin.core.errors import Conflict
from wspin.core.kinds import SECRETS
from wspin.kube.client import Kube


def _stored() -> Stored:
    ca = new_ca(NOW)
    return Stored(
        ca=ca,
        bundle=(ca.cert,),
        serving=issue_serving(ca, ["hook.ns.svc"], NOW),
    )


def test_a_secret_round_trips_every_part_and_the_publication_record() -> None:
    original = _stored()
    published = Stored(
        ca=original.ca,
        bundle=original.bundle,
        serving=original.serving,
        published_sha=original.bundle_sha,
        published_at=NOW,
    )
    secret = encode(published, "certs", "ns")
    assert secret["metadata"]["annotations"] == {
        PUBLISHED_SHA: original.bundle_sha,
        PUBLISHED_AT: NOW.isoformat(),
    }
    assert sorted(secret["data"]) == ["ca-bundle.crt", "ca.crt", "ca.key", "tls.crt", "tls.key"]
    decoded = decode(secret)
    assert decoded == published
    assert decoded.published
    assert decoded.problems == ()


def test_damaged_parts_are_reported_not_raised() -> None:
    secret = encode(_stored(), "certs", "ns")
    secret["data"][CA_KEY] = base64.b64encode(new_ca(NOW).key_pem).decode()
    secret["data"][BUNDLE] = "%%%"
    secret["metadata"]["annotations"] = {PUBLISHED_AT: "yesterday"}
    decoded = decode(secret)
    assert decoded.ca is None
    assert decoded.bundle == ()
    assert decoded.serving is not None
    assert decoded.problems == (
        "ca.crt key does not belong to its certificate",
        "ca-bundle.crt is not valid base64",
        f"annotation {PUBLISHED_AT} is not a timestamp",
    )
    for problem in decoded.problems:
        assert "PRIVATE KEY" not in problem


def test_a_bundle_recorded_under_another_digest_is_not_published() -> None:
    stored = _stored()
    other = Stored(bundle=stored.bundle, published_sha="0" * 64, published_at=NOW)
    assert not other.published


async def test_the_store_creates_then_replaces_only_from_the_version_it_read(
    kube: Kube, namespace: str
) -> None:
    store = SecretStore(kube, namespace, "webhook-certs")
    assert await store.read() == Stored()
    created = await store.write(_stored())
    assert created.resource_version is not None
    assert await store.read() == created
    renewed = await store.write(
        Stored(
            ca=created.ca,
            bundle=created.bundle,
            serving=issue_serving(created.ca, ["hook.ns.svc"], NOW + datetime.timedelta(days=1)),  # type: ignore[arg-type]
            resource_version=created.resource_version,
            source=created.source,
        )
    )
    assert renewed.serving != created.serving
    with pytest.raises(Conflict):
        await store.write(created)  # stale: written from the first version


async def test_writes_keep_labels_annotations_and_type_set_by_others(
    kube: Kube, namespace: str
) -> None:
    await kube.create(
        SECRETS,
        {
            "metadata": {
                "name": "webhook-certs",
                "namespace": namespace,
                "labels": {"helm.sh/chart": "wspin"},
                "annotations": {"note": "kept"},
            },
            "type": "Opaque",
        },
    )
    store = SecretStore(kube, namespace, "webhook-certs")
    empty = await store.read()
    assert empty.ca is None and empty.resource_version is not None
    fresh = _stored()
    await store.write(
        Stored(
            ca=fresh.ca,
            bundle=fresh.bundle,
            serving=fresh.serving,
            resource_version=empty.resource_version,
            source=empty.source,
        )
    )
    secret = await kube.get(SECRETS, "webhook-certs", namespace)
    assert secret["metadata"]["labels"]["helm.sh/chart"] == "wspin"
    assert secret["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "wspin"
    assert secret["metadata"]["annotations"] == {"note": "kept"}
    assert secret["type"] == "Opaque"
