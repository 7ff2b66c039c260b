"""An in-process cloud for the demo and the tests, behind the same Protocol as ``aws``/``oci``.

It simulates what the reconciler and orphan detector must survive in a real cloud: regions as
separate namespaces, tags, a pending→running delay, a public IP that shows up after the VM
runs, terminated VMs that keep listing for a while, a listing that lags behind a destroy,
and errors injected per method, region and call number. Time comes from a clock the caller
controls (``ManualClock`` in tests), so every behaviour is deterministic: nothing really sleeps.
"""

from __future__ import annotations

import asyncio
import base64
import itertools
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Any

from controller.relay.drivers.base import (
    TAG_OWNER_UID,
    TAG_PROVIDER,
    CapacityError,
    CloudInstance,
    ConfigurationError,
    DriverError,
    InstanceStatus,
    ProvisionRequest,
    ProvisionResult,
    ProvisionTimeout,
    VMState,
    is_managed,
    vm_tags,
)
from controller.relay.shapes import UnknownShape, arch_for_shape

Sleep = Callable[[float], Awaitable[None]]
Hook = Callable[[str], Awaitable[None]]


class ManualClock:
    """A clock that moves only when told: ``sleep`` advances it and yields to the loop once."""

    def __init__(self, start: datetime | None = None) -> None:
        self.current = start or datetime(2026, 1, 1, tzinfo=UTC)

    def now(self) -> datetime:
        return self.current

    def advance(self, seconds: float) -> None:
        self.current += timedelta(seconds=seconds)

    async def sleep(self, seconds: float) -> None:
        self.advance(seconds)
        await asyncio.sleep(0)


@dataclass
class FakeVM:
    instance_id: str
    region: str
    shape: str
    name: str
    tags: dict[str, str]
    launched_at: datetime
    public_ip: str
    user_data: str = ""
    running_at: datetime | None = None
    ip_at: datetime | None = None
    terminated_at: datetime | None = None
    stale_lists: int = 0
    """A destroyed VM keeps listing as it was for this many more list calls."""
    stopped: bool = False


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
    """One provider's cloud. Implements ``ProviderDriver``; every knob is a public field."""

    provider: str = "aws"
    clock: Callable[[], datetime] = field(default_factory=lambda: ManualClock().now)
    sleep: Sleep = asyncio.sleep
    boot_seconds: float = 0.0
    """Seconds from launch to ``running``."""
    ip_delay_seconds: float = 0.0
    """Seconds from ``running`` until the public IP shows (OCI assigns it late)."""
    provision_timeout_seconds: float = 300.0
    poll_seconds: float = 10.0
    terminate_on_failed_wait: bool = True
    """AWS terminates a VM whose wait failed; OCI leaves it for adoption to find."""
    terminated_retention_seconds: float = 3600.0
    list_lag: int = 0
    """A destroyed VM still lists as before for this many list calls (eventual consistency)."""
    destroy_unknown_error: bool = False
    """Destroy of an unknown ID: error (AWS malformed/nonexistent ID) or no-op (OCI 404)."""
    region_quota: int | None = None
    """Live VMs allowed per region; launching beyond it is a capacity error."""
    validate_arch: bool = True
    id_prefix: str = "i-"
    on_list: Hook | None = None
    on_provision: Hook | None = None
    calls: list[Call] = field(default_factory=list)
    vms: dict[str, dict[str, FakeVM]] = field(default_factory=dict)
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
        state: VMState = "running",
        age_seconds: float = 0.0,
        public_ip: str | None = None,
        managed: bool = True,
        tags: dict[str, str] | None = None,
    ) -> str:
        """Put a VM straight into the cloud (legacy, foreign or leaked ones); returns its ID."""
        all_tags = dict(tags or {})
        if managed:
            all_tags.update(vm_tags(owner_uid, provider))
        now = self.clock()
        vm = self._new_vm(region, "seeded", "seeded", all_tags, now - _secs(age_seconds), "")
        vm.running_at = vm.ip_at = vm.launched_at
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

    def calls_of(self, method: str) -> list[Call]:
        return [c for c in self.calls if c.method == method]

    # -- ProviderDriver -----------------------------------------------------------------------

    async def provision(self, request: ProvisionRequest) -> ProvisionResult:
        decoded = base64.b64decode(request.cloud_init).decode(errors="replace")
        self.calls.append(
            Call(
                "provision",
                {
                    "name": request.name,
                    "region": request.region,
                    "shape": request.shape,
                    "owner_uid": request.owner_uid,
                    "provider": request.provider,
                    "client_token": request.client_token,
                    "user_data": request.cloud_init,
                    "user_data_decoded": decoded,
                },
            )
        )
        self._maybe_fail("provision", request.region)
        if self.on_provision is not None:
            await self.on_provision(request.region)
        self._check_shape(request)
        existing = self._by_client_token(request.client_token)
        vm = existing or self._launch(request)
        return await self._wait_running(vm)

    async def destroy(self, instance_id: str, region: str) -> None:
        self.calls.append(Call("destroy", {"instance_id": instance_id, "region": region}))
        self._maybe_fail("destroy", region)
        vm = self.vms.get(region, {}).get(instance_id)
        if vm is None:
            if self.destroy_unknown_error:
                raise DriverError(f"fake cloud: no instance {instance_id!r} in {region}")
            return
        if vm.terminated_at is None:
            vm.terminated_at = self.clock()
            vm.stale_lists = self.list_lag

    async def get_status(self, instance_id: str, region: str) -> InstanceStatus:
        self.calls.append(Call("get_status", {"instance_id": instance_id, "region": region}))
        self._maybe_fail("get_status", region)
        vm = self.vms.get(region, {}).get(instance_id)
        if vm is None:
            return InstanceStatus(instance_id, "not-found")
        return InstanceStatus(instance_id, self._state(vm), self._ip(vm))

    async def list_instances(self, region: str) -> list[CloudInstance]:
        number = self._count("list_instances")
        self.calls.append(Call("list_instances", {"region": region}))
        if self.on_list is not None:
            await self.on_list(region)
        self._maybe_fail("list_instances", region, number)
        self._expire(region)
        listed = []
        for vm in self.vms.get(region, {}).values():
            if not is_managed(vm.tags):
                continue
            state = self._state(vm)
            if vm.terminated_at is not None and vm.stale_lists > 0:
                vm.stale_lists -= 1
                state = "running"
            listed.append(
                CloudInstance(
                    instance_id=vm.instance_id,
                    region=region,
                    state=state,
                    public_ip=self._ip(vm),
                    owner_uid=vm.tags.get(TAG_OWNER_UID, ""),
                    provider=vm.tags.get(TAG_PROVIDER, ""),
                    launched_at=vm.launched_at,
                )
            )
        return listed

    # -- internals ----------------------------------------------------------------------------

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

    def _check_shape(self, request: ProvisionRequest) -> None:
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
                if vm.tags.get("client-token") == token and vm.terminated_at is None:
                    return vm  # a dead launch is not replayed (the aws driver moves past it)
        return None

    def _launch(self, request: ProvisionRequest) -> FakeVM:
        region_vms = self.vms.get(request.region, {})
        if self.region_quota is not None:
            live = sum(1 for vm in region_vms.values() if self._state(vm) != "terminated")
            if live >= self.region_quota:
                raise CapacityError(
                    f"fake cloud: instance quota of {self.region_quota} reached in {request.region}"
                )
        tags = vm_tags(request.owner_uid, request.provider) | {"Name": request.name}
        if request.client_token:
            tags["client-token"] = request.client_token
        vm = self._new_vm(
            request.region, request.shape, request.name, tags, self.clock(), request.cloud_init
        )
        vm.running_at = vm.launched_at + _secs(self.boot_seconds)
        vm.ip_at = vm.running_at + _secs(self.ip_delay_seconds)
        return vm

    def _new_vm(
        self,
        region: str,
        shape: str,
        name: str,
        tags: dict[str, str],
        launched_at: datetime,
        user_data: str,
    ) -> FakeVM:
        n = next(self._ids)
        vm = FakeVM(
            instance_id=f"{self.id_prefix}{n:012x}",
            region=region,
            shape=shape,
            name=name,
            tags=tags,
            launched_at=launched_at,
            public_ip=f"100.{64 + (n >> 16) % 64}.{(n >> 8) % 256}.{n % 256}",
            user_data=user_data,
        )
        self.vms.setdefault(region, {})[vm.instance_id] = vm
        return vm

    async def _wait_running(self, vm: FakeVM) -> ProvisionResult:
        deadline = vm.launched_at + _secs(self.provision_timeout_seconds)
        while True:
            state, ip = self._state(vm), self._ip(vm)
            if state == "running" and ip:
                return ProvisionResult(vm.instance_id, ip)
            if state in ("terminated", "stopped"):
                raise ConfigurationError(f"fake cloud: instance {vm.instance_id} became {state}")
            if self.clock() >= deadline:
                if self.terminate_on_failed_wait and vm.terminated_at is None:
                    vm.terminated_at = self.clock()
                raise ProvisionTimeout(
                    f"fake cloud: instance {vm.instance_id} not running with a public IP "
                    f"after {self.provision_timeout_seconds:.0f}s"
                )
            await self.sleep(self.poll_seconds)

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


def with_provider(cloud: FakeCloud, provider: str) -> FakeCloud:
    """A fresh cloud with the same settings for another provider (``--relay-cloud=fake``)."""
    return replace(cloud, provider=provider, calls=[], vms={}, _injections=[], _counts={})
