"""The Workspace and InferenceRelay CRDs: names, structural schemas, and real objects against them.

Custom resources are checked against the CRDs' own openAPIV3Schema with jsonschema, after the
two Kubernetes extensions jsonschema does not know are translated (``nullable`` and
``x-kubernetes-int-or-string``).
"""

from __future__ import annotations

import copy
import re
from pathlib import Path
from typing import Any, get_args

import jsonschema
import pytest
import yaml

from tests.chart.helm import CHART, REPO, Rendered
from tests.fixtures import MANIFESTS
from wspin.core.fleet import Phase
from wspin.core.objects import Obj

FIXTURES = MANIFESTS
CRD_DIR = CHART / "crds"


def load_crd(plural: str) -> Obj:
    crd: Obj = yaml.safe_load((CRD_DIR / f"{plural}.llmsafespaces.dev.yaml").read_text())
    return crd


def version_v1(crd: Obj) -> Obj:
    (version,) = crd["spec"]["versions"]
    return version  # type: ignore[no-any-return]


def to_jsonschema(node: Any) -> Any:
    """openAPIV3Schema (Kubernetes dialect) → plain JSON Schema with the same meaning."""
    if isinstance(node, list):
        return [to_jsonschema(item) for item in node]
    if not isinstance(node, dict):
        return node
    out = {key: to_jsonschema(value) for key, value in node.items()}
    if out.pop("x-kubernetes-int-or-string", False):
        out["anyOf"] = [{"type": "integer"}, {"type": "string"}]
    if out.pop("nullable", False) and "type" in out:
        out["type"] = [out["type"], "null"]
    if "properties" in out and not out.get("x-kubernetes-preserve-unknown-fields"):
        # The API server prunes unknown fields; in a test, an unknown field is a typo.
        out.setdefault("additionalProperties", False)
    return out


def validator(plural: str) -> jsonschema.Draft7Validator:
    schema = to_jsonschema(version_v1(load_crd(plural))["schema"]["openAPIV3Schema"])
    schema["properties"]["metadata"] = {"type": "object"}
    return jsonschema.Draft7Validator(schema)


def errors(plural: str, obj: Obj) -> list[str]:
    return [
        f"{'.'.join(str(p) for p in err.absolute_path)}: {err.message}"
        for err in validator(plural).iter_errors(obj)
    ]


def structural_problems(node: Obj, path: str = "") -> list[str]:
    """Kubernetes' structural-schema rule: every node states its type, except int-or-string and
    preserve-unknown-fields nodes."""
    problems = []
    exempt = node.get("x-kubernetes-int-or-string") or node.get(
        "x-kubernetes-preserve-unknown-fields"
    )
    if "type" not in node and not exempt:
        problems.append(f"{path or '<root>'} has no type")
    for name, child in (node.get("properties") or {}).items():
        problems += structural_problems(child, f"{path}.{name}")
    if isinstance(node.get("items"), dict):
        problems += structural_problems(node["items"], f"{path}[]")
    return problems


def json_path(obj: Obj, expression: str) -> Any:
    """The subset of kubectl JSONPath printer columns use: ``.a.b`` and ``[?(@.k=="v")]``."""
    current: Any = obj
    for step in re.findall(r"\.([A-Za-z0-9]+)|\[\?\(@\.(\w+)==\"([^\"]*)\"\)\]", expression):
        field, key, value = step
        if field:
            current = current.get(field) if isinstance(current, dict) else None
        else:
            current = next((item for item in current or [] if item.get(key) == value), None)
    return current


WORKSPACE: Obj = {
    "apiVersion": "llmsafespaces.dev/v1",
    "kind": "Workspace",
    "metadata": {"name": "ws1", "namespace": "ws-demo"},
    "spec": {
        "runtime": "python",
        "architecture": "arm64",
        "storage": {"size": "10Gi", "storageClassName": "fast-ssd", "accessMode": "ReadWriteMany"},
        "resources": {
            "requests": {"cpu": "500m", "memory": "1Gi"},
            "limits": {"cpu": 2, "memory": "4Gi"},
        },
        "runtimeClass": "",
        "podSecurityContext": {"runAsUser": 2000, "runAsGroup": 2000, "fsGroup": 2000},
        "suspend": False,
        "restartGeneration": 3,
        "owner": {"userID": "u-1", "orgID": "org-1"},
        "packages": [{"manager": "pip", "requirements": ["requests[socks]>=2.31"]}],
        "networkAccess": {"egress": [{"domain": "*.pypi.org"}]},
        "futureField": {"kept": True},
    },
    "status": {
        "phase": "Active",
        "reason": "PodRunning",
        "message": "workspace pod is running",
        "podName": "ws1-b8985526",
        "podNamespace": "ws-demo",
        "podIP": "10.0.0.7",
        "endpoint": "http://10.0.0.7:4096",
        "imageTag": "3.12",
        "startTime": "2026-11-29T09:00:00Z",
        "restartCount": 2,
        "observedRestartGeneration": 3,
        "pvcName": "workspace-ws1",
        "observedGeneration": 4,
        "conditions": [
            {
                "type": "Ready",
                "status": "True",
                "reason": "PodReady",
                "message": "workspace pod is ready",
                "lastTransitionTime": "2026-11-29T09:00:00Z",
                "observedGeneration": 4,
            },
            {
                "type": "AgentdVerified",
                "status": "False",
                "reason": "AgentdVerificationFailed",
                "message": "sha256 mismatch",
                "lastTransitionTime": "2026-11-29T10:00:00Z",
                "observedGeneration": 4,
            },
        ],
        "secretsDelivery": {"relayRevision": "r0123456789ab", "degradedReason": ""},
    },
}

RELAY: Obj = {
    "apiVersion": "llmsafespaces.dev/v1",
    "kind": "InferenceRelay",
    "metadata": {"name": "relay-fleet"},
    "spec": {
        "upstreamURL": "https://opencode.ai/zen/v1",
        "providers": [
            {
                "provider": "aws",
                "region": "us-east-1",
                "credentialsRef": {"name": "aws-relay-irwa"},
            },
            {
                "provider": "oci",
                "region": "us-ashburn-1",
                "credentialsRef": {"name": "oci-credentials"},
                "shape": "VM.Standard.A1.Flex",
            },
        ],
        "healthCheck": {"interval": "15s", "unhealthyThreshold": 3},
        "rotation": {"enabled": True, "max429Rate": 0.5},
        "fallback": {"enabled": True, "rate": 0.5, "maxConcurrent": 1},
    },
    "status": {
        "instances": [
            {
                "id": "i-0abc",
                "provider": "aws",
                "region": "us-east-1",
                "publicIP": "203.0.113.7",
                "state": "healthy",
                "healthy": True,
                "lastCheck": None,
                "429Count": 2,
                "totalRequests": 120,
                "egressBytes": 10_000_000_000,
                "provisioningAttempts": 1,
                "lastProvisionError": "",
            }
        ],
        "healthyReplicas": 1,
        "conditions": [
            {
                "type": "Ready",
                "status": "True",
                "reason": "AllRelaysHealthy",
                "lastTransitionTime": "2026-11-29T10:00:00Z",
            }
        ],
        "lastRotation": None,
    },
}


def test_workspace_crd_names_scope_and_status_subresource() -> None:
    crd = load_crd("workspaces")
    assert crd["spec"]["group"] == "llmsafespaces.dev"
    assert crd["spec"]["scope"] == "Namespaced"
    assert crd["spec"]["names"]["plural"] == "workspaces"
    assert crd["spec"]["names"]["kind"] == "Workspace"
    assert crd["spec"]["names"]["shortNames"] == ["ws"]
    version = version_v1(crd)
    assert (version["name"], version["served"], version["storage"]) == ("v1", True, True)
    assert version["subresources"] == {"status": {}}


def test_inference_relay_crd_is_cluster_scoped_with_short_name_irelay() -> None:
    crd = load_crd("inferencerelays")
    assert crd["spec"]["group"] == "llmsafespaces.dev"
    assert crd["spec"]["scope"] == "Cluster"
    assert crd["spec"]["names"]["plural"] == "inferencerelays"
    assert crd["spec"]["names"]["shortNames"] == ["irelay"]
    version = version_v1(crd)
    assert (version["name"], version["served"], version["storage"]) == ("v1", True, True)
    assert version["subresources"] == {"status": {}}


@pytest.mark.parametrize("plural", ["workspaces", "inferencerelays"])
def test_crd_schemas_are_structural(plural: str) -> None:
    schema = version_v1(load_crd(plural))["schema"]["openAPIV3Schema"]
    assert structural_problems(schema) == []


@pytest.mark.parametrize("plural", ["workspaces", "inferencerelays"])
def test_spec_and_status_preserve_unknown_fields(plural: str) -> None:
    properties = version_v1(load_crd(plural))["schema"]["openAPIV3Schema"]["properties"]
    assert properties["spec"]["x-kubernetes-preserve-unknown-fields"] is True
    assert properties["status"]["x-kubernetes-preserve-unknown-fields"] is True


def test_the_chart_ships_its_three_crds_in_its_render(default_render: Rendered) -> None:
    names = {doc["metadata"]["name"] for doc in default_render.of_kind("CustomResourceDefinition")}
    assert names == {
        "workspaces.llmsafespaces.dev",
        "inferencerelays.llmsafespaces.dev",
        "runtimeenvironments.llmsafespaces.dev",
    }


def test_a_workspace_using_every_field_matches_the_schema() -> None:
    assert errors("workspaces", WORKSPACE) == []


@pytest.mark.parametrize(
    "manifest",
    [FIXTURES / "10-workspace-ws1.yaml", REPO / "examples" / "workspace.yaml"],
    ids=["captured-ws1", "example"],
)
def test_real_workspace_manifests_match_the_schema(manifest: Path) -> None:
    obj = yaml.safe_load(manifest.read_text())
    assert errors("workspaces", obj) == []


def test_a_forged_status_phase_from_the_captures_is_rejected_by_the_status_schema() -> None:
    # 12-workspace-with-status.yaml carries phase "Running", which wspin never writes.
    obj = yaml.safe_load((FIXTURES / "12-workspace-with-status.yaml").read_text())
    assert errors("workspaces", {"spec": obj["spec"]}) == []
    assert any("status.phase" in e for e in errors("workspaces", obj))


@pytest.mark.parametrize(
    ("path", "value", "field"),
    [
        (("spec", "architecture"), "s390x", "spec.architecture"),
        (("spec", "suspend"), "yes", "spec.suspend"),
        (("spec", "restartGeneration"), "2", "spec.restartGeneration"),
        (("spec", "podSecurityContext", "runAsUser"), "root", "spec.podSecurityContext.runAsUser"),
        (("spec", "resources", "requests", "cpu"), [1], "spec.resources.requests.cpu"),
        (("status", "conditions"), [{"type": "Ready"}], "status.conditions.0"),
        (("status", "conditions", 0, "status"), "Maybe", "status.conditions.0.status"),
    ],
)
def test_a_workspace_with_a_wrong_field_is_rejected(
    path: tuple[str | int, ...], value: Any, field: str
) -> None:
    obj = copy.deepcopy(WORKSPACE)
    target: Any = obj
    for step in path[:-1]:
        target = target[step]
    target[path[-1]] = value
    assert any(e.startswith(field) for e in errors("workspaces", obj)), errors("workspaces", obj)


def test_an_explicit_null_runtime_class_is_allowed_and_means_the_default() -> None:
    obj = copy.deepcopy(WORKSPACE)
    obj["spec"]["runtimeClass"] = None
    assert errors("workspaces", obj) == []


def test_workspace_architecture_defaults_to_amd64() -> None:
    spec = version_v1(load_crd("workspaces"))["schema"]["openAPIV3Schema"]["properties"]["spec"]
    assert spec["properties"]["architecture"]["default"] == "amd64"
    assert spec["properties"]["architecture"]["enum"] == ["amd64", "arm64"]


def test_workspace_phases_are_exactly_the_controllers() -> None:
    status = version_v1(load_crd("workspaces"))["schema"]["openAPIV3Schema"]["properties"]["status"]
    assert status["properties"]["phase"]["enum"] == [
        "Pending",
        "Creating",
        "Active",
        "Suspending",
        "Suspended",
        "Resuming",
        "Terminating",
        "Terminated",
        "Failed",
    ]
    assert tuple(status["properties"]["phase"]["enum"]) == get_args(Phase)


def test_an_inference_relay_using_every_field_matches_the_schema() -> None:
    assert errors("inferencerelays", RELAY) == []


@pytest.mark.parametrize(
    ("mutate", "field"),
    [
        (lambda r: r["spec"].update(providers=[]), "spec.providers"),
        (lambda r: r["spec"]["providers"][0].update(provider="azure"), "spec.providers.0.provider"),
        (
            lambda r: r["spec"]["providers"][0].update(credentialsRef={"name": ""}),
            "spec.providers.0",
        ),
        (lambda r: r["spec"].pop("upstreamURL"), "spec: 'upstreamURL' is a required"),
        (lambda r: r["status"]["instances"][0].pop("publicIP"), "status.instances.0"),
        (lambda r: r["status"]["instances"][0].update(healthy="yes"), "status.instances.0.healthy"),
    ],
    ids=["no-providers", "unknown-provider", "empty-credentials", "no-upstream", "no-ip", "bool"],
)
def test_an_inference_relay_with_a_wrong_field_is_rejected(mutate: Any, field: str) -> None:
    obj = copy.deepcopy(RELAY)
    mutate(obj)
    found = errors("inferencerelays", obj)
    assert any(e.startswith(field) for e in found), found


def test_workspace_printer_columns_show_phase_ready_endpoint_runtime_storage_age() -> None:
    columns = version_v1(load_crd("workspaces"))["additionalPrinterColumns"]
    assert [c["name"] for c in columns] == [
        "Phase",
        "Ready",
        "Endpoint",
        "Runtime",
        "Storage",
        "Age",
    ]
    shown = [json_path(WORKSPACE, c["jsonPath"]) for c in columns[:5]]
    assert shown == ["Active", "True", "http://10.0.0.7:4096", "python", "10Gi"]
    # The endpoint only with -o wide: the default view stays narrow.
    assert [c.get("priority", 0) for c in columns] == [0, 0, 1, 0, 0, 0]


def test_inference_relay_printer_columns_resolve_on_a_real_status() -> None:
    columns = version_v1(load_crd("inferencerelays"))["additionalPrinterColumns"]
    assert [c["name"] for c in columns] == ["Ready", "Healthy", "Upstream", "Age"]
    shown = [json_path(RELAY, c["jsonPath"]) for c in columns[:3]]
    assert shown == ["True", 1, "https://opencode.ai/zen/v1"]
