"""``wspin pins resolve``: what an operator sees when checking a release."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.kubeapi import KubeServer
from tests.webhook.pins.registry_server import OciRegistry
from webhook import pins_cli
from wspin.core.kinds import CONFIGMAPS, NAMESPACES
from wspin.kube.client import Kube
from wspinctl import cli


@pytest.fixture(autouse=True)
def _restore_root_logging() -> Iterator[None]:
    """The command installs its JSON log handler on the root logger; undo that afterwards."""
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)


def run(argv: list[str]) -> int:
    """The console script's own entry point, as an operator runs it."""
    return cli.main(argv)


def test_pins_is_a_wspin_subcommand() -> None:
    assert cli.COMMANDS["pins"][0]() is pins_cli.register


def test_no_cluster_is_a_plain_flag_that_never_swallows_the_image(
    oci_registry: OciRegistry, capsys: pytest.CaptureFixture[str]
) -> None:
    image = oci_registry.ref("release")
    assert run(["pins", "resolve", "--no-cluster", image, "--artifact", "agentd"]) == 0
    assert f"image:         {image}" in capsys.readouterr().out
    assert run(["pins", "resolve", "--no-cluster=true", image, "--artifact", "agentd"]) == 0


def test_no_cluster_false_still_uses_the_cluster(
    oci_registry: OciRegistry, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "no-such-kubeconfig"
    argv = ["pins", "resolve", oci_registry.ref("release"), "--no-cluster=false"]
    assert run([*argv, "--kubeconfig", str(missing)]) == 1
    assert "cannot load Kubernetes credentials" in capsys.readouterr().err


def test_a_value_on_no_cluster_that_is_not_a_boolean_is_a_usage_error_naming_the_spelling(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as exited:
        run(["pins", "resolve", "--no-cluster=maybe", "ghcr.io/x/agentd@sha256:" + "a" * 64])
    assert exited.value.code == 1
    err = capsys.readouterr().err
    assert "--no-cluster is a plain flag: pass --no-cluster" in err
    assert "--no-cluster=false" in err


def test_resolve_prints_the_pins_their_source_and_the_override_flags(
    oci_registry: OciRegistry, capsys: pytest.CaptureFixture[str]
) -> None:
    image = oci_registry.ref("release", tag="v1.2.0")
    status = run(["pins", "resolve", image, "--artifact", "opencode", "--no-cluster"])
    out = capsys.readouterr().out
    assert status == 0
    assert "source:        registry" in out
    assert f"image:         {image}" in out
    assert f"sha256-amd64:  {'c' * 64}" in out
    assert f"sha256-arm64:  {'d' * 64}" in out
    assert f"--opencode-binary-sha256-arm64={'d' * 64}" in out


def test_without_an_artifact_only_the_pins_the_image_carries_are_shown(
    oci_registry: OciRegistry, capsys: pytest.CaptureFixture[str]
) -> None:
    image = oci_registry.ref("agentd-only")
    assert run(["pins", "resolve", image, "--no-cluster"]) == 0
    out = capsys.readouterr().out
    assert "artifact:      agentd" in out
    assert f"sha256-amd64:  {'a' * 64}" in out
    assert "opencode" not in out


def test_without_an_artifact_a_release_carrying_both_shows_both(
    oci_registry: OciRegistry, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run(["pins", "resolve", oci_registry.ref("release"), "--no-cluster"]) == 0
    out = capsys.readouterr().out
    assert "artifact:      agentd" in out
    assert "artifact:      opencode" in out
    assert f"--opencode-binary-sha256-arm64={'d' * 64}" in out


def test_an_image_without_pins_exits_1_with_each_artifacts_error(
    oci_registry: OciRegistry, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run(["pins", "resolve", oci_registry.ref("bare"), "--no-cluster"]) == 1
    err = capsys.readouterr().err
    assert "error: agentd pins: the image index" in err
    assert "error: opencode pins: the image index" in err
    assert err.count("fix: not delivery-compatible") == 2


def test_resolve_of_a_tag_only_image_exits_1_with_the_fix(
    capsys: pytest.CaptureFixture[str],
) -> None:
    status = run(["pins", "resolve", "ghcr.io/x/agentd:v1", "--artifact", "agentd", "--no-cluster"])
    err = capsys.readouterr().err
    assert status == 1
    assert "error: agentd delivery: --agentd-image must be pinned by digest" in err
    assert "fix: " in err


def test_an_unloadable_kubeconfig_fails_first_naming_the_artifact(
    oci_registry: OciRegistry, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "no-such-kubeconfig"
    image = oci_registry.ref("release")
    status = run(["pins", "resolve", image, "--artifact", "agentd", "--kubeconfig", str(missing)])
    err = capsys.readouterr().err
    assert status == 1
    assert "error: agentd pins: cannot load Kubernetes credentials" in err
    assert "--no-cluster" in err


async def test_resolve_falls_back_to_the_cache_in_pod_namespace_and_never_writes_it(
    kube: Kube,
    namespace: str,
    kube_server: KubeServer,
    kubeconfig: Path,
    oci_registry: OciRegistry,
    dead_registry: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    image = oci_registry.ref("release", host=dead_registry)
    data = {"image": image, "sha256-amd64": "e" * 64, "sha256-arm64": "f" * 64}
    await kube.create(
        CONFIGMAPS,
        {"metadata": {"name": "llmsafespaces-agentd-pins", "namespace": namespace}, "data": data},
        namespace,
    )
    monkeypatch.setenv("POD_NAMESPACE", namespace)
    kube_server.writes.clear()
    argv = ["pins", "resolve", image, "--artifact", "agentd", "--kubeconfig", str(kubeconfig)]
    # The command runs its own event loop; this test's loop keeps serving the API meanwhile.
    assert await asyncio.to_thread(run, argv) == 0
    out = capsys.readouterr().out
    assert "source:        cache" in out
    assert f"sha256-amd64:  {'e' * 64}" in out
    assert kube_server.writes == []


async def test_a_registry_success_does_not_write_the_cache(
    kube: Kube,
    namespace: str,
    kube_server: KubeServer,
    kubeconfig: Path,
    oci_registry: OciRegistry,
    capsys: pytest.CaptureFixture[str],
) -> None:
    kube_server.writes.clear()
    image = oci_registry.ref("release")
    argv = ["pins", "resolve", image, "--artifact", "opencode", "--kubeconfig", str(kubeconfig)]
    argv += ["--namespace", namespace]
    assert await asyncio.to_thread(run, argv) == 0
    assert "source:        registry" in capsys.readouterr().out
    assert kube_server.writes == []
    assert await kube.get_or_none(CONFIGMAPS, "llmsafespaces-opencode-pins", namespace) is None


@pytest.mark.parametrize("pod_namespace", [None, ""])
async def test_an_unset_or_empty_pod_namespace_reads_the_cache_in_llmsafespaces(
    pod_namespace: str | None,
    kube: Kube,
    kube_server: KubeServer,
    kubeconfig: Path,
    oci_registry: OciRegistry,
    dead_registry: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # kube_server: the test API server only; a real cluster's llmsafespaces is not ours.
    if pod_namespace is None:
        monkeypatch.delenv("POD_NAMESPACE", raising=False)
    else:
        monkeypatch.setenv("POD_NAMESPACE", pod_namespace)
    await kube.create(NAMESPACES, {"metadata": {"name": "llmsafespaces"}})
    image = oci_registry.ref("release", host=dead_registry)
    data = {"image": image, "sha256-amd64": "e" * 64, "sha256-arm64": "f" * 64}
    await kube.create(
        CONFIGMAPS,
        {"metadata": {"name": "llmsafespaces-agentd-pins"}, "data": data},
        "llmsafespaces",
    )
    argv = ["pins", "resolve", image, "--artifact", "agentd", "--kubeconfig", str(kubeconfig)]
    assert await asyncio.to_thread(run, argv) == 0
    assert "source:        cache" in capsys.readouterr().out
