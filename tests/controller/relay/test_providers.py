"""The provider registry: one entry per driver, agreeing with the CRD and the chart; the
architecture of a shape from an explicit table, an error for what it does not know."""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path

import pytest
import yaml

from controller.relay.drivers.base import truncate
from controller.relay.drivers.providers import (
    PROVIDERS,
    UnknownShape,
    arch_for_shape,
    binary_name,
)
from controller.settings import OrphanSweepSettings


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
        ("gcp", "e2-micro"),  # no driver, so no table
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
    defaults = {name: (p.default_shape, p.default_region) for name, p in PROVIDERS.items()}
    assert defaults == {
        "aws": ("t4g.micro", "us-east-1"),
        "oci": ("VM.Standard.A1.Flex", "us-ashburn-1"),
    }


@pytest.mark.parametrize("provider", sorted(PROVIDERS))
def test_each_default_shape_is_in_its_own_table(provider: str) -> None:
    assert arch_for_shape(provider, PROVIDERS[provider].default_shape) in ("amd64", "arm64")


def test_long_cloud_errors_are_cut_with_an_ellipsis() -> None:
    assert truncate("hello world", 5) == "hello..."
    assert truncate("hello", 5) == "hello"


# -- the registry, the CRD and the chart agree -------------------------------------------------

CHART = Path(__file__).resolve().parents[3] / "charts" / "wspin"


def test_the_crd_offers_exactly_the_providers_with_a_driver() -> None:
    crd = yaml.safe_load((CHART / "crds" / "inferencerelays.llmsafespaces.dev.yaml").read_text())
    (version,) = crd["spec"]["versions"]
    spec = version["schema"]["openAPIV3Schema"]["properties"]["spec"]
    provider = spec["properties"]["providers"]["items"]["properties"]["provider"]
    assert provider["enum"] == sorted(PROVIDERS)


def test_the_values_schema_takes_orphan_regions_only_of_providers_with_a_driver() -> None:
    schema = json.loads((CHART / "values.schema.json").read_text())
    relay = schema["properties"]["controller"]["properties"]["inferenceRelay"]["properties"]
    pattern = relay["orphanDetector"]["properties"]["regions"]["items"]["pattern"]
    for name, provider in PROVIDERS.items():
        assert re.fullmatch(pattern, f"{name}:{provider.default_region}")
    assert not re.fullmatch(pattern, "gcp:us-west1")


def test_the_default_orphan_regions_are_each_providers_default_region() -> None:
    expected = [f"{name}:{p.default_region}" for name, p in PROVIDERS.items()]
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    regions = values["controller"]["inferenceRelay"]["orphanDetector"]["regions"]
    assert regions == expected
    flag_default = OrphanSweepSettings().regions
    assert [f"{provider}:{region}" for provider, region in flag_default] == expected


def test_every_provider_names_its_own_credentials_secret_and_extra() -> None:
    secrets = [p.credentials_secret for p in PROVIDERS.values()]
    assert len(set(secrets)) == len(secrets)
    extras = tomllib.loads((CHART.parents[1] / "pyproject.toml").read_text())["project"]
    for provider in PROVIDERS.values():
        assert provider.extra in extras["optional-dependencies"]
        assert provider.sdk in " ".join(extras["optional-dependencies"][provider.extra])
