"""The key the workspace credentials derive from: generated once, shared by replicas, checked."""

from __future__ import annotations

import asyncio
import base64

import pytest

from controller.workspace.pod.credential_keys import (
    KEY_SECRET,
    CredentialKeys,
    load_credential_keys,
    parse_key_secret,
)
from tests.kubeapi import KubeServer
from wspin.core.clock import parse_time
from wspin.core.errors import ConfigError
from wspin.core.kinds import SECRETS
from wspin.kube.client import Kube


def b64(raw: bytes | str) -> str:
    return base64.b64encode(raw.encode() if isinstance(raw, str) else raw).decode()


def secret(**data: str) -> dict[str, object]:
    return {"data": data}


async def test_the_first_start_generates_a_key_and_the_next_reads_the_same(
    kube: Kube, namespace: str
) -> None:
    first = await load_credential_keys(kube, namespace)
    stored = await kube.get(SECRETS, KEY_SECRET, namespace)
    assert set(stored["data"]) == {"active", "key-1"}
    assert len(base64.b64decode(stored["data"]["key-1"])) == 32
    again = await load_credential_keys(kube, namespace)
    assert again.derive(again.active, "admin-token", "u") == first.derive("1", "admin-token", "u")
    # The key's birth dates the first start of a controller that labels what it creates.
    assert first.created is not None and first.created == again.created
    assert first.created == parse_time(stored["metadata"]["creationTimestamp"])


async def test_replicas_starting_together_agree_on_one_key(kube: Kube, namespace: str) -> None:
    loaded = await asyncio.gather(*(load_credential_keys(kube, namespace) for _ in range(5)))
    tokens = {keys.derive(keys.active, "admin-token", "uid-1") for keys in loaded}
    assert len(tokens) == 1


async def test_a_controller_that_may_not_read_its_key_exits_naming_the_role(
    kube: Kube, kube_server: KubeServer, namespace: str
) -> None:
    kube_server.fail_next(
        403,
        method="GET",
        path=f"/api/v1/namespaces/{namespace}/secrets/{KEY_SECRET}",
        message="forbidden",
    )
    with pytest.raises(ConfigError, match="controller Role"):
        await load_credential_keys(kube, namespace)


def test_values_are_32_lowercase_hex_distinct_per_purpose_workspace_and_key() -> None:
    keys = CredentialKeys("a", {"a": b"\x01" * 32, "b": b"\x02" * 32})
    values = {
        keys.derive(key, purpose, uid)
        for key in ("a", "b")
        for purpose in ("password", "admin-token")
        for uid in ("u1", "u2")
    }
    assert len(values) == 8
    assert all(len(v) == 32 and v == v.lower() and int(v, 16) >= 0 for v in values)


@pytest.mark.parametrize(
    ("data", "words"),
    [
        ({"key-1": b64(b"x" * 32)}, "active is missing"),
        ({"active": b64("2"), "key-1": b64(b"x" * 32)}, "names key '2'"),
        ({"active": b64("1"), "key-1": b64(b"short")}, "holds 5 bytes"),
        ({"active": b64("1"), "key-1": "not base64!"}, "not base64"),
        ({"active": b64("1"), "key-UPPER": b64(b"x" * 32)}, "not a key name"),
        ({"active": b64("1"), **{f"key-{n}": b64(b"x" * 32) for n in range(40)}}, "more than 32"),
    ],
)
def test_a_malformed_key_secret_is_refused_naming_the_fix(data: dict[str, str], words: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_key_secret(secret(**data))
    assert words in str(caught.value)
    assert KEY_SECRET in str(caught.value) and "README" in str(caught.value)


def test_a_rotated_secret_keeps_the_old_key_and_activates_the_new() -> None:
    keys = parse_key_secret(
        secret(active=b64("2"), **{"key-1": b64(b"o" * 32), "key-2": b64(b"n" * 32)})
    )
    assert keys.active == "2" and keys.knows("1") and not keys.knows("3")
    assert "o" * 8 not in repr(keys)  # key material never in a repr
