"""Delivery configuration for agentd and opencode: its validation and the pins.

Pure: no I/O. Both images are mandatory and digest-pinned; the per-arch hashes are
both-or-neither. Image-only configuration needs pins resolved from the registry
(``needs_resolution``). The flags that fill it are declared in ``wspin.core.flags``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import ClassVar

from wspin.core.contract import AGENTD, OPENCODE, Arch, Artifact
from wspin.core.errors import ConfigError

DIGEST_PINNED = re.compile(r"@sha256:[0-9a-f]{64}$")
SHA256_HEX = re.compile(r"^[0-9a-f]{64}$")


def digest_of(image: str) -> str | None:
    """The 64-hex digest after the last ``@sha256:``, or None when the image reference has none."""
    head, sep, digest = image.rpartition("@sha256:")
    if not sep or not head or not SHA256_HEX.match(digest):
        return None
    return digest


def same_digest(left: str, right: str) -> bool:
    """Two references name the same bytes: compares digests only, so re-tags still match."""
    a, b = digest_of(left), digest_of(right)
    return a is not None and a == b


@dataclass(frozen=True)
class PinSet:
    """The per-architecture sha256 of one artifact's binary."""

    amd64: str
    arm64: str

    def for_arch(self, arch: Arch) -> str:
        return self.amd64 if arch == "amd64" else self.arm64


@dataclass(frozen=True)
class ArtifactDelivery:
    """One artifact's delivery flags as given; ``validate`` turns them into a checked value."""

    artifact: ClassVar[Artifact]
    image: str = ""
    binary_sha256_amd64: str = ""
    binary_sha256_arm64: str = ""

    @property
    def flag_prefix(self) -> str:
        return f"--{self.artifact.name}"

    @property
    def helm_prefix(self) -> str:
        return f"{self.artifact.name}Delivery"

    def _error(self, message: str, fix: str) -> ConfigError:
        return ConfigError(f"{self.artifact.name} delivery: {message}", fix)

    def validate(self) -> None:
        """Raise ConfigError naming the flag and Helm value for the first broken rule."""
        image_flag, helm = f"{self.flag_prefix}-image", self.helm_prefix
        hashes = (self.binary_sha256_amd64, self.binary_sha256_arm64)
        if not self.image:
            if any(hashes):
                raise self._error(
                    f"{image_flag} is required when binary sha256 flags are set",
                    f"set {image_flag} / {helm}.image to 'repo@sha256:<64 hex>'",
                )
            raise self._error(
                f"{image_flag} is mandatory",
                f"set {image_flag} / {helm}.image to a digest-pinned reference "
                "'repo@sha256:<64 lowercase hex>'",
            )
        if not DIGEST_PINNED.search(self.image):
            raise self._error(
                f"{image_flag} must be pinned by digest, ending in @sha256:<64 lowercase hex> "
                f"(got {self.image!r})",
                f"set {image_flag} / {helm}.image to 'repo@sha256:…' or 'repo:tag@sha256:…'",
            )
        if any(hashes) and not all(hashes):
            raise self._error(
                "set BOTH binary sha256 flags or neither "
                f"(only one of {self.flag_prefix}-binary-sha256-amd64/-arm64 is set)",
                f"set both {helm}.binarySHA256Amd64 and {helm}.binarySHA256Arm64, or neither "
                "to resolve them from the image index",
            )
        for arch, value in zip(("amd64", "arm64"), hashes, strict=True):
            if value and not SHA256_HEX.match(value):
                raise self._error(
                    f"{self.flag_prefix}-binary-sha256-{arch} must be 64 hex lowercase characters "
                    f"(got {len(value)} characters)",
                    f"set {helm}.binarySHA256{arch.capitalize()} to the binary's sha256",
                )

    @property
    def needs_resolution(self) -> bool:
        """Image-only form: the pins must come from the image index annotations."""
        return not self.binary_sha256_amd64 and not self.binary_sha256_arm64

    def manual_pins(self) -> PinSet:
        return PinSet(self.binary_sha256_amd64, self.binary_sha256_arm64)


@dataclass(frozen=True)
class AgentdDelivery(ArtifactDelivery):
    """agentd image-volume delivery: digest-pinned image plus optional manual per-arch pins."""

    artifact: ClassVar[Artifact] = AGENTD


@dataclass(frozen=True)
class OpencodeDelivery(ArtifactDelivery):
    """opencode image-volume delivery: digest-pinned image plus optional manual per-arch pins."""

    artifact: ClassVar[Artifact] = OPENCODE


@dataclass(frozen=True)
class ResolvedArtifact:
    """A validated image and the pins the pod receives, with where the pins came from."""

    artifact: Artifact
    image: str
    pins: PinSet
    source: str = "flags"

    @property
    def digest(self) -> str:
        return digest_of(self.image) or ""
