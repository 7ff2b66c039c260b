"""Architecture from instance shape: an explicit table, an error for what it does not know."""

from __future__ import annotations

import pytest

from controller.relay.drivers.base import truncate
from controller.relay.shapes import (
    DEFAULT_REGIONS,
    DEFAULT_SHAPES,
    UnknownShape,
    arch_for_shape,
    binary_name,
)


@pytest.mark.parametrize(
    ("provider", "shape"),
    [
        ("aws", "t4g.micro"),
        ("aws", "t4g.small"),
        ("aws", "t4g.medium"),
        ("aws", "c7g.large"),
        ("aws", "m6g.medium"),
        ("aws", "m7gd.xlarge"),
        ("aws", "c6gn.large"),
        ("aws", "r6g.large"),
        ("aws", "x2gd.large"),
        ("aws", "im4gn.large"),
        ("aws", "g5g.xlarge"),
        ("aws", "a1.medium"),
        ("aws", " T4G.Micro "),
        ("aws", ""),
        ("oci", "VM.Standard.A1.Flex"),
        ("oci", "BM.Standard.A1.160"),
        ("oci", ""),
        ("gcp", "t2a-standard-1"),
        ("gcp", "c4a-standard-4"),
    ],
)
def test_arm_shapes_resolve_to_arm64(provider: str, shape: str) -> None:
    assert arch_for_shape(provider, shape) == "arm64"


@pytest.mark.parametrize(
    ("provider", "shape"),
    [
        ("aws", "t3.micro"),
        ("aws", "t3.small"),
        ("aws", "t3a.small"),
        ("aws", "t2.micro"),
        ("aws", "m5.large"),
        ("aws", "m5ad.large"),
        ("aws", "c5n.large"),
        ("aws", "r5b.large"),
        ("aws", "m6i.large"),
        ("aws", "c6i.large"),
        ("aws", "m7i.large"),
        ("aws", "m7i-flex.large"),
        ("aws", "m7a.large"),
        ("aws", "c6a.large"),
        ("aws", "i3en.large"),
        ("aws", "z1d.large"),
        ("oci", "VM.Standard.E2.1.Micro"),
        ("oci", "VM.Standard.E3.Flex"),
        ("oci", "VM.Standard.E4.Flex"),
        ("oci", "VM.Standard.E5.Flex"),
        ("oci", "VM.Standard2.1"),
        ("oci", "VM.Standard3.Flex"),
        ("gcp", "e2-micro"),
        ("gcp", "e2-small"),
        ("gcp", "n2-standard-2"),
        ("gcp", ""),
    ],
)
def test_intel_and_amd_shapes_resolve_to_amd64(provider: str, shape: str) -> None:
    assert arch_for_shape(provider, shape) == "amd64"


@pytest.mark.parametrize(
    ("provider", "shape"),
    [
        ("aws", "mac2.metal"),
        ("aws", "zz9.plural"),
        ("aws", "not a shape"),
        ("oci", "VM.Unknown.Q7"),
        ("oci", "t4g.micro"),
        ("gcp", "x9-standard-1"),
        ("azure", "Standard_B1s"),
    ],
)
def test_an_unknown_shape_is_an_error_naming_it(provider: str, shape: str) -> None:
    with pytest.raises(UnknownShape) as raised:
        arch_for_shape(provider, shape)
    assert repr(shape.strip()) in str(raised.value)
    assert "spec.providers" in raised.value.fix


def test_binary_names_follow_the_architecture() -> None:
    assert binary_name("amd64") == "relay-proxy-amd64"
    assert binary_name("arm64") == "relay-proxy-arm64"


def test_each_provider_has_its_default_shape_and_region() -> None:
    assert DEFAULT_SHAPES == {"aws": "t4g.micro", "oci": "VM.Standard.A1.Flex", "gcp": "e2-micro"}
    assert DEFAULT_REGIONS == {"aws": "us-east-1", "oci": "us-ashburn-1", "gcp": "us-west1"}


def test_long_cloud_errors_are_cut_with_an_ellipsis() -> None:
    assert truncate("hello world", 5) == "hello..."
    assert truncate("hello", 5) == "hello"
