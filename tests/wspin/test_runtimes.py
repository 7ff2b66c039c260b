"""The RuntimeEnvironment validator and bare-name resolution."""

from __future__ import annotations

from typing import Any

import pytest

from wspin.core.runtimes import Runtime, resolve_runtime, runtime_environment_problem

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

    def test_the_controller_checks_everything_but_the_allow_list(self) -> None:
        assert runtime_environment_problem(env(image=f"quay.io/x/y@{DIGEST}"), None) is None
        problem = runtime_environment_problem(env(image="quay.io/x/y:1"), None)
        assert problem is not None and "not digest-pinned" in problem


class TestResolution:
    CATALOGUE = {"python": env()}

    def test_a_known_name_resolves_to_its_image(self) -> None:
        runtime = resolve_runtime("python", self.CATALOGUE)
        assert runtime == Runtime("python", f"ghcr.io/acme/python:3.12@{DIGEST}")

    def test_an_unknown_name_does_not_resolve(self) -> None:
        problem = resolve_runtime("ruby", self.CATALOGUE)
        assert isinstance(problem, str) and "names no RuntimeEnvironment" in problem

    def test_an_entry_that_breaks_the_rules_is_never_run(self) -> None:
        problem = resolve_runtime("py", {"py": env(image="ghcr.io/acme/python:3.12")})
        assert isinstance(problem, str) and "cannot be run" in problem

    def test_an_image_reference_is_never_looked_up(self) -> None:
        catalogue = {"ghcr.io/acme/x": env()}
        assert isinstance(resolve_runtime("ghcr.io/acme/x", catalogue), str)


def test_the_example_runtime_environment_is_acceptable() -> None:
    import pathlib

    import yaml

    example = pathlib.Path(__file__).resolve().parents[2] / "examples" / "runtimeenvironment.yaml"
    env = yaml.safe_load(example.read_text())
    assert runtime_environment_problem(env, ("ghcr.io/llmsafespaces/",)) is None
