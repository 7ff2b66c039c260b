"""Launching one relay VM: the request, its idempotency key, and the in-flight launch tasks.

A cloud launch waits until the VM runs, which can take minutes. Each launch therefore runs
as its own task, so one slow VM never blocks other reconciles: a pass starts the task,
waits a few seconds for it, and if it is still running shows the slot as provisioning and
comes back later to collect the result. The launch request carries the owner tags, so a
launch whose result is lost (a crash) is found again by adoption, not launched twice.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
from collections.abc import Coroutine, Mapping
from dataclasses import dataclass
from typing import Any

from controller.relay.artifact import SHA_FLAGS, artifact_sha256
from controller.relay.cloudinit import CloudInitError, CloudInitInput, render
from controller.relay.drivers.base import ConfigurationError, ProvisionRequest, ProvisionResult
from controller.relay.shapes import UnknownShape, arch_for_shape, binary_name, default_shape
from controller.relay.spec import ProviderSpec
from controller.settings import RelayArtifactConfig


def client_token(uid: str, provider: str, vm_token: str) -> str:
    """The launch's idempotency key: same CR, slot and VM token → same key → same VM.

    The VM token changes when a slot gets a new VM (rotation, replacement), so the key does
    too; a retry after a crash reuses both. It is a one-way hash: the token cannot be read back.
    """
    token_digest = hashlib.sha256(vm_token.encode()).hexdigest()
    return hashlib.sha256(f"{uid}/{provider}/{token_digest}".encode()).hexdigest()[:64]


def build_request(
    slot: ProviderSpec,
    *,
    uid: str,
    upstream_url: str,
    vm_token: str,
    artifacts: RelayArtifactConfig,
    expected_credentials: Mapping[str, str],
) -> ProvisionRequest:
    """The launch request for ``slot``; every problem is a ``ConfigurationError`` naming the fix."""
    expected = expected_credentials.get(slot.provider, "")
    if expected and slot.credentials != expected:
        raise ConfigurationError(
            f"provider {slot.provider}: credentialsRef.name is {slot.credentials!r} but the "
            f"{slot.provider} driver reads Secret {expected!r}",
            f"set spec.providers[{slot.provider}].credentialsRef.name to {expected!r}",
        )
    shape = slot.shape or default_shape(slot.provider)
    try:
        arch = arch_for_shape(slot.provider, shape)
    except UnknownShape as err:
        raise ConfigurationError(err.message, err.fix) from err
    sha256 = artifact_sha256(artifacts, arch)
    if not sha256:
        raise ConfigurationError(
            f"no artifact SHA-256 for {arch} (shape {shape})",
            f"set {SHA_FLAGS[arch]} on the controller",
        )
    try:
        user_data = render(
            CloudInitInput(
                upstream_url=upstream_url,
                token=vm_token,
                artifact_urls=artifacts.urls,
                artifact_sha256=sha256,
                binary_name=binary_name(arch),
            )
        )
    except CloudInitError as err:
        raise ConfigurationError(f"cloud-init: {err.message}", err.fix) from err
    return ProvisionRequest(
        name=f"relay-{slot.provider}",
        region=slot.region,
        shape=shape,
        cloud_init=user_data,
        owner_uid=uid,
        provider=slot.provider,
        client_token=client_token(uid, slot.provider, vm_token),
        arch=arch,
    )


@dataclass(frozen=True)
class LaunchKey:
    uid: str
    provider: str


class Launches:
    """In-flight launches, at most one per (CR UID, provider), each in its own task."""

    def __init__(self) -> None:
        self._tasks: dict[LaunchKey, asyncio.Task[ProvisionResult]] = {}
        self._regions: dict[LaunchKey, str] = {}

    def in_flight(self, uid: str) -> set[str]:
        """Providers of ``uid`` with a launch not yet collected (running or finished)."""
        return {key.provider for key in self._tasks if key.uid == uid}

    def get(self, key: LaunchKey) -> asyncio.Task[ProvisionResult] | None:
        return self._tasks.get(key)

    def start(
        self, key: LaunchKey, launch: Coroutine[Any, Any, ProvisionResult], region: str = ""
    ) -> asyncio.Task[ProvisionResult]:
        task = asyncio.create_task(launch, name=f"relay-launch-{key.provider}-{key.uid}")
        self._tasks[key] = task
        self._regions[key] = region
        return task

    def region(self, key: LaunchKey) -> str:
        """The region ``key``'s launch was sent to ("" when unknown)."""
        return self._regions.get(key, "")

    def collect(self, key: LaunchKey) -> asyncio.Task[ProvisionResult] | None:
        """Remove and return the finished task for ``key`` (None while it still runs)."""
        task = self._tasks.get(key)
        if task is None or not task.done():
            return None
        self._regions.pop(key, None)
        return self._tasks.pop(key)

    def forget(self, uid: str) -> int:
        """Cancel ``uid``'s launches (its CR is being deleted); returns how many were still
        running. Cancelling does not stop a cloud call already sent (boto3 runs it in a
        thread), so the caller sweeps the cloud again later for the VM it may still create."""
        running = 0
        for key in [k for k in self._tasks if k.uid == uid]:
            task = self._tasks.pop(key)
            self._regions.pop(key, None)
            running += not task.done()
            task.cancel()
        return running

    async def wait(self, key: LaunchKey, seconds: float) -> bool:
        """Wait up to ``seconds`` for the launch; True when it finished. Never cancels it."""
        task = self._tasks.get(key)
        if task is None:
            return False
        if seconds > 0 and not task.done():
            await asyncio.wait({task}, timeout=seconds)
        return task.done()

    async def close(self) -> None:
        """Cancel and await every launch (shutdown); a launched VM is adopted after restart."""
        tasks = list(self._tasks.values())
        self._tasks.clear()
        self._regions.clear()
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
