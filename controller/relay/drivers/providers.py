"""The cloud providers relay VMs run on: one registry entry per driver. Pure, apart from the
driver each entry builds (its module, and the cloud SDK, are imported only then).

An entry holds everything the rest of the controller knows about a provider: its driver, the
Secret that driver reads, the SDK it needs (and the ``wspin[extra]`` that installs it), its
default shape and region, and the table that tells a shape's CPU architecture. Adding a
provider is one driver module beside this one plus one entry here; the InferenceRelay CRD's
``spec.providers[].provider`` enum, the chart's values schema and its RBAC list the same
names (``tests/controller/relay/test_providers.py`` holds them to this registry).

Architectures come from explicit tables. The relay binary and the VM image must match the
CPU, and guessing is never safe: a guess of arm64 for AWS ``m6i``/``c6i`` or OCI
``VM.Standard.E2.1.Micro`` boots the wrong binary and the VM never becomes healthy. A shape a
table does not know is an error naming the shape: the fix is one ``spec.providers[].shape``
edit, a wrong guess is a dead VM.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from wspin.core.contract import Arch
from wspin.core.errors import WspinError

if TYPE_CHECKING:
    from controller.relay.drivers.base import Driver
    from controller.settings import RelayTokenStoreSettings
    from wspin.kube.client import Kube


@dataclass(frozen=True)
class Provider:
    """One cloud relay VMs can run on."""

    name: str
    """The value of ``spec.providers[].provider`` and of the VMs' provider tag."""
    credentials_secret: str
    """The Secret (in the controller's namespace) the driver reads its credentials from;
    ``spec.providers[].credentialsRef.name`` must name it, and RBAC lets the controller read
    exactly these."""
    sdk: str
    """The module the driver imports; a start-up error names ``wspin[<extra>]`` when missing."""
    extra: str
    """The pip extra that installs ``sdk``."""
    default_shape: str
    """The instance shape used when a slot names none."""
    default_region: str
    """The region the orphan sweep covers by default."""
    arch_of: Callable[[str], Arch | None]
    """The CPU architecture of a (lower-cased) shape, or None when the table does not know it."""
    shape_examples: str
    """Shapes to suggest in the error for an unknown one."""
    driver: Callable[[Kube, str, Provider, RelayTokenStoreSettings], Driver]
    """Builds the driver for the controller's namespace and where it stores VM tokens
    (imports its module and SDK)."""


class UnknownShape(WspinError):
    """The shape is not in the architecture table: the controller will not guess."""


# -- aws ---------------------------------------------------------------------------------------

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


def _aws_arch(shape: str) -> Arch | None:
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


def _aws_driver(
    kube: Kube, namespace: str, provider: Provider, store: RelayTokenStoreSettings
) -> Driver:
    from controller.relay.drivers.aws import AwsDriver

    return AwsDriver(
        kube,
        namespace,
        secret_name=provider.credentials_secret,
        default_region=provider.default_region,
        instance_profile=store.aws_instance_profile,
        parameter_prefix=store.aws_parameter_prefix,
    )


AWS: Final = Provider(
    name="aws",
    credentials_secret="aws-relay-irwa",  # noqa: S106 - a Secret's name
    sdk="boto3",
    extra="aws",
    default_shape="t4g.micro",
    default_region="us-east-1",
    arch_of=_aws_arch,
    shape_examples="t4g.micro (arm64) or t3.micro (amd64)",
    driver=_aws_driver,
)


# -- oci ---------------------------------------------------------------------------------------

_OCI_ARM = re.compile(r"^a\d+$")
_OCI_AMD = re.compile(r"^e\d+$")
_OCI_INTEL = re.compile(r"^(standard|optimized|denseio|hpc|gpu)\d+$")


def _oci_arch(shape: str) -> Arch | None:
    parts = shape.split(".")
    if len(parts) < 2 or parts[0] not in ("vm", "bm"):
        return None
    for part in parts[1:]:
        if _OCI_ARM.match(part):
            return "arm64"
        if _OCI_AMD.match(part) or _OCI_INTEL.match(part):
            return "amd64"
    return None


def _oci_driver(
    kube: Kube, namespace: str, provider: Provider, store: RelayTokenStoreSettings
) -> Driver:
    from controller.relay.drivers.oci import OciDriver

    return OciDriver(
        kube,
        namespace,
        secret_name=provider.credentials_secret,
        default_region=provider.default_region,
        vault=store.oci_vault,
        key=store.oci_key,
    )


OCI: Final = Provider(
    name="oci",
    credentials_secret="oci-credentials",  # noqa: S106 - a Secret's name
    sdk="oci",
    extra="oci",
    default_shape="VM.Standard.A1.Flex",
    default_region="us-ashburn-1",
    arch_of=_oci_arch,
    shape_examples="VM.Standard.A1.Flex (arm64) or VM.Standard.E4.Flex (amd64)",
    driver=_oci_driver,
)


# -- the registry ------------------------------------------------------------------------------

PROVIDERS: Final[Mapping[str, Provider]] = {p.name: p for p in (AWS, OCI)}
"""Every provider with a driver, by name."""


def default_shape(provider: str) -> str:
    """The provider's default shape ("" for a provider without a driver)."""
    known = PROVIDERS.get(provider)
    return known.default_shape if known is not None else ""


def arch_for_shape(provider: str, shape: str) -> Arch:
    """``amd64`` or ``arm64`` for ``shape`` on ``provider``; raises ``UnknownShape`` otherwise.

    An empty shape means the provider's default shape.
    """
    known = PROVIDERS.get(provider)
    if known is None:
        raise UnknownShape(
            f"no relay driver for provider {provider!r}, so no shape table for {shape.strip()!r}",
            f"set spec.providers[].provider to one of {', '.join(sorted(PROVIDERS))}",
        )
    arch = known.arch_of(shape.strip().lower() or known.default_shape.lower())
    if arch is None:
        raise UnknownShape(
            f"cannot tell the CPU architecture of {provider} shape {shape.strip()!r}",
            f"set spec.providers[{provider}].shape to a known shape, e.g. {known.shape_examples}",
        )
    return arch


def binary_name(arch: Arch) -> str:
    """The relay-proxy file name on the mirrors for ``arch``."""
    return f"relay-proxy-{arch}"
