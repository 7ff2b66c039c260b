"""The desired pod, PVC and service account: names, labels, owner, hardening, runtime class."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

from controller.settings import WorkspaceSettings
from controller.workspace.pod import ownership
from controller.workspace.pod.builder import (
    ANNOTATION_RESTART_GENERATION,
    PodBuildError,
    desired_pod,
    dev_preview_of,
    max_active_sessions_of,
    pod_is_stale,
    sanitize_label,
)
from controller.workspace.pod.names import desired_service_account
from controller.workspace.pod.storage import claim_name, desired_pvc
from tests.controller.workspace.factories import AGENTD_IMAGE, UID, credentials, workspace
from tests.support.owners import recorded
from wspin.core.contract import AGENTD, ARTIFACTS
from wspin.core.delivery import AgentdDelivery
from wspin.core.owners import LABEL_QUOTA_MEMBER, LABEL_QUOTA_OWNER
from wspin.core.workspace_pod import WORKSPACE_COMMAND, entrypoint_problem

SETTINGS = WorkspaceSettings(
    default_runtime_class="gvisor", termination_grace=40, agentd=AgentdDelivery(AGENTD_IMAGE)
)


def pod_for(**spec: Any) -> dict[str, Any]:
    return desired_pod(workspace(**spec), SETTINGS, credentials=credentials())


def main_container(pod: dict[str, Any]) -> dict[str, Any]:
    container: dict[str, Any] = pod["spec"]["containers"][0]
    return container


class TestIdentity:
    def test_the_pod_is_named_after_the_workspace_and_its_uid(self) -> None:
        pod = pod_for()
        assert pod["metadata"]["name"] == "ws1-" + UID[:8]
        assert pod["metadata"]["namespace"] == "ws-demo"

    def test_the_pod_carries_the_workspace_labels(self) -> None:
        ws = recorded(workspace(owner={"userID": "alice"}), vouched=False)
        labels = desired_pod(ws, SETTINGS, credentials=credentials())["metadata"]["labels"]
        assert labels == {
            "app": "llmsafespaces",
            "component": "workspace",
            "llmsafespaces.dev/workspace": "ws1",
            "runtime": "python",
            "llmsafespaces.dev/tenant": "alice",
        }

    def test_the_pod_has_a_blocking_controller_owner_reference(self) -> None:
        (ref,) = pod_for()["metadata"]["ownerReferences"]
        assert ref == {
            "apiVersion": "llmsafespaces.dev/v1",
            "kind": "Workspace",
            "name": "ws1",
            "uid": UID,
            "controller": True,
            "blockOwnerDeletion": True,
        }

    def test_the_main_container_is_workspace_at_index_0(self) -> None:
        assert main_container(pod_for())["name"] == "workspace"

    def test_the_pod_has_no_delivery_wiring(self) -> None:
        pod = pod_for()
        volumes = {v["name"] for v in pod["spec"]["volumes"]}
        env = {e["name"] for e in main_container(pod)["env"]}
        for artifact in ARTIFACTS:
            assert artifact.volume not in volumes
            assert artifact.marker_env not in env
            assert not any(name.startswith(artifact.env_prefix) for name in env)

    def test_the_supervisor_runs_from_the_overlay_path(self) -> None:
        container = main_container(pod_for())
        assert container["command"] == [AGENTD.binary_path]
        assert container["args"] == ["--supervise"]

    def test_a_workspace_without_a_uid_cannot_build_a_pod(self) -> None:
        ws = workspace()
        del ws["metadata"]["uid"]
        with pytest.raises(PodBuildError, match="uid"):
            desired_pod(ws, SETTINGS, credentials=credentials())

    def test_a_name_too_long_for_a_label_fails_with_the_reason(self) -> None:
        with pytest.raises(PodBuildError, match="63 characters"):
            desired_pod(workspace(name="w" * 64), SETTINGS, credentials=credentials())


class TestTenantLabel:
    @pytest.mark.parametrize(
        ("owner", "tenant"),
        [
            ({"userID": "user-1"}, "user-1"),
            ({"userID": "user-1", "orgID": "org-9"}, "org-9"),
            ({"userID": "", "orgID": ""}, "unspecified"),
            (None, "unspecified"),
        ],
    )
    def test_tenant_is_the_verified_org_else_user_else_unspecified(
        self, owner: dict[str, str] | None, tenant: str
    ) -> None:
        ws = recorded(workspace(owner=owner)) if owner is not None else workspace()
        pod = desired_pod(ws, SETTINGS, credentials=credentials())
        assert pod["metadata"]["labels"]["llmsafespaces.dev/tenant"] == tenant

    def test_the_spec_as_it_stands_labels_nothing(self) -> None:
        """A spec.owner changed after admission (or never recorded) is not the pod's owner."""
        ws = recorded(workspace(owner={"userID": "alice"}), vouched=False)
        ws["spec"]["owner"] = {"userID": "victim", "orgID": "victim-org"}
        labels = desired_pod(ws, SETTINGS, credentials=credentials())["metadata"]["labels"]
        assert labels["llmsafespaces.dev/tenant"] == "alice"
        assert LABEL_QUOTA_OWNER not in labels and LABEL_QUOTA_MEMBER not in labels
        unrecorded = desired_pod(
            workspace(owner={"userID": "victim"}), SETTINGS, credentials=credentials()
        )
        assert unrecorded["metadata"]["labels"]["llmsafespaces.dev/tenant"] == "unspecified"

    def test_a_vouched_owner_gets_the_quota_labels(self) -> None:
        ws = recorded(workspace(owner={"userID": "u1", "orgID": "o1"}))
        labels = desired_pod(ws, SETTINGS, credentials=credentials())["metadata"]["labels"]
        assert labels[LABEL_QUOTA_OWNER].startswith("org-")
        assert labels[LABEL_QUOTA_MEMBER].startswith("user-")

    @pytest.mark.parametrize(
        ("raw", "label"),
        [
            ("ghcr.io/acme/runtime:3.12", "ghcr.io_acme_runtime_3.12"),
            ("user@example.com", "user_example.com"),
            ("--//--", "unspecified"),
            ("", "unspecified"),
            ("a" * 70 + "b", "a" * 62 + "b"),
            ("_x_", "x"),
        ],
    )
    def test_label_values_are_sanitised(self, raw: str, label: str) -> None:
        assert sanitize_label(raw) == label

    def test_an_image_runtime_becomes_a_sanitised_runtime_label(self) -> None:
        pod = pod_for(runtime="ghcr.io/acme/runtime-python@sha256:" + "a" * 64)
        label = pod["metadata"]["labels"]["runtime"]
        assert len(label) <= 63 and label.endswith("a") and "/" not in label


class TestSecurity:
    def test_the_pod_security_context_is_hardened(self) -> None:
        spec = pod_for()["spec"]
        assert spec["securityContext"] == {
            "runAsUser": 1000,
            "runAsGroup": 1000,
            "fsGroup": 1000,
            "fsGroupChangePolicy": "OnRootMismatch",
            "runAsNonRoot": True,
            "seccompProfile": {"type": "RuntimeDefault"},
        }
        assert spec["automountServiceAccountToken"] is False
        assert spec["enableServiceLinks"] is False
        assert spec["serviceAccountName"] == "workspace-ws1"

    def test_the_workspace_container_is_hardened(self) -> None:
        assert main_container(pod_for())["securityContext"] == {
            "readOnlyRootFilesystem": True,
            "runAsNonRoot": True,
            "allowPrivilegeEscalation": False,
            "capabilities": {"drop": ["ALL"]},
        }

    def test_non_zero_pod_security_context_values_override_the_identity(self) -> None:
        context = pod_for(podSecurityContext={"runAsUser": 2000, "runAsGroup": 0})["spec"][
            "securityContext"
        ]
        assert (context["runAsUser"], context["runAsGroup"], context["fsGroup"]) == (
            2000,
            1000,
            1000,
        )

    def test_the_crd_seccomp_profile_is_ignored(self) -> None:
        pod = pod_for(podSecurityContext={"seccompProfile": {"type": "Unconfined"}})
        assert pod["spec"]["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}

    @pytest.mark.parametrize("value", [-1, "1000", True])
    def test_a_malformed_identity_fails_naming_the_field(self, value: Any) -> None:
        with pytest.raises(PodBuildError, match=r"spec\.podSecurityContext\.runAsUser"):
            pod_for(podSecurityContext={"runAsUser": value})

    def test_the_termination_grace_comes_from_the_settings(self) -> None:
        ws = workspace()
        grace = dataclasses.replace(SETTINGS, termination_grace=7)
        assert (
            desired_pod(ws, grace, credentials=credentials())["spec"][
                "terminationGracePeriodSeconds"
            ]
            == 7
        )
        assert pod_for()["spec"]["terminationGracePeriodSeconds"] == 40


class TestRuntimeClassAndArch:
    def test_the_default_runtime_class_is_applied(self) -> None:
        assert pod_for()["spec"]["runtimeClassName"] == "gvisor"

    def test_no_default_configured_leaves_the_field_unset(self) -> None:
        for default in (None, ""):
            settings = dataclasses.replace(SETTINGS, default_runtime_class=default)
            assert (
                "runtimeClassName"
                not in desired_pod(workspace(), settings, credentials=credentials())["spec"]
            )

    def test_an_override_is_applied(self) -> None:
        assert pod_for(runtimeClass="runc")["spec"]["runtimeClassName"] == "runc"

    def test_an_empty_override_clears_the_field(self) -> None:
        assert "runtimeClassName" not in pod_for(runtimeClass="")["spec"]

    def test_hardening_survives_under_gvisor(self) -> None:
        pod = pod_for(runtimeClass="gvisor")
        assert pod["spec"]["securityContext"]["runAsNonRoot"] is True
        assert main_container(pod)["securityContext"]["capabilities"] == {"drop": ["ALL"]}

    def test_the_node_selector_follows_the_architecture(self) -> None:
        assert pod_for()["spec"]["nodeSelector"] == {"kubernetes.io/arch": "amd64"}
        assert pod_for(architecture="arm64")["spec"]["nodeSelector"] == {
            "kubernetes.io/arch": "arm64"
        }

    def test_an_unknown_architecture_fails_naming_the_field(self) -> None:
        with pytest.raises(PodBuildError, match=r"spec\.architecture 'riscv64'"):
            pod_for(architecture="riscv64")


class TestEnvAndResources:
    def test_the_platform_urls_are_set_only_when_configured(self) -> None:
        settings = dataclasses.replace(
            SETTINGS,
            api_service_url="http://api.svc:8080",
            inference_relay_url="http://relay",
            preview_origin_base_domain="preview.example.com",
        )
        env = {
            e["name"]: e.get("value")
            for e in main_container(desired_pod(workspace(), settings, credentials=credentials()))[
                "env"
            ]
        }
        assert env["LLMSAFESPACE_API_URL"] == "http://api.svc:8080"
        assert env["INFERENCE_RELAY_BASEURL"] == "http://relay"
        assert env["PREVIEW_ORIGIN_BASE_DOMAIN"] == "preview.example.com"
        assert "UPLOAD_STAGING_URL" not in env
        assert env["WORKSPACE_ID"] == "ws1"
        assert env["PATH"].startswith("/workspace/.local/bin:")

    def test_opencode_runtime_env_is_left_to_the_supervisor(self) -> None:
        names = {e["name"] for e in main_container(pod_for())["env"]}
        assert not {"OPENCODE_CONFIG", "OPENCODE_SERVER_PASSWORD"} & names

    def test_both_resource_shapes_become_container_resources(self) -> None:
        flat = main_container(pod_for(resources={"cpu": "250m", "memoryLimit": "4Gi"}))
        assert flat["resources"] == {
            "requests": {"cpu": "250m", "memory": "512Mi"},
            "limits": {"cpu": "1000m", "memory": "4Gi"},
        }
        nested = main_container(pod_for(resources={"requests": {"cpu": "2", "memory": "1Gi"}}))
        assert nested["resources"] == {
            "requests": {"cpu": "2", "memory": "1Gi"},
            "limits": {"cpu": "8", "memory": "4Gi"},
        }

    def test_the_pvc_volume_is_mounted_at_workspace(self) -> None:
        pod = pod_for()
        assert {
            "name": "workspace",
            "persistentVolumeClaim": {"claimName": "workspace-ws1"},
        } in pod["spec"]["volumes"]
        assert {
            "name": "workspace",
            "mountPath": "/workspace",
            "subPath": "workspace",
        } in main_container(pod)["volumeMounts"]


class TestOwnedObjects:
    def test_the_pvc_asks_for_the_size_and_class_and_is_owned(self) -> None:
        pvc = desired_pvc(workspace(storage={"size": "20Gi", "storageClassName": "fast"}))
        assert pvc["metadata"]["name"] == "workspace-ws1"
        assert pvc["metadata"]["ownerReferences"][0]["uid"] == UID
        assert pvc["spec"] == {
            "accessModes": ["ReadWriteOnce"],
            "resources": {"requests": {"storage": "20Gi"}},
            "storageClassName": "fast",
        }

    @pytest.mark.parametrize(
        ("asked", "modes"),
        [
            ("ReadWriteMany", ["ReadWriteMany"]),
            ("ReadWriteOnce", ["ReadWriteOnce"]),
            (None, ["ReadWriteOnce"]),
            ("ReadOnlyMany", ["ReadWriteOnce"]),
        ],
    )
    def test_the_access_mode_is_read_write_many_only_when_asked_for(
        self, asked: str | None, modes: list[str]
    ) -> None:
        storage: dict[str, Any] = {"size": "1Gi"}
        if asked is not None:
            storage["accessMode"] = asked
        assert desired_pvc(workspace(storage=storage))["spec"]["accessModes"] == modes

    def test_an_owned_pvc_of_the_former_name_keeps_being_used(self) -> None:
        ws = workspace()
        legacy = ownership.stamp(desired_pvc(ws, "ws1-workspace"), ws)
        assert claim_name(ws, None) == "workspace-ws1"
        assert claim_name(ws, legacy) == "ws1-workspace"
        pod = desired_pod(ws, SETTINGS, credentials=credentials(), claim="ws1-workspace")
        assert {
            "name": "workspace",
            "persistentVolumeClaim": {"claimName": "ws1-workspace"},
        } in pod["spec"]["volumes"]

    def test_a_former_name_pvc_that_is_not_the_workspaces_is_never_used(self) -> None:
        ws = workspace()
        foreign = ownership.stamp(desired_pvc(ws, "ws1-workspace"), ws)
        foreign["metadata"]["ownerReferences"][0]["uid"] = "someone-else"
        deleting = ownership.stamp(desired_pvc(ws, "ws1-workspace"), ws)
        deleting["metadata"]["deletionTimestamp"] = "2026-11-29T12:00:00Z"
        unowned = ownership.stamp(desired_pvc(ws, "ws1-workspace"), ws)
        del unowned["metadata"]["ownerReferences"]
        for legacy in (foreign, deleting, unowned):
            assert claim_name(ws, legacy) == "workspace-ws1"

    def test_an_unlabelled_former_name_pvc_is_used_only_as_the_first_claim_of_its_workspace(
        self,
    ) -> None:
        ws = workspace()
        # Earlier releases made the claim with the owner reference and no label.
        former = desired_pvc(ws, "ws1-workspace")
        former["metadata"]["uid"] = "claim-1"
        assert claim_name(ws, former) == "ws1-workspace"
        ws["status"] = {"pvcName": "ws1-workspace"}  # an earlier release's status
        assert claim_name(ws, former) == "ws1-workspace"
        ws["status"]["pvcUID"] = "claim-1"  # recorded once mounted
        assert claim_name(ws, former) == "ws1-workspace"
        # Another claim put at the name later (the uid differs), or one put there after the
        # Workspace recorded the new name: the owner reference alone proves nothing.
        ws["status"]["pvcUID"] = "claim-0"
        assert claim_name(ws, former) == "workspace-ws1"
        ws["status"] = {"pvcName": "workspace-ws1"}
        assert claim_name(ws, former) == "workspace-ws1"
        # Older than the controller's credentials key: an earlier release's, whatever the
        # status says.
        former["metadata"]["creationTimestamp"] = "2026-01-01T00:00:00Z"
        cutoff = datetime(2026, 6, 1, tzinfo=UTC)
        assert claim_name(ws, former, legacy_before=cutoff) == "ws1-workspace"

    def test_a_pvc_without_a_size_fails_naming_the_field(self) -> None:
        with pytest.raises(PodBuildError, match=r"spec\.storage\.size"):
            desired_pvc(workspace(storage={}))

    def test_the_service_account_mounts_no_token(self) -> None:
        account = desired_service_account(workspace())
        assert account["metadata"]["name"] == "workspace-ws1"
        assert account["automountServiceAccountToken"] is False


class TestStaleness:
    def test_a_pod_for_the_current_spec_is_not_stale(self) -> None:
        ws = workspace(restartGeneration=3)
        assert pod_is_stale(desired_pod(ws, SETTINGS, credentials=credentials()), ws) is None

    def test_a_new_restart_generation_makes_the_pod_stale(self) -> None:
        pod = pod_for()
        assert pod["metadata"]["annotations"][ANNOTATION_RESTART_GENERATION] == "0"
        assert "restartGeneration" in (pod_is_stale(pod, workspace(restartGeneration=1)) or "")

    def test_a_new_architecture_makes_the_pod_stale(self) -> None:
        assert "architecture" in (pod_is_stale(pod_for(), workspace(architecture="arm64")) or "")


def test_the_example_workspace_builds_a_pod_and_a_pvc() -> None:
    example = Path(__file__).resolve().parents[3] / "examples" / "workspace.yaml"
    ws = recorded(yaml.safe_load(example.read_text()), vouched=False)  # alice's own write
    ws["metadata"]["uid"] = UID
    pod = desired_pod(ws, SETTINGS, credentials=credentials())
    assert pod["metadata"]["labels"]["llmsafespaces.dev/tenant"] == "alice"
    assert main_container(pod)["resources"] == {
        "requests": {"cpu": "500m", "memory": "1Gi"},
        "limits": {"cpu": "2", "memory": "4Gi"},
    }
    assert desired_pvc(ws)["spec"]["resources"]["requests"]["storage"] == "10Gi"


@pytest.mark.parametrize("sidecar", [False, True])
def test_the_built_pod_runs_the_entry_point_the_injector_and_the_policy_require(
    sidecar: bool,
) -> None:
    settings = dataclasses.replace(SETTINGS, agentd_sidecar=sidecar)
    pod = desired_pod(workspace(), settings, credentials=credentials())
    assert entrypoint_problem(pod) is None
    assert main_container(pod)["command"] == list(WORKSPACE_COMMAND)


@pytest.mark.parametrize(
    ("spec", "preview", "sessions"),
    [
        ({}, False, 5),
        ({"networkAccess": {"devPreview": True}, "maxActiveSessions": 20}, True, 20),
        ({"networkAccess": {"devPreview": "true"}, "maxActiveSessions": True}, False, 5),
        ({"networkAccess": "open", "maxActiveSessions": 0}, False, 5),
        ({"maxActiveSessions": 21}, False, 5),
        ({"maxActiveSessions": "3"}, False, 5),
    ],
)
def test_only_well_formed_settings_reach_agentd_and_the_rest_are_the_crds_defaults(
    spec: dict[str, Any], preview: bool, sessions: int
) -> None:
    assert (dev_preview_of(spec), max_active_sessions_of(spec)) == (preview, sessions)
