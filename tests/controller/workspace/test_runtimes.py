"""Bare runtime names resolve through the runtime catalogue (runs unchanged on a real cluster)."""

from __future__ import annotations

from typing import Any

from controller.workspace.pod.builder import ANNOTATION_RUNTIME_ENV
from controller.workspace.reconcile.reconciler import RUNTIME_NOT_FOUND
from tests.controller.workspace.conftest import Harness
from wspin.core.kinds import PODS

DIGEST = "sha256:" + "cd" * 32


def entry(image: str) -> dict[str, Any]:
    return {"metadata": {"name": "python"}, "spec": {"image": image, "language": "python"}}


def ready(ws: dict[str, Any]) -> dict[str, Any]:
    found: list[dict[str, Any]] = [c for c in ws["status"]["conditions"] if c["type"] == "Ready"]
    return found[0]


async def test_a_published_runtime_runs_its_pinned_image(harness: Harness) -> None:
    image = f"ghcr.io/acme/runtime-python:3.12@{DIGEST}"
    harness.use(runtimes={"python": entry(image)})
    await harness.apply()
    await harness.reconcile()
    pod = await harness.kube.get(PODS, await harness.pod_name(), harness.namespace)
    (main,) = [c for c in pod["spec"]["containers"] if c["name"] == "workspace"]
    assert main["image"] == image
    assert pod["metadata"]["annotations"][ANNOTATION_RUNTIME_ENV] == "python"


async def test_an_unknown_runtime_builds_no_pod_and_says_why(harness: Harness) -> None:
    harness.use(runtimes={})
    await harness.apply()
    await harness.reconcile()
    ws = await harness.workspace()
    assert ws["status"]["phase"] == "Pending"
    assert ready(ws)["status"] == "False" and ready(ws)["reason"] == RUNTIME_NOT_FOUND
    assert "names no RuntimeEnvironment" in ready(ws)["message"]
    assert await harness.kube.get_or_none(PODS, await harness.pod_name(), harness.namespace) is None


async def test_a_runtime_removed_later_leaves_the_running_pod_alone(harness: Harness) -> None:
    harness.use(runtimes={"python": entry(f"ghcr.io/acme/py@{DIGEST}")})
    await harness.apply()
    await harness.reconcile()
    pod_name = await harness.pod_name()
    before = await harness.kube.get(PODS, pod_name, harness.namespace)
    harness.use(runtimes={})
    await harness.reconcile()
    after = await harness.kube.get(PODS, pod_name, harness.namespace)
    assert after["metadata"]["uid"] == before["metadata"]["uid"]
    assert ready(await harness.workspace())["reason"] == RUNTIME_NOT_FOUND


async def test_an_entry_that_is_not_digest_pinned_is_never_run(harness: Harness) -> None:
    harness.use(runtimes={"python": entry("ghcr.io/acme/runtime-python:3.12")})
    await harness.apply()
    await harness.reconcile()
    message = ready(await harness.workspace())["message"]
    assert "cannot be run" in message and "not digest-pinned" in message
    assert await harness.kube.get_or_none(PODS, await harness.pod_name(), harness.namespace) is None


async def test_an_image_reference_runs_as_written_without_the_catalogue(harness: Harness) -> None:
    harness.use(runtimes={})
    image = f"ghcr.io/acme/custom@{DIGEST}"
    await harness.apply(runtime=image)
    await harness.reconcile()
    pod = await harness.kube.get(PODS, await harness.pod_name(), harness.namespace)
    assert [c["image"] for c in pod["spec"]["containers"] if c["name"] == "workspace"] == [image]
