"""An in-process cloud for the demo and the tests, behind the same ``Driver`` contract as
``aws``/``oci``.

It simulates what the reconciler and orphan detector must survive in a real cloud: regions as
separate namespaces, tags, a pending→running delay, a public IP that shows up after the VM
runs, terminated VMs that keep listing for a while, a listing that lags behind a destroy,
launches idempotent by client token, a secret store for the VM tokens (``tokens``: stored
before a launch, deleted with the VM), and typed errors injected per method, region and call
number. Time comes from the clock the caller passes (a fake clock in tests), so every
behaviour is deterministic. Several controllers may share one ``FakeCloud`` (two clusters
in one cloud account).
"""

from __future__ import annotations

import base64
import itertools
import shlex
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from controller.relay.drivers.base import (
    TAG_MANAGED_BY,
    TAG_TOKEN_REF,
    CloudInstance,
    ConfigurationError,
    InstanceNotFound,
    LaunchRequest,
    QuotaExceeded,
    TokenRef,
    TokenSlot,
    VMState,
    matches,
    vm_tags,
)
from controller.relay.drivers.providers import UnknownShape, arch_for_shape
from wspin.core.clock import Clock, utc_now

Hook = Callable[[str], Awaitable[None]]


@dataclass
class FakeVM:
    instance_id: str
    region: str
    shape: str
    tags: dict[str, str]
    launched_at: datetime
    public_ip: str
    client_token: str = ""
    user_data: str = ""
    running_at: datetime | None = None
    ip_at: datetime | None = None
    terminated_at: datetime | None = None
    stale_lists: int = 0
    """A destroyed VM keeps listing as it was for this many more list calls."""
    stopped: bool = False
    launch_time_known: bool = True
    """False: the cloud reports no launch time for it (the orphan sweep must still wait)."""


@dataclass(frozen=True)
class Call:
    """One recorded driver call; ``args`` holds what a test may assert on."""

    method: str
    args: dict[str, Any]


@dataclass
class _Injection:
    method: str
    error: Exception
    region: str | None
    call_number: int | None
    remaining: int


@dataclass
class FakeCloud:
    """One provider's cloud. Implements ``Driver``; every knob is a public field."""

    provider: str = "aws"
    clock: Clock = utc_now
    boot_seconds: float = 0.0
    """Seconds from launch to ``running``."""
    ip_delay_seconds: float = 0.0
    """Seconds from ``running`` until the public IP shows (OCI assigns it late)."""
    terminated_retention_seconds: float = 3600.0
    list_lag: int = 0
    """A destroyed VM still lists as before for this many list calls (eventual consistency)."""
    region_quota: int | None = None
    """Live VMs allowed per region; launching beyond it raises ``QuotaExceeded``."""
    validate_arch: bool = True
    id_prefix: str = "i-"
    on_launch: Hook | None = None
    """Awaited inside ``launch`` before the VM exists (a test can stall or crash there)."""
    on_list: Hook | None = None
    """Awaited per region inside ``list`` before it reads the VMs (a test can race it)."""
    calls: list[Call] = field(default_factory=list)
    vms: dict[str, dict[str, FakeVM]] = field(default_factory=dict)
    tokens: dict[str, str] = field(default_factory=dict)
    """The secret store: token reference → token."""
    _injections: list[_Injection] = field(default_factory=list)
    _counts: dict[str, int] = field(default_factory=dict)
    _ids: itertools.count[int] = field(default_factory=lambda: itertools.count(1))

    # -- test controls ------------------------------------------------------------------------

    def inject(
        self,
        method: str,
        error: Exception,
        *,
        region: str | None = None,
        call_number: int | None = None,
        times: int = 1,
    ) -> None:
        """Make ``method`` raise ``error`` (in ``region``, on its Nth call) ``times`` times."""
        self._injections.append(_Injection(method, error, region, call_number, times))

    def seed(
        self,
        region: str,
        *,
        owner_uid: str = "",
        provider: str = "",
        cluster: str = "",
        state: VMState = "running",
        age_seconds: float = 0.0,
        public_ip: str | None = None,
        managed: bool = True,
        tags: dict[str, str] | None = None,
        launch_time_known: bool = True,
    ) -> str:
        """Put a VM straight into the cloud (legacy, foreign or leaked ones); returns its ID."""
        all_tags = dict(tags or {})
        if managed:
            all_tags.update(vm_tags(cluster=cluster, owner_uid=owner_uid, provider=provider))
        now = self.clock()
        vm = self._new_vm(region, "seeded", all_tags, now - _secs(age_seconds), "", "")
        vm.running_at = vm.ip_at = vm.launched_at
        vm.launch_time_known = launch_time_known
        if public_ip is not None:
            vm.public_ip = public_ip
        if state == "terminated":
            vm.terminated_at = now
        elif state == "pending":
            vm.running_at = now + _secs(3600)
        elif state in ("stopped", "stopping"):
            vm.stopped = True
        return vm.instance_id

    def vm(self, instance_id: str) -> FakeVM:
        for region in self.vms.values():
            if instance_id in region:
                return region[instance_id]
        raise KeyError(instance_id)

    def live_ids(self, region: str | None = None) -> set[str]:
        """IDs of VMs really pending or running (the truth, not what a lagging list shows)."""
        regions = [self.vms.get(region, {})] if region else list(self.vms.values())
        return {
            i for r in regions for i, vm in r.items() if self._state(vm) in ("pending", "running")
        }

    def token_of(self, instance_id: str) -> str:
        """The stored token the VM reads at boot ("" when none is stored)."""
        return self.tokens.get(self.vm(instance_id).tags.get(TAG_TOKEN_REF, ""), "")

    def calls_of(self, method: str) -> list[Call]:
        return [c for c in self.calls if c.method == method]

    # -- Driver -------------------------------------------------------------------------------

    async def launch(self, request: LaunchRequest) -> str:
        decoded = base64.b64decode(request.cloud_init).decode(errors="replace")
        self.calls.append(
            Call(
                "launch",
                {
                    "name": request.name,
                    "region": request.region,
                    "shape": request.shape,
                    "tags": dict(request.tags),
                    "client_token": request.client_token,
                    "user_data": request.cloud_init,
                    "user_data_decoded": decoded,
                },
            )
        )
        self._maybe_fail("launch", request.region)
        if self.on_launch is not None:
            await self.on_launch(request.region)
        self._check_shape(request)
        existing = self._by_client_token(request.client_token)
        if existing is not None:
            return existing.instance_id  # EC2 and OCI both answer a repeated token this way
        return self._launch(request).instance_id

    async def store_token(self, slot: TokenSlot, token: str) -> TokenRef:
        self.calls.append(
            Call("store_token", {"region": slot.region, "launch": slot.launch, "tags": slot.tags})
        )
        self._maybe_fail("store_token", slot.region)
        reference = f"fake-secret/{slot.owner_uid}/{slot.launch[:32]}"
        self.tokens[reference] = token
        return TokenRef(
            reference=reference, fetch=f"fake-secret-store get {shlex.quote(reference)}"
        )

    async def describe(self, instance_id: str, region: str) -> CloudInstance:
        self.calls.append(Call("describe", {"instance_id": instance_id, "region": region}))
        self._maybe_fail("describe", region)
        self._expire(region)
        vm = self.vms.get(region, {}).get(instance_id)
        if vm is None:
            raise InstanceNotFound(f"fake cloud: no instance {instance_id!r} in {region}")
        return self._report(vm, self._state(vm))

    async def destroy(self, instance_id: str, region: str) -> None:
        self.calls.append(Call("destroy", {"instance_id": instance_id, "region": region}))
        self._maybe_fail("destroy", region)
        vm = self.vms.get(region, {}).get(instance_id)
        if vm is not None and vm.terminated_at is None:
            vm.terminated_at = self.clock()
            vm.stale_lists = self.list_lag
        if vm is not None:
            self.tokens.pop(vm.tags.get(TAG_TOKEN_REF, ""), None)

    async def list(self, tags: Mapping[str, str], regions: Sequence[str]) -> list[CloudInstance]:
        listed = []
        for region in regions:
            number = self._count("list")
            self.calls.append(Call("list", {"region": region, "tags": dict(tags)}))
            if self.on_list is not None:
                await self.on_list(region)
            self._maybe_fail("list", region, number)
            self._expire(region)
            for vm in self.vms.get(region, {}).values():
                if TAG_MANAGED_BY not in vm.tags or not matches(vm.tags, tags):
                    continue
                state = self._state(vm)
                if vm.terminated_at is not None and vm.stale_lists > 0:
                    vm.stale_lists -= 1
                    state = "running"
                listed.append(self._report(vm, state))
        return listed

    # -- internals ----------------------------------------------------------------------------

    def _report(self, vm: FakeVM, state: VMState) -> CloudInstance:
        return CloudInstance(
            instance_id=vm.instance_id,
            region=vm.region,
            state=state,
            public_ip=self._ip(vm) if state in ("pending", "running") else "",
            tags=dict(vm.tags),
            launched_at=vm.launched_at if vm.launch_time_known else None,
        )

    def _count(self, method: str) -> int:
        self._counts[method] = self._counts.get(method, 0) + 1
        return self._counts[method]

    def _maybe_fail(self, method: str, region: str, number: int | None = None) -> None:
        if number is None:
            number = self._count(method)
        for inj in self._injections:
            if inj.method != method or inj.remaining <= 0:
                continue
            if inj.region is not None and inj.region != region:
                continue
            if inj.call_number is not None and inj.call_number != number:
                continue
            inj.remaining -= 1
            raise inj.error

    def _check_shape(self, request: LaunchRequest) -> None:
        if not self.validate_arch or not request.arch:
            return
        try:
            arch = arch_for_shape(self.provider, request.shape)
        except UnknownShape as err:
            raise ConfigurationError(f"fake cloud: {err}") from err
        if arch != request.arch:
            raise ConfigurationError(
                f"fake cloud: {request.arch} image cannot boot on {arch} shape {request.shape}"
            )

    def _by_client_token(self, token: str) -> FakeVM | None:
        if not token:
            return None
        for region in self.vms.values():
            for vm in region.values():
                if vm.client_token == token:
                    return vm
        return None

    def _launch(self, request: LaunchRequest) -> FakeVM:
        region_vms = self.vms.get(request.region, {})
        if self.region_quota is not None:
            live = sum(1 for vm in region_vms.values() if self._state(vm) != "terminated")
            if live >= self.region_quota:
                raise QuotaExceeded(
                    f"fake cloud: instance quota of {self.region_quota} reached in {request.region}"
                )
        tags = dict(request.tags) | {"Name": request.name}
        vm = self._new_vm(
            request.region,
            request.shape,
            tags,
            self.clock(),
            request.cloud_init,
            request.client_token,
        )
        vm.running_at = vm.launched_at + _secs(self.boot_seconds)
        vm.ip_at = vm.running_at + _secs(self.ip_delay_seconds)
        return vm

    def _new_vm(
        self,
        region: str,
        shape: str,
        tags: dict[str, str],
        launched_at: datetime,
        user_data: str,
        client_token: str,
    ) -> FakeVM:
        n = next(self._ids)
        vm = FakeVM(
            instance_id=f"{self.id_prefix}{n:012x}",
            region=region,
            shape=shape,
            tags=tags,
            launched_at=launched_at,
            public_ip=f"100.{64 + (n >> 16) % 64}.{(n >> 8) % 256}.{n % 256}",
            client_token=client_token,
            user_data=user_data,
        )
        self.vms.setdefault(region, {})[vm.instance_id] = vm
        return vm

    def _state(self, vm: FakeVM) -> VMState:
        now = self.clock()
        if vm.terminated_at is not None:
            return "terminated"
        if vm.stopped:
            return "stopped"
        if vm.running_at is not None and now >= vm.running_at:
            return "running"
        return "pending"

    def _ip(self, vm: FakeVM) -> str:
        if vm.terminated_at is not None or vm.ip_at is None or self.clock() < vm.ip_at:
            return ""
        return vm.public_ip

    def _expire(self, region: str) -> None:
        cutoff = self.clock() - _secs(self.terminated_retention_seconds)
        region_vms = self.vms.get(region, {})
        for instance_id in [
            i
            for i, vm in region_vms.items()
            if vm.terminated_at is not None and vm.terminated_at < cutoff and vm.stale_lists <= 0
        ]:
            del region_vms[instance_id]


def _secs(seconds: float) -> timedelta:
    return timedelta(seconds=seconds)
