"""The launch request for one slot: cloud-init, shape, architecture, tags and client token.

Every problem is a ``ConfigurationError`` naming the fix, found before any cloud call
(``check_slot`` runs before the token is stored, so a bad spec never leaves a stored token).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass

from controller.relay.artifact import SHA_FLAGS, artifact_sha256
from controller.relay.cloudinit import CloudInitError, CloudInitInput, render
from controller.relay.drivers.base import (
    TAG_LAUNCH,
    TAG_TOKEN_REF,
    ConfigurationError,
    LaunchRequest,
    TokenRef,
    TokenSlot,
    vm_tags,
)
from controller.relay.drivers.providers import (
    UnknownShape,
    arch_for_shape,
    binary_name,
    default_shape,
)
from controller.relay.replacement import TAG_REPLACES
from controller.relay.spec import ProviderSpec
from controller.settings import RelayArtifactConfig
from wspin.core.contract import Arch


def client_token(uid: str, provider: str, vm_token: str) -> str:
    """The launch's idempotency key: same CR, slot and VM token → same key → same VM.

    The VM token changes when a slot gets a new VM (rotation, replacement), so the key does
    too; a retry after a crash reuses both. It is a one-way hash: the token cannot be read back.
    """
    token_digest = hashlib.sha256(vm_token.encode()).hexdigest()
    return hashlib.sha256(f"{uid}/{provider}/{token_digest}".encode()).hexdigest()[:64]


@dataclass(frozen=True)
class SlotLaunch:
    """What ``check_slot`` found: the shape, its architecture and the binary's pin."""

    shape: str
    arch: Arch
    sha256: str


def check_slot(
    slot: ProviderSpec,
    artifacts: RelayArtifactConfig,
    expected_credentials: Mapping[str, str],
    upstream_url: str,
) -> SlotLaunch:
    """Shape, architecture and pin for ``slot``, and whether the user data can be rendered;
    raises ``ConfigurationError`` naming the fix."""
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
    checked = SlotLaunch(shape=shape, arch=arch, sha256=sha256)
    _user_data(checked, upstream_url, artifacts, _PROBE_FETCH)
    return checked


_PROBE_FETCH = "true"
"""A stand-in fetch command: ``check_slot`` renders the user data before a token is stored."""


def _user_data(
    checked: SlotLaunch, upstream_url: str, artifacts: RelayArtifactConfig, fetch: str
) -> str:
    try:
        return render(
            CloudInitInput(
                upstream_url=upstream_url,
                token_fetch=fetch,
                artifact_urls=artifacts.urls,
                artifact_sha256=checked.sha256,
                binary_name=binary_name(checked.arch),
            )
        )
    except CloudInitError as err:
        raise ConfigurationError(f"cloud-init: {err.message}", err.fix) from err


def launch_tags(slot: ProviderSpec, *, uid: str, cluster: str, vm_token: str) -> dict[str, str]:
    """The tags the VM and its stored token carry (``vm_tags`` plus the launch tag)."""
    launch = client_token(uid, slot.provider, vm_token)
    return vm_tags(cluster=cluster, owner_uid=uid, provider=slot.provider) | {TAG_LAUNCH: launch}


def token_slot(slot: ProviderSpec, *, uid: str, cluster: str, vm_token: str) -> TokenSlot:
    """Where ``Driver.store_token`` files this launch's token."""
    tags = launch_tags(slot, uid=uid, cluster=cluster, vm_token=vm_token)
    return TokenSlot(owner_uid=uid, launch=tags[TAG_LAUNCH], region=slot.region, tags=tags)


def build_request(
    slot: ProviderSpec,
    *,
    uid: str,
    cluster: str,
    upstream_url: str,
    vm_token: str,
    token_ref: TokenRef,
    artifacts: RelayArtifactConfig,
    expected_credentials: Mapping[str, str],
    replaces: str = "",
) -> LaunchRequest:
    """The launch request for ``slot`` (``replaces``: the VM a replacement launches beside);
    the user data reads the token ``token_ref`` names, never ``vm_token`` itself. Raises
    ``ConfigurationError`` naming the fix."""
    checked = check_slot(slot, artifacts, expected_credentials, upstream_url)
    user_data = _user_data(checked, upstream_url, artifacts, token_ref.fetch)
    tags = launch_tags(slot, uid=uid, cluster=cluster, vm_token=vm_token)
    tags[TAG_TOKEN_REF] = token_ref.reference
    if replaces:
        tags[TAG_REPLACES] = replaces
    return LaunchRequest(
        name=f"relay-{slot.provider}",
        region=slot.region,
        shape=checked.shape,
        cloud_init=user_data,
        tags=tags,
        client_token=tags[TAG_LAUNCH],
        arch=checked.arch,
    )
