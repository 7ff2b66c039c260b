"""Carrying out a fleet plan: destroys first, then the VM tokens, then launches.

Each action's outcome lands in the status entries the plan proposed: a launch that returned
an id becomes the slot's VM (or its replacement); a configuration error becomes a
``provisioning-failed`` placeholder counting towards the breaker; a retryable error a
placeholder that backs off; a destroy that failed puts back the entry it would have removed,
so nothing is forgotten, keeps its VM's token, holds back the launch it was making room for,
and leaves a replacement it was handing the slot to a replacement.

The VM token is stored (in the Secret, then in the cloud's secret store the VM reads it from
at boot) before the launch that boots with it: a crash between the two leaves
a token nobody uses, never a VM whose token nobody knows (relay-proxy would answer 401 to
the router forever). Token values never reach a log line, an event or an error message.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import datetime

from controller.relay.actions import Destroy, FleetPlan, Launch
from controller.relay.deps import RelayDeps
from controller.relay.drivers.base import ConfigurationError, DriverError, truncate
from controller.relay.entries import failure_entry, launched_entry, retry_entry
from controller.relay.request import build_request, check_slot, token_slot
from controller.relay.spec import Instance, RelaySpec, has_real_id, replacement_placeholder_id
from controller.relay.tokens import generate_token, read_tokens, write_tokens
from wspin.core.errors import KubeAPIError
from wspin.core.logs import fields

log = logging.getLogger(__name__)

ROTATION_REASONS = frozenset({"gone", "unhealthy", "manual"})


@dataclass
class ExecutionResult:
    instances: list[Instance]
    tokens: dict[str, str] = field(default_factory=dict)
    failures: list[str] = field(default_factory=list)
    """What did not happen this pass (failed destroys): the pass is retried."""
    rotation_failed: bool = False
    destroyed: list[str] = field(default_factory=list)
    """VMs destroyed this pass."""


async def execute(
    deps: RelayDeps, plan: FleetPlan, *, spec: RelaySpec, uid: str, cluster: str, now: datetime
) -> ExecutionResult:
    outcome = ExecutionResult(instances=[dict(i) for i in plan.instances])
    blocked: set[tuple[str, bool]] = set()
    kept_keys: set[str] = set()
    for destroy in plan.destroys:
        if await destroy_vm(
            deps, destroy.provider, destroy.instance_id, destroy.region, destroy.reason
        ):
            outcome.destroyed.append(destroy.instance_id)
            if destroy.reason in ROTATION_REASONS:
                deps.metrics.rotations.labels(
                    provider=destroy.provider, reason=destroy.reason
                ).inc()
            continue
        outcome.failures.append(f"{destroy.instance_id}: destroy failed ({destroy.reason})")
        outcome.rotation_failed |= destroy.reason == "manual"
        if destroy.token_key:
            kept_keys.add(destroy.token_key)  # the VM still runs with it
        _keep(outcome, destroy, blocked)
    for provider in plan.replaced:
        log.info("relay VM is gone; launching a replacement", extra=fields(provider=provider))
        deps.metrics.rotations.labels(provider=provider, reason="gone").inc()
    for provider, seconds in plan.provisioned:
        deps.metrics.provision_duration.labels(provider=provider).observe(seconds)
    launches = [a for a in plan.launches if (a.slot.provider, bool(a.replaces)) not in blocked]
    outcome.tokens = await read_tokens(deps.kube, deps.namespace)
    stored = await _store_tokens(deps, outcome.tokens, plan.drop_tokens - kept_keys, launches)
    for action in launches:
        entry = await _launch(
            deps, action, outcome.tokens, stored, spec=spec, uid=uid, cluster=cluster, now=now
        )
        _place(outcome.instances, entry)
    return outcome


def _keep(outcome: ExecutionResult, action: Destroy, blocked: set[tuple[str, bool]]) -> None:
    """Put back what a failed destroy would have removed."""
    if action.keep is None:
        return
    kept = dict(action.keep)
    for entry in outcome.instances:
        if action.promotes and entry.get("id") == action.promotes:
            entry["replaces"] = action.instance_id  # still the replacement, not the slot's VM
    if action.blocks:
        role = (action.blocks, bool(kept.get("replaces")))
        blocked.add(role)
        for index, entry in enumerate(outcome.instances):
            if _role(entry) == role and not has_real_id(entry):
                outcome.instances[index] = kept
                return
    outcome.instances.append(kept)


def _role(entry: Instance) -> tuple[str, bool]:
    """(provider, is a replacement): which of its slot's two entries ``entry`` is."""
    return (str(entry.get("provider") or ""), bool(entry.get("replaces")))


def _place(instances: list[Instance], entry: Instance) -> None:
    """Put ``entry`` where the placeholder of its slot and role is."""
    for index, current in enumerate(instances):
        if _role(current) == _role(entry) and not has_real_id(current):
            instances[index] = entry
            return
    instances.append(entry)


async def _store_tokens(
    deps: RelayDeps, tokens: dict[str, str], drop: set[str], launches: list[Launch]
) -> bool:
    """Drop the tokens of replaced VMs, mint one for each slot about to launch without one,
    and store them; False when the Secret could not be written (nothing may launch then)."""
    changed = False
    for key in drop:
        changed |= tokens.pop(key, None) is not None
    for action in launches:
        if action.key not in tokens:
            tokens[action.key] = generate_token()
            changed = True
    if not changed:
        return True
    try:
        await write_tokens(deps.kube, deps.namespace, tokens)
    except KubeAPIError as err:
        log.warning("cannot store relay VM tokens", extra=fields(error=err.message))
        return False
    return True


async def _launch(
    deps: RelayDeps,
    action: Launch,
    tokens: dict[str, str],
    stored: bool,
    *,
    spec: RelaySpec,
    uid: str,
    cluster: str,
    now: datetime,
) -> Instance:
    if not stored:
        entry = retry_entry(
            action.slot,
            action.attempts,
            action.launch_failures + 1,
            "cannot store the VM token",
            now,
        )
    else:
        entry = await _launch_vm(deps, action, tokens, spec=spec, uid=uid, cluster=cluster, now=now)
    if action.token_key:
        entry["tokenKey"] = action.token_key
    if action.replaces:
        entry["replaces"] = action.replaces
        if not has_real_id(entry):
            entry["id"] = replacement_placeholder_id(action.slot.provider)
    return entry


async def _launch_vm(
    deps: RelayDeps,
    action: Launch,
    tokens: dict[str, str],
    *,
    spec: RelaySpec,
    uid: str,
    cluster: str,
    now: datetime,
) -> Instance:
    slot = action.slot
    driver = deps.drivers[slot.provider]
    vm_token = tokens[action.key]
    try:
        check_slot(slot, deps.artifacts, deps.expected_credentials, spec.upstream_url)
        token_ref = await driver.store_token(
            token_slot(slot, uid=uid, cluster=cluster, vm_token=vm_token), vm_token
        )
        request = build_request(
            slot,
            uid=uid,
            cluster=cluster,
            upstream_url=spec.upstream_url,
            vm_token=vm_token,
            token_ref=token_ref,
            artifacts=deps.artifacts,
            expected_credentials=deps.expected_credentials,
            replaces=action.replaces,
        )
        instance_id = await driver.launch(request)
    except ConfigurationError as err:
        log.warning(
            "relay VM cannot be launched: provider configuration error",
            extra=fields(
                provider=slot.provider, attempts=action.attempts + 1, error=truncate(str(err))
            ),
        )
        return failure_entry(slot, action.attempts + 1, str(err), now)
    except DriverError as err:
        log.warning(
            "relay VM launch failed; will retry",
            extra=fields(
                provider=slot.provider,
                failures=action.launch_failures + 1,
                error=truncate(str(err)),
            ),
        )
        return retry_entry(
            slot, action.attempts, action.launch_failures + 1, truncate(str(err)), now
        )
    log.info(
        "relay VM launched",
        extra=fields(
            provider=slot.provider,
            instance=instance_id,
            region=slot.region,
            replaces=action.replaces or None,
        ),
    )
    return launched_entry(slot, instance_id, now, action.launch_failures)


async def destroy_vm(
    deps: RelayDeps, provider: str, instance_id: str, region: str, why: str
) -> bool:
    """Destroy one VM; False (logged) when it could not be."""
    driver = deps.drivers.get(provider)
    if driver is None:
        log.warning(
            "no driver to destroy relay VM; manual cleanup required",
            extra=fields(provider=provider, instance=instance_id, region=region, reason=why),
        )
        return False
    try:
        await driver.destroy(instance_id, region)
    except DriverError as err:
        log.warning(
            "destroying relay VM failed",
            extra=fields(
                provider=provider, instance=instance_id, reason=why, error=truncate(str(err))
            ),
        )
        return False
    deps.destroyed.add(instance_id)
    log.info(
        "destroyed relay VM",
        extra=fields(provider=provider, instance=instance_id, region=region, reason=why),
    )
    return True
