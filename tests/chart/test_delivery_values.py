"""Delivery values: what renders, and every invalid value fails `helm template` naming itself."""

from __future__ import annotations

import pytest

from tests.chart.helm import Rendered, flag_values, render, template

DIGEST = "@sha256:" + "0123456789abcdef" * 4
AGENTD = "ghcr.io/example/agentd:v1.4.0" + DIGEST
OPENCODE = "ghcr.io/example/opencode" + "@sha256:" + "fedcba9876543210" * 4
HASH_A = "a" * 64
HASH_B = "b" * 64
DELIVERY_FLAGS = ("image", "binary-sha256-amd64", "binary-sha256-arm64")


def delivery_flags(rendered: Rendered, artifact: str) -> list[str]:
    prefixes = tuple(f"--{artifact}-{name}" for name in DELIVERY_FLAGS)
    return [arg for arg in rendered.args("webhook") if arg.startswith(prefixes)]


@pytest.mark.parametrize("artifact", ["agentd", "opencode"])
def test_image_only_renders_exactly_one_delivery_flag_per_artifact(
    default_render: Rendered, artifact: str
) -> None:
    expected = AGENTD if artifact == "agentd" else OPENCODE
    assert delivery_flags(default_render, artifact) == [f"--{artifact}-image={expected}"]


def test_hash_overrides_render_all_three_flags_per_artifact(full_render: Rendered) -> None:
    assert delivery_flags(full_render, "agentd") == [
        f"--agentd-image={AGENTD}",
        f"--agentd-binary-sha256-amd64={HASH_A}",
        f"--agentd-binary-sha256-arm64={HASH_B}",
    ]
    assert delivery_flags(full_render, "opencode") == [
        f"--opencode-image={OPENCODE}",
        "--opencode-binary-sha256-amd64=" + "c" * 64,
        "--opencode-binary-sha256-arm64=" + "d" * 64,
    ]


def test_the_controller_gets_the_images_but_never_the_pins(full_render: Rendered) -> None:
    """The platform inits and the sidecar run the agentd image; pins stay the webhook's."""
    args = full_render.args("controller")
    assert [a for a in args if "-image=" in a] == [
        f"--agentd-image={AGENTD}",
        f"--opencode-image={OPENCODE}",
    ]
    assert not [a for a in args if "binary-sha256" in a]


def test_the_sidecar_and_upload_staging_values_render_their_flags(full_render: Rendered) -> None:
    args = full_render.args("controller")
    assert "--agentd-sidecar=true" in args
    assert "--upload-staging=budget=100663296,floor=0,concurrent=8" in args
    defaults = render()
    assert not [a for a in defaults.args("controller") if "sidecar" in a or "upload" in a]


def test_a_tag_and_digest_reference_is_accepted_as_digest_pinned() -> None:
    rendered = render(sets={"agentdDelivery.image": "reg.example.com:5000/agentd:v1" + DIGEST})
    assert flag_values(rendered.args("webhook"), "--agentd-image") == [
        "reg.example.com:5000/agentd:v1" + DIGEST
    ]


def failure(sets: dict[str, str], values: tuple[str, ...] = ("minimal.yaml",)) -> str:
    result = template(values, sets)
    assert result.returncode != 0, "the render should have failed"
    return result.stderr


@pytest.mark.parametrize("artifact", ["agentd", "opencode"])
@pytest.mark.parametrize(
    ("case", "sets", "message"),
    [
        ("missing-image", {"{a}Delivery.image": ""}, "{a}Delivery.image is mandatory"),
        (
            "hashes-without-image",
            {
                "{a}Delivery.image": "",
                "{a}Delivery.binarySHA256Amd64": HASH_A,
                "{a}Delivery.binarySHA256Arm64": HASH_B,
            },
            "{a}Delivery.image is mandatory",
        ),
        (
            "tag-only",
            {"{a}Delivery.image": "ghcr.io/example/x:v1"},
            "{a}Delivery.image must be pinned by digest",
        ),
        (
            "uppercase-digest",
            {"{a}Delivery.image": "ghcr.io/example/x@sha256:" + "ABCDEF0123456789" * 4},
            "{a}Delivery.image must be pinned by digest",
        ),
        (
            "short-digest",
            {"{a}Delivery.image": "ghcr.io/example/x@sha256:" + "0" * 63},
            "{a}Delivery.image must be pinned by digest",
        ),
        (
            "digest-not-at-end",
            {"{a}Delivery.image": "ghcr.io/example/x@sha256:" + "0" * 64 + "-evil"},
            "{a}Delivery.image must be pinned by digest",
        ),
        ("amd64-only", {"{a}Delivery.binarySHA256Amd64": HASH_A}, "BOTH hashes or NEITHER"),
        ("arm64-only", {"{a}Delivery.binarySHA256Arm64": HASH_B}, "BOTH hashes or NEITHER"),
        (
            "uppercase-hash",
            {"{a}Delivery.binarySHA256Amd64": "A" * 64, "{a}Delivery.binarySHA256Arm64": HASH_B},
            "{a}Delivery.binarySHA256Amd64",
        ),
        (
            "short-hash",
            {"{a}Delivery.binarySHA256Amd64": HASH_A, "{a}Delivery.binarySHA256Arm64": "b" * 63},
            "{a}Delivery.binarySHA256Arm64",
        ),
    ],
)
def test_each_invalid_delivery_value_fails_the_render_naming_the_value(
    artifact: str, case: str, sets: dict[str, str], message: str
) -> None:
    concrete = {key.format(a=artifact): value for key, value in sets.items()}
    stderr = failure(concrete)
    assert message.format(a=artifact) in stderr


def test_the_bad_image_is_quoted_in_the_error() -> None:
    assert '"ghcr.io/example/x:latest"' in failure(
        {"agentdDelivery.image": "ghcr.io/example/x:latest"}
    )


def test_one_hash_names_both_values_to_set() -> None:
    stderr = failure({"opencodeDelivery.binarySHA256Arm64": HASH_B})
    assert "opencodeDelivery.binarySHA256Amd64" in stderr
    assert "opencodeDelivery.binarySHA256Arm64" in stderr


def test_the_defaults_alone_fail_because_both_images_are_mandatory() -> None:
    stderr = failure({}, values=())
    assert "agentdDelivery.image is mandatory" in stderr
