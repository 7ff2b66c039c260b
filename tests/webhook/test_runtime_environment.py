"""The RuntimeEnvironment validator and bare-name resolution."""

from __future__ import annotations

from typing import Any

import pytest

from webhook.runtime_environment import (
    resolve_runtime,
    runtime_environment_problem,
    validate_runtime_environment,
)

DIGEST = "sha256:" + "ab" * 32
ALLOWED = ("ghcr.io/acme/",)


def env(
    image: Any = f"ghcr.io/acme/python:3.12@{DIGEST}", language: Any = "python"
) -> dict[str, Any]:
    spec: dict[str, Any] = {}
    if image is not None:
        spec["image"] = image
    if language is not None:
        spec["language"] = language
    return {
        "apiVersion": "llmsafespaces.dev/v1",
        "kind": "RuntimeEnvironment",
        "metadata": {"name": "python"},
        "spec": spec,
    }


class TestValidator:
    def test_a_pinned_image_from_an_allowed_registry_is_allowed(self) -> None:
        assert runtime_environment_problem(env(), ALLOWED) is None

    @pytest.mark.parametrize(
        ("image", "expected"),
        [
            (None, "spec.image is required"),
            ("", "spec.image is required"),
            ("python@" + DIGEST, "must name its registry"),
            (f"docker.io/library/python@{DIGEST}", "not from an allowed registry"),
            ("ghcr.io/acme/python:3.12", "not digest-pinned"),
            ("ghcr.io/acme/python@sha256:abc", "not digest-pinned"),
            ("ghcr.io/acme/../evil@" + DIGEST, "forbidden sequence"),
            ("ghcr.io/acme/py thon@" + DIGEST, "forbidden sequence"),
            ("ghcr.io/acme/py$thon@" + DIGEST, "characters outside"),
            ("ghcr.io/acme/" + "a" * 600, "the limit is 512"),
            (42, "must be a string"),
        ],
    )
    def test_bad_images_are_denied_naming_the_field(self, image: Any, expected: str) -> None:
        problem = runtime_environment_problem(env(image=image), ALLOWED)
        assert problem is not None and expected in problem
        assert "spec.image" in problem

    def test_with_no_allow_list_every_image_is_denied_with_the_flag_named(self) -> None:
        problem = runtime_environment_problem(env(), ())
        assert problem is not None and "--allowed-runtime-registries" in problem

    @pytest.mark.parametrize("language", [None, "", "  ", 3])
    def test_language_is_required(self, language: Any) -> None:
        problem = runtime_environment_problem(env(language=language), ALLOWED)
        assert problem is not None and "spec.language is required" in problem

    def test_missing_spec_is_denied(self) -> None:
        problem = runtime_environment_problem({"metadata": {"name": "x"}}, ALLOWED)
        assert problem is not None and "spec.image" in problem

    def test_status_writes_and_deletes_are_not_judged(self) -> None:
        bad = env(image="python")
        assert (
            validate_runtime_environment(
                {"operation": "UPDATE", "subResource": "status", "object": bad}, ALLOWED
            )
            is None
        )
        assert (
            validate_runtime_environment({"operation": "DELETE", "object": None}, ALLOWED) is None
        )
        problem = validate_runtime_environment({"operation": "CREATE", "object": bad}, ALLOWED)
        assert problem is not None


class TestResolution:
    CATALOGUE = {"python": env()}

    def test_a_known_name_resolves_to_its_image(self) -> None:
        runtime = resolve_runtime("python", self.CATALOGUE)
        assert runtime is not None and runtime.image == f"ghcr.io/acme/python:3.12@{DIGEST}"

    def test_an_unknown_name_does_not_resolve(self) -> None:
        assert resolve_runtime("ruby", self.CATALOGUE) is None

    def test_an_image_reference_is_never_looked_up(self) -> None:
        catalogue = {"ghcr.io/acme/x": env()}
        assert resolve_runtime("ghcr.io/acme/x", catalogue) is None
