"""The pod's wiring in both delivery modes: the builder's pod after the webhook's patch.

The pod-wiring, sidecar, security and runtime-class cases of the delivery contract: every
assertion is on the pod the API server would store (builder, then injector).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import jsonpatch
import pytest

from controller.settings import WorkspaceSettings
from controller.workspace.pod.builder import PodBuildError, desired_pod
from tests.controller.workspace.factories import (
    AGENTD_IMAGE,
    OPENCODE_IMAGE,
    credentials,
    workspace,
)
from webhook.inject import InjectConfig, inject
from wspin.core.contract import (
    AGENTD,
    OPENCODE,
    PLATFORM_BOOTSTRAP,
    PLATFORM_INIT,
    PLATFORM_MATERIALIZE,
    SIDECAR_CONTAINER,
)
from wspin.core.delivery import AgentdDelivery, PinSet, ResolvedArtifact
from wspin.core.objects import Obj

RELEASE = InjectConfig(
    agentd=ResolvedArtifact(AGENTD, AGENTD_IMAGE, PinSet("a" * 64, "b" * 64)),
    opencode=ResolvedArtifact(OPENCODE, OPENCODE_IMAGE, PinSet("c" * 64, "d" * 64)),
)
SINGLE = WorkspaceSettings(
    agentd=AgentdDelivery(AGENTD_IMAGE),
    api_service_url="http://api.svc:8080",
    inference_relay_url="http://relay.svc:8080",
    default_runtime_class="gvisor",
)
SIDECAR = dataclasses.replace(SINGLE, agentd_sidecar=True)
PLATFORM = (PLATFORM_INIT, PLATFORM_BOOTSTRAP, PLATFORM_MATERIALIZE)


def stored(settings: WorkspaceSettings = SINGLE, **spec: Any) -> Obj:
    pod = desired_pod(workspace(**spec), settings, credentials=credentials())
    result: Obj = jsonpatch.apply_patch(pod, list(inject(pod, RELEASE).patch))
    return result


def main(pod: Obj) -> Obj:
    container: Obj = pod["spec"]["containers"][0]
    assert container["name"] == "workspace"
    return container


def inits(pod: Obj) -> dict[str, Obj]:
    return {c["name"]: c for c in pod["spec"].get("initContainers") or []}


def env(container: Obj) -> dict[str, Obj]:
    return {e["name"]: e for e in container.get("env") or []}


def mounts_of(container: Obj, volume: str) -> list[Obj]:
    return [m for m in container.get("volumeMounts") or [] if m["name"] == volume]


def every_container(pod: Obj) -> list[Obj]:
    return [*pod["spec"].get("initContainers", []), *pod["spec"]["containers"]]


@pytest.mark.parametrize("settings", [SINGLE, SIDECAR], ids=["single", "sidecar"])
class TestBothModes:
    def test_the_image_volumes_are_exact_references_pulled_if_not_present(
        self, settings: WorkspaceSettings
    ) -> None:
        volumes = {v["name"]: v for v in stored(settings)["spec"]["volumes"]}
        for artifact, image in ((AGENTD, AGENTD_IMAGE), (OPENCODE, OPENCODE_IMAGE)):
            assert volumes[artifact.volume]["image"] == {
                "reference": image,
                "pullPolicy": "IfNotPresent",
            }

    def test_opencode_is_mounted_read_only_on_the_workspace_container_and_nowhere_else(
        self, settings: WorkspaceSettings
    ) -> None:
        pod = stored(settings)
        for container in every_container(pod):
            found = mounts_of(container, OPENCODE.volume)
            if container["name"] == "workspace":
                assert found == [{"name": "opencode", "readOnly": True, "mountPath": "/opencode"}]
            else:
                assert found == [], container["name"]

    def test_agentd_is_mounted_read_only_where_it_runs(self, settings: WorkspaceSettings) -> None:
        pod = stored(settings)
        runners = [
            c
            for c in every_container(pod)
            if c["name"] in ("workspace", SIDECAR_CONTAINER, *PLATFORM)
        ]
        assert runners
        for container in runners:
            assert mounts_of(container, AGENTD.volume) == [
                {"name": "agentd", "readOnly": True, "mountPath": "/agentd"}
            ], container["name"]
            assert container["command"][0] == AGENTD.binary_path
        assert mounts_of(inits(pod).get("workspace-setup", {}), AGENTD.volume) == []

    def test_all_eight_pins_are_on_the_workspace_container_only(
        self, settings: WorkspaceSettings
    ) -> None:
        pod = stored(settings)
        names = env(main(pod))
        expected = {
            "AGENTD_IMAGE_VOLUME": "1",
            "LLMSAFESPACES_AGENTD_BINARY": "/agentd/usr/local/bin/workspace-agentd",
            "LLMSAFESPACES_AGENTD_SHA256_AMD64": "a" * 64,
            "LLMSAFESPACES_AGENTD_SHA256_ARM64": "b" * 64,
            "OPENCODE_IMAGE_VOLUME": "1",
            "LLMSAFESPACES_OPENCODE_BINARY": "/opencode/usr/local/bin/opencode",
            "LLMSAFESPACES_OPENCODE_SHA256_AMD64": "c" * 64,
            "LLMSAFESPACES_OPENCODE_SHA256_ARM64": "d" * 64,
        }
        assert {k: names[k]["value"] for k in expected} == expected
        for container in pod["spec"]["initContainers"]:
            leaked = {n for n in env(container) if n.endswith("IMAGE_VOLUME") or "_SHA256_" in n}
            assert not leaked, container["name"]

    def test_the_main_command_is_the_overlay_supervisor(self, settings: WorkspaceSettings) -> None:
        container = main(stored(settings))
        assert container["command"] == ["/agentd/usr/local/bin/workspace-agentd"]
        wanted = ["supervise-opencode"] if settings.agentd_sidecar else ["--supervise"]
        assert container["args"] == wanted
        assert not any("opencode" in part for part in container["command"])

    def test_the_base_env_and_gomaxprocs_are_set(self, settings: WorkspaceSettings) -> None:
        names = env(main(stored(settings)))
        assert names["MISE_DATA_DIR"]["value"] == "/workspace/.local/share/mise"
        assert names["GIT_CONFIG_VALUE_0"]["value"] == "store --file=/home/sandbox/.git-credentials"
        assert names["PATH"]["value"].startswith("/workspace/.local/bin:")
        assert names["GOMAXPROCS"]["valueFrom"]["resourceFieldRef"]["resource"] == "limits.cpu"

    def test_the_bootstrap_token_is_projected_for_the_api_audience(
        self, settings: WorkspaceSettings
    ) -> None:
        pod = stored(settings)
        (token,) = [v for v in pod["spec"]["volumes"] if v["name"] == "bootstrap-token"]
        assert token["projected"]["sources"] == [
            {
                "serviceAccountToken": {
                    "audience": "llmsafespace-api",
                    "expirationSeconds": 600,
                    "path": "token",
                }
            }
        ]
        holders = [c["name"] for c in every_container(pod) if mounts_of(c, "bootstrap-token")]
        assert holders == [SIDECAR_CONTAINER if settings.agentd_sidecar else PLATFORM_BOOTSTRAP]
        assert all(
            m["readOnly"] for c in every_container(pod) for m in mounts_of(c, "bootstrap-token")
        )

    def test_every_platform_container_is_hardened_uid_1000(
        self, settings: WorkspaceSettings
    ) -> None:
        for name, container in inits(stored(settings)).items():
            if not name.startswith("platform-"):
                continue
            assert container["image"] == AGENTD_IMAGE
            assert container["securityContext"] == {
                "allowPrivilegeEscalation": False,
                "capabilities": {"drop": ["ALL"]},
                "readOnlyRootFilesystem": True,
                "runAsNonRoot": True,
                "runAsUser": 1000,
            }

    def test_the_pod_security_context_is_hardened(self, settings: WorkspaceSettings) -> None:
        spec = stored(settings)["spec"]
        assert spec["automountServiceAccountToken"] is False
        assert spec["enableServiceLinks"] is False
        assert spec["serviceAccountName"] == "workspace-ws1"
        assert spec["securityContext"]["runAsNonRoot"] is True
        assert spec["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
        assert spec["securityContext"]["fsGroupChangePolicy"] == "OnRootMismatch"

    def test_credential_stores_are_memory_backed(self, settings: WorkspaceSettings) -> None:
        volumes = {v["name"]: v for v in stored(settings)["spec"]["volumes"]}
        assert volumes["sandbox-cfg"]["emptyDir"] == {"medium": "Memory", "sizeLimit": "32Mi"}
        assert volumes["sandbox-runtime"]["emptyDir"] == {"medium": "Memory", "sizeLimit": "96Mi"}
        assert volumes["pw-secret"]["secret"]["secretName"] == "workspace-pw-ws1"
        assert volumes["free-models"]["configMap"]["optional"] is True

    def test_opencode_runtime_env_is_never_in_the_single_container_spec(
        self, settings: WorkspaceSettings
    ) -> None:
        names = set(env(main(stored(settings))))
        assert not {"OPENCODE_EXPERIMENTAL_EVENT_SYSTEM", "OPENCODE_SERVER_PASSWORD"} & names
        assert ("OPENCODE_CONFIG" in names) == settings.agentd_sidecar


class TestSingleContainerMode:
    def test_the_three_platform_inits_run_in_order_and_no_legacy_ones(self) -> None:
        names = list(inits(stored()))
        assert names == [PLATFORM_INIT, PLATFORM_BOOTSTRAP, PLATFORM_MATERIALIZE]
        assert not {"workspace-dirs", "credential-setup"} & set(names)

    def test_the_platform_subcommands(self) -> None:
        pod = inits(stored())
        assert pod[PLATFORM_INIT]["args"] == ["init-fs"]
        assert pod[PLATFORM_BOOTSTRAP]["args"] == ["bootstrap", "--workspace-id", "ws1"]
        assert (
            env(pod[PLATFORM_BOOTSTRAP])["LLMSAFESPACE_API_URL"]["value"] == "http://api.svc:8080"
        )
        assert pod[PLATFORM_MATERIALIZE]["args"] == ["materialize"]
        materialize = env(pod[PLATFORM_MATERIALIZE])
        assert materialize["XDG_DATA_HOME"]["value"] == "/workspace/.local"
        assert materialize["INFERENCE_RELAY_BASEURL"]["value"] == "http://relay.svc:8080"

    def test_liveness_is_agentd_healthz_and_readiness_its_readyz(self) -> None:
        container = main(stored())
        assert container["livenessProbe"]["httpGet"] == {"path": "/v1/healthz", "port": 4098}
        bearer = [{"name": "Authorization", "value": f"Bearer {credentials().admin_token}"}]
        for probe in ("readinessProbe", "startupProbe"):
            assert container[probe]["httpGet"] == {
                "path": "/v1/readyz",
                "port": 4098,
                "httpHeaders": bearer,
            }

    def test_no_sidecar_and_no_sidecar_stores(self) -> None:
        pod = stored()
        assert SIDECAR_CONTAINER not in inits(pod)
        names = {v["name"] for v in pod["spec"]["volumes"]}
        assert not {"agentd-config", "agentd-secrets"} & names
        assert "AGENTD_SIDECAR_MODE" not in env(main(pod))


class TestSidecarMode:
    def sidecar(self, **spec: Any) -> Obj:
        init: list[Obj] = list(stored(SIDECAR, **spec)["spec"]["initContainers"])
        assert init[-1]["name"] == SIDECAR_CONTAINER, "the sidecar is the last init container"
        return init[-1]

    def test_the_sidecar_is_a_native_sidecar_of_the_agentd_image(self) -> None:
        sidecar = self.sidecar()
        assert sidecar["restartPolicy"] == "Always"
        assert sidecar["image"] == AGENTD_IMAGE
        assert sidecar["command"] == ["/agentd/usr/local/bin/workspace-agentd", "--sidecar"]

    def test_the_sidecar_stays_last_with_packages(self) -> None:
        sidecar = self.sidecar(packages=[{"requirements": ["requests"]}])
        assert sidecar["name"] == SIDECAR_CONTAINER

    def test_the_sidecar_runs_as_uid_2000_gid_1000_hardened(self) -> None:
        assert self.sidecar()["securityContext"] == {
            "allowPrivilegeEscalation": False,
            "capabilities": {"drop": ["ALL"]},
            "readOnlyRootFilesystem": True,
            "runAsNonRoot": True,
            "runAsUser": 2000,
            "runAsGroup": 1000,
        }

    def test_the_sidecar_mounts(self) -> None:
        mounts = {m["mountPath"]: m for m in self.sidecar()["volumeMounts"]}
        assert mounts["/agentd"] == {"name": "agentd", "readOnly": True, "mountPath": "/agentd"}
        assert mounts["/sandbox-cfg"].get("readOnly") is True
        assert "readOnly" not in mounts["/sandbox-runtime"]
        assert mounts["/workspace"] == {
            "name": "workspace",
            "mountPath": "/workspace",
            "subPath": "workspace",
            "readOnly": True,
        }
        assert "/opencode" not in mounts

    def test_the_sidecar_probes(self) -> None:
        sidecar = self.sidecar()
        assert sidecar["startupProbe"]["httpGet"] == {"path": "/v1/healthz", "port": 4098}
        assert sidecar["readinessProbe"]["httpGet"]["path"] == "/v1/readyz"

    def test_the_admin_token_goes_to_readyz_as_a_bearer_never_to_healthz(self) -> None:
        token = credentials().admin_token
        pod = stored(SIDECAR)
        sidecar = pod["spec"]["initContainers"][-1]
        assert "httpHeaders" not in sidecar["startupProbe"]["httpGet"]
        assert "httpHeaders" not in sidecar["livenessProbe"]["httpGet"]
        assert sidecar["readinessProbe"]["httpGet"]["httpHeaders"] == [
            {"name": "Authorization", "value": f"Bearer {token}"}
        ]
        container = main(pod)
        assert container["readinessProbe"]["httpGet"]["httpHeaders"][0]["value"] == (
            f"Bearer {token}"
        )

    def test_the_workspace_container_switches_to_supervise_opencode(self) -> None:
        container = main(stored(SIDECAR))
        names = env(container)
        assert names["AGENTD_SIDECAR_MODE"]["value"] == "1"
        assert names["OPENCODE_CONFIG"]["value"] == "/agentd-config/agent-config.json"
        assert container["livenessProbe"]["tcpSocket"] == {"port": 4096}
        assert mounts_of(container, "agentd-config") == [
            {"name": "agentd-config", "mountPath": "/agentd-config", "readOnly": True}
        ]
        assert mounts_of(container, "agentd-secrets") == []

    def test_bootstrap_and_materialize_move_into_the_sidecar(self) -> None:
        names = list(inits(stored(SIDECAR)))
        assert names == [PLATFORM_INIT, SIDECAR_CONTAINER]

    def test_the_two_sidecar_stores_are_memory_backed(self) -> None:
        volumes = {v["name"]: v for v in stored(SIDECAR)["spec"]["volumes"]}
        assert volumes["agentd-config"]["emptyDir"] == {"medium": "Memory", "sizeLimit": "8Mi"}
        assert volumes["agentd-secrets"]["emptyDir"] == {"medium": "Memory", "sizeLimit": "16Mi"}


class TestBuildFailures:
    def test_without_an_agentd_image_the_pod_build_fails_naming_the_value(self) -> None:
        for settings in (WorkspaceSettings(), WorkspaceSettings(agentd_sidecar=True)):
            with pytest.raises(PodBuildError) as caught:
                desired_pod(workspace(), settings, credentials=credentials())
            assert "agentdDelivery.image" in str(caught.value)
            assert "--agentd-image" in str(caught.value)


class TestRuntimeClass:
    @pytest.mark.parametrize(
        ("default", "override", "expected"),
        [
            ("gvisor", None, "gvisor"),
            (None, None, None),
            ("gvisor", "runc", "runc"),
            ("gvisor", "", None),
        ],
    )
    def test_runtime_class_resolution(
        self, default: str | None, override: str | None, expected: str | None
    ) -> None:
        settings = dataclasses.replace(SINGLE, default_runtime_class=default)
        spec = {} if override is None else {"runtimeClass": override}
        assert stored(settings, **spec)["spec"].get("runtimeClassName") == expected


class TestSetupInit:
    def test_packages_become_a_quoted_setup_script_before_bootstrap(self) -> None:
        pod = stored(packages=[{"manager": "pip", "requirements": ["x;rm -rf /", "y'z"]}])
        names = list(inits(pod))
        assert names == [PLATFORM_INIT, "workspace-setup", PLATFORM_BOOTSTRAP, PLATFORM_MATERIALIZE]
        script = inits(pod)["workspace-setup"]["command"][2]
        assert "pip install --target=/workspace/packages -- 'x;rm -rf /' 'y'\\''z'" in script

    def test_no_packages_no_setup_init(self) -> None:
        assert "workspace-setup" not in inits(stored(packages=[{"requirements": []}]))

    def test_an_unknown_package_manager_fails_naming_the_field(self) -> None:
        with pytest.raises(PodBuildError, match=r"spec\.packages\[0\]\.manager 'cargo'"):
            desired_pod(
                workspace(packages=[{"manager": "cargo", "requirements": ["x"]}]),
                SINGLE,
                credentials=credentials(),
            )
