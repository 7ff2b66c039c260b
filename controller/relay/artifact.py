"""Checks and lookups on ``RelayArtifactConfig``: the relay-proxy mirrors and per-arch pins.

Pure: no I/O. The config value itself lives with the other settings (``controller.settings``).
Checked once at start when the relay is enabled, so an empty mirror list or a missing hash
stops the process with the flag to fix, instead of surfacing as a silent provisioning loop
or only when the first VM of that architecture is due.
"""

from __future__ import annotations

import re

from controller.relay.cloudinit import SAFE_URL
from controller.settings import RelayArtifactConfig
from wspin.core.contract import Arch
from wspin.core.errors import ConfigError

URL_FLAG = "--relay-artifact-url"
SHA_FLAGS: dict[Arch, str] = {
    "amd64": "--relay-artifact-sha256-amd64",
    "arm64": "--relay-artifact-sha256-arm64",
}
_HELM = "controller.inferenceRelay.artifact"
_SHA256 = re.compile(r"^[0-9a-fA-F]{64}$")
_URL = re.compile(r"^https?://[^/\s]+\S*$")


def artifact_sha256(config: RelayArtifactConfig, arch: Arch) -> str:
    """The pinned sha256 of ``relay-proxy-<arch>`` (lower case), "" when not configured."""
    return (config.sha256_amd64 if arch == "amd64" else config.sha256_arm64).lower()


def validate_artifacts(config: RelayArtifactConfig) -> None:
    """Raise ``ConfigError`` naming the flag and Helm value of the first broken setting.

    At least one mirror, each an http(s) URL the VM's download script accepts (no
    whitespace, quotes, backslashes or ``$``); both sha256 values exactly
    64 hex characters.
    """
    if not config.urls:
        raise ConfigError(
            f"{URL_FLAG} is empty: relay VMs would have nowhere to download relay-proxy from",
            f"set {URL_FLAG} / {_HELM}.urls to one or more comma-separated http(s) URLs",
        )
    for url in config.urls:
        if not (_URL.match(url) and SAFE_URL.match(url)):
            raise ConfigError(
                f"{URL_FLAG} item {url!r} is not an http(s) URL without whitespace, quotes, "
                "backslashes or $",
                f"set {URL_FLAG} / {_HELM}.urls to URLs like https://mirror.example/relay",
            )
    pins: tuple[tuple[Arch, str], ...] = (
        ("arm64", config.sha256_arm64),
        ("amd64", config.sha256_amd64),
    )
    for arch, value in pins:
        if not _SHA256.match(value):
            shown = f"{len(value)} characters" if value else "empty"
            raise ConfigError(
                f"{SHA_FLAGS[arch]} must be the 64-hex sha256 of relay-proxy-{arch} (got {shown})",
                f"set {SHA_FLAGS[arch]} / {_HELM}.sha256{arch.capitalize()} "
                f"to the output of sha256sum relay-proxy-{arch}",
            )
