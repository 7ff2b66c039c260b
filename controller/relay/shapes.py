"""CPU architecture from a cloud instance shape, by an explicit table. Pure: no I/O.

The relay binary and the VM image must match the CPU, and guessing is never safe: a guess
of arm64 for AWS ``m6i``/``c6i`` or OCI ``VM.Standard.E2.1.Micro`` boots the wrong binary and
the VM never becomes healthy. A shape the table does not know is an error naming the shape:
the fix is one ``spec.providers[].shape`` edit, a wrong guess is a dead VM.
"""

from __future__ import annotations

import re
from typing import Final

from wspin.core.contract import Arch
from wspin.core.errors import WspinError

DEFAULT_SHAPES: Final[dict[str, str]] = {
    "aws": "t4g.micro",
    "oci": "VM.Standard.A1.Flex",
    "gcp": "e2-micro",
}
DEFAULT_REGIONS: Final[dict[str, str]] = {
    "aws": "us-east-1",
    "oci": "us-ashburn-1",
    "gcp": "us-west1",
}

# AWS families named only by series and generation that run on x86 (Intel or AMD). From gen 6
# on, AWS spells the CPU out: ``i`` Intel, ``a`` AMD, ``g`` Graviton (m6i, m7a, c7g, ...).
_AWS_X86_FAMILIES: Final = frozenset(
    {
        "t1", "t2", "t3", "m1", "m2", "m3", "m4", "m5", "c1", "c3", "c4", "c5", "r3", "r4",
        "r5", "i2", "i3", "i4", "x1", "z1", "d2", "d3", "h1", "g2", "g3", "g4", "g5", "g6",
        "p2", "p3", "p4", "p5", "f1", "f2", "inf1", "inf2", "trn1", "trn2", "dl1", "vt1",
    }
)  # fmt: skip
_AWS_FAMILY = re.compile(r"^([a-z]+)(\d+)([a-z0-9-]*)$")
_OCI_ARM = re.compile(r"^a\d+$")
_OCI_AMD = re.compile(r"^e\d+$")
_OCI_INTEL = re.compile(r"^(standard|optimized|denseio|hpc|gpu)\d+$")
_GCP_ARM: Final = frozenset({"t2a", "c4a", "n4a"})
_GCP_X86: Final = frozenset(
    {
        "e2", "n1", "n2", "n2d", "n4", "n4d", "c2", "c2d", "c3", "c3d", "c4", "c4d", "t2d",
        "m1", "m2", "m3", "m4", "a2", "a3", "g2", "h3", "z3", "f1", "g1",
    }
)  # fmt: skip


class UnknownShape(WspinError):
    """The shape is not in the architecture table: the controller will not guess."""


def default_shape(provider: str) -> str:
    return DEFAULT_SHAPES.get(provider, "")


def arch_for_shape(provider: str, shape: str) -> Arch:
    """``amd64`` or ``arm64`` for ``shape`` on ``provider``; raises ``UnknownShape`` otherwise.

    An empty shape means the provider's default shape.
    """
    normalized = shape.strip().lower() or default_shape(provider).lower()
    arch = _lookup(provider, normalized)
    if arch is None:
        raise UnknownShape(
            f"cannot tell the CPU architecture of {provider} shape {shape.strip()!r}",
            f"set spec.providers[{provider}].shape to a known shape, e.g. {_examples(provider)}",
        )
    return arch


def binary_name(arch: Arch) -> str:
    """The relay-proxy file name on the mirrors for ``arch``."""
    return f"relay-proxy-{arch}"


def _lookup(provider: str, shape: str) -> Arch | None:
    if provider == "aws":
        return _aws(shape)
    if provider == "oci":
        return _oci(shape)
    if provider == "gcp":
        return _gcp(shape)
    return None


def _aws(shape: str) -> Arch | None:
    family = shape.split(".", 1)[0]
    if family == "a1":  # the first Graviton generation
        return "arm64"
    match = _AWS_FAMILY.match(family)
    if match is None:
        return None
    series, generation, attributes = match.groups()
    if "g" in attributes:
        return "arm64"
    if "i" in attributes or "a" in attributes:
        return "amd64"
    if f"{series}{generation}" in _AWS_X86_FAMILIES:
        return "amd64"
    return None


def _oci(shape: str) -> Arch | None:
    parts = shape.split(".")
    if len(parts) < 2 or parts[0] not in ("vm", "bm"):
        return None
    for part in parts[1:]:
        if _OCI_ARM.match(part):
            return "arm64"
        if _OCI_AMD.match(part) or _OCI_INTEL.match(part):
            return "amd64"
    return None


def _gcp(shape: str) -> Arch | None:
    family = shape.split("-", 1)[0]
    if family in _GCP_ARM:
        return "arm64"
    if family in _GCP_X86:
        return "amd64"
    return None


def _examples(provider: str) -> str:
    return {
        "aws": "t4g.micro (arm64) or t3.micro (amd64)",
        "oci": "VM.Standard.A1.Flex (arm64) or VM.Standard.E4.Flex (amd64)",
        "gcp": "t2a-standard-1 (arm64) or e2-micro (amd64)",
    }.get(provider, "one listed in the wspin documentation")
