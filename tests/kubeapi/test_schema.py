"""Custom resources are pruned, defaulted and validated by the chart CRDs' structural schemas.

Client-visible behaviour only (``kube``/``namespace``), so these hold against a real
cluster as well: a field the CRD does not declare disappears, and a value the schema
refuses is a 422 naming the field.
"""

from __future__ import annotations

from typing import Any

import pytest

from wspin.core.errors import Invalid
from wspin.core.kinds import INFERENCE_RELAYS, WORKSPACES
from wspin.kube.client import Kube

RELAY_SPEC = {
    "upstreamURL": "https://upstream.example.com",
    "providers": [{"provider": "aws", "region": "us-east-1", "credentialsRef": {"name": "c"}}],
}


def _ws(name: str = "w", **spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": {"runtime": "python", **spec}}


async def test_undeclared_nested_fields_are_pruned_and_declared_ones_kept(
    kube: Kube, namespace: str
) -> None:
    stored = await kube.create(
        WORKSPACES,
        _ws(
            resources={"cpu": "1", "memoryLimit": "2Gi", "gpu": "1"},
            storage={"size": "1Gi", "iops": 3000},
            owner={"userID": "alice", "orgID": "acme", "email": "a@example.com"},
        ),
        namespace,
    )
    spec = stored["spec"]
    assert spec["resources"] == {"cpu": "1", "memoryLimit": "2Gi"}
    assert spec["storage"] == {"size": "1Gi", "accessMode": "ReadWriteOnce"}  # defaulted
    assert spec["owner"] == {"userID": "alice", "orgID": "acme"}
    assert (await kube.get(WORKSPACES, "w", namespace))["spec"] == spec


async def test_fields_under_a_preserving_node_survive(kube: Kube, namespace: str) -> None:
    stored = await kube.create(
        WORKSPACES,
        _ws(futureField={"x": 1}, podSecurityContext={"runAsUser": 1500, "k": 1}),
        namespace,
    )
    assert stored["spec"]["futureField"] == {"x": 1}
    assert stored["spec"]["podSecurityContext"] == {"runAsUser": 1500, "k": 1}


async def test_top_level_fields_outside_the_schema_are_pruned(kube: Kube, namespace: str) -> None:
    stored = await kube.create(WORKSPACES, {**_ws(), "extra": {"a": 1}}, namespace)
    assert "extra" not in stored


async def test_schema_defaults_are_filled_in(kube: Kube, namespace: str) -> None:
    stored = await kube.create(WORKSPACES, _ws(), namespace)
    assert stored["spec"]["architecture"] == "amd64"


async def test_undeclared_status_condition_fields_are_pruned(kube: Kube, namespace: str) -> None:
    ws = await kube.create(WORKSPACES, _ws(), namespace)
    condition = {
        "type": "AgentdVerified",
        "status": "True",
        "reason": "AgentdVerified",
        "message": "",
        "lastTransitionTime": "2026-12-01T10:00:00Z",
        "severity": "Info",
    }
    stored = await kube.patch(
        WORKSPACES,
        "w",
        {"status": {"phase": "Active", "conditions": [condition]}},
        namespace,
        sub="status",
    )
    (kept,) = stored["status"]["conditions"]
    assert "severity" not in kept and kept["type"] == "AgentdVerified"
    assert ws["metadata"]["uid"] == stored["metadata"]["uid"]


@pytest.mark.parametrize(
    ("spec", "field", "problem"),
    [
        ({"architecture": "x86"}, "spec.architecture", "Unsupported value"),
        ({"restartGeneration": "three"}, "spec.restartGeneration", "Invalid value"),
        ({"suspend": "yes"}, "spec.suspend", "Invalid value"),
        ({"runtime": "r" * 513}, "spec.runtime", "Too long"),
        ({"resources": {"cpu": 2}}, "spec.resources.cpu", "Invalid value"),
        ({"packages": [{"requirements": [1]}]}, "spec.packages[0].requirements[0]", "Invalid"),
    ],
)
async def test_a_value_the_schema_refuses_is_a_422_naming_the_field(
    kube: Kube, namespace: str, spec: dict[str, Any], field: str, problem: str
) -> None:
    with pytest.raises(Invalid) as caught:
        await kube.create(WORKSPACES, _ws(**spec), namespace)
    assert f"{field}: " in str(caught.value)
    assert problem in str(caught.value)


async def test_a_missing_required_field_is_a_422_naming_it(kube: Kube) -> None:
    with pytest.raises(Invalid) as caught:
        await kube.create(
            INFERENCE_RELAYS, {"metadata": {"name": "r9"}, "spec": {"upstreamURL": "https://u"}}
        )
    assert "spec.providers: Required value" in str(caught.value)


async def test_an_update_is_validated_like_a_create(kube: Kube, namespace: str) -> None:
    await kube.create(WORKSPACES, _ws(), namespace)
    with pytest.raises(Invalid) as caught:
        await kube.patch(WORKSPACES, "w", {"spec": {"architecture": "riscv64"}}, namespace)
    assert "spec.architecture: Unsupported value" in str(caught.value)
    with pytest.raises(Invalid) as caught:
        await kube.patch(
            WORKSPACES, "w", {"status": {"phase": "Sleeping"}}, namespace, sub="status"
        )
    assert "status.phase: Unsupported value" in str(caught.value)
    assert (await kube.get(WORKSPACES, "w", namespace))["spec"]["architecture"] == "amd64"


async def test_a_valid_relay_keeps_its_declared_fields(kube: Kube) -> None:
    provider = {**RELAY_SPEC["providers"][0], "bogus": True}  # type: ignore[dict-item]
    spec = {**RELAY_SPEC, "providers": [provider], "future": 1}
    relay = await kube.create(INFERENCE_RELAYS, {"metadata": {"name": "r8"}, "spec": spec})
    try:
        assert relay["spec"]["future"] == 1  # spec itself preserves unknown fields
        (kept,) = relay["spec"]["providers"]
        assert "bogus" not in kept and kept["credentialsRef"] == {"name": "c"}
    finally:
        await kube.delete(INFERENCE_RELAYS, "r8")


async def test_nullable_fields_accept_null_and_both_resource_shapes_are_kept(
    kube: Kube, namespace: str
) -> None:
    stored = await kube.create(
        WORKSPACES,
        _ws(
            runtimeClass=None,
            resources={"cpu": "1.0", "requests": {"memory": "1Gi"}, "limits": {"cpu": "2.0"}},
        ),
        namespace,
    )
    assert stored["spec"]["runtimeClass"] is None
    assert stored["spec"]["resources"] == {
        "cpu": "1.0",
        "requests": {"memory": "1Gi"},
        "limits": {"cpu": "2.0"},
    }


async def test_every_violation_is_reported_at_once(kube: Kube, namespace: str) -> None:
    with pytest.raises(Invalid) as caught:
        await kube.create(WORKSPACES, _ws(architecture="x86", suspend="no"), namespace)
    message = str(caught.value)
    assert "spec.architecture: Unsupported value" in message
    assert "spec.suspend: Invalid value" in message
