"""The runtime catalogue: which RuntimeEnvironments the API server may store, and what a
Workspace's bare ``spec.runtime`` name resolves to.

Pure: an AdmissionReview ``request`` dict (or a RuntimeEnvironment dict) and the registry
allow-list in, ``None`` or a denial message out. The watch-fed snapshot of names the Workspace
validator consults is built by the caller; nothing here reads the API.

A RuntimeEnvironment is where a platform team publishes an image for tenants to name, so its
rules are stricter than a tenant's own ``spec.runtime``: the image must name its registry
(contain ``/``), come from an allow-listed registry prefix, and be pinned by digest, so every
Workspace that names the runtime runs the same bytes however the tag moves.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from webhook.reference import ImageReference
from wspin.errors import ConfigError
from wspin.resources import Resource

Obj = dict[str, Any]

RUNTIME_ENVIRONMENTS: Final = Resource(
    "llmsafespaces.dev", "v1", "runtimeenvironments", namespaced=False, kind="RuntimeEnvironment"
)

# Image references never exceed ~255 characters; 512 is generous and bounds the regex work.
MAX_IMAGE_LENGTH: Final = 512
MAX_LANGUAGE_LENGTH: Final = 63
_IMAGE_CHARS = re.compile(r"^[a-zA-Z0-9._/:@-]+$")
_IMAGE_FORBIDDEN: Final = ("..", "\x00", "\\")


def image_syntax_problem(field: str, value: object) -> str | None:
    """Why ``value`` is not an acceptable image or runtime string for ``field``, or None.

    The characters a Docker reference uses and nothing else: no path traversal, NUL, backslash
    or whitespace, bounded length. Shared by ``spec.runtime`` and ``spec.image``."""
    if not isinstance(value, str):
        return f"{field} must be a string (got {type(value).__name__})"
    if not value.strip():
        return f"{field} must not be empty"
    if len(value) > MAX_IMAGE_LENGTH:
        return f"{field} is {len(value)} characters; the limit is {MAX_IMAGE_LENGTH}"
    if any(bad in value for bad in _IMAGE_FORBIDDEN) or any(c.isspace() for c in value):
        return (
            f"{field} contains a forbidden sequence (path traversal '..', NUL, backslash "
            "or whitespace)"
        )
    if not _IMAGE_CHARS.match(value):
        return f"{field} {value!r} has characters outside [a-zA-Z0-9._/:@-]"
    return None


def registry_problem(field: str, image: str, allowed: tuple[str, ...]) -> str | None:
    """Why ``image`` is not under an allowed registry prefix, or None."""
    if any(image.startswith(prefix) for prefix in allowed):
        return None
    listed = ", ".join(allowed) or "none: the operator has not set --allowed-runtime-registries"
    return (
        f"{field} {image!r} is not from an allowed registry (allowed prefixes: {listed}); "
        "publish the image under an allowed registry, or add its registry with "
        "--allowed-runtime-registries / webhook.allowedRuntimeRegistries"
    )


def runtime_environment_problem(env: Obj, allowed: tuple[str, ...]) -> str | None:
    """None when ``env`` is an acceptable RuntimeEnvironment, else why not (naming the field)."""
    spec = env.get("spec")
    if not isinstance(spec, dict):
        return "spec is required: set spec.image and spec.language"
    image = spec.get("image")
    if image is None or image == "":
        return "spec.image is required: a digest-pinned image (registry/repo@sha256:<64 hex>)"
    problem = image_syntax_problem("spec.image", image)
    if problem is not None:
        return problem
    assert isinstance(image, str)
    if "/" not in image:
        return (
            f"spec.image {image!r} must name its registry and repository "
            "(registry/repo@sha256:<64 hex>); a bare name is an unpinned Docker Hub pull"
        )
    problem = registry_problem("spec.image", image, allowed)
    if problem is not None:
        return problem
    try:
        ImageReference.parse(image)
    except ConfigError as err:
        return f"spec.image: {err}; pin it as registry/repo[:tag]@sha256:<64 hex>"
    language = spec.get("language")
    if not isinstance(language, str) or not language.strip():
        return "spec.language is required, e.g. python or nodejs"
    if len(language) > MAX_LANGUAGE_LENGTH:
        return f"spec.language is {len(language)} characters; the limit is {MAX_LANGUAGE_LENGTH}"
    return None


def validate_runtime_environment(request: Obj, allowed: tuple[str, ...]) -> str | None:
    """The RuntimeEnvironment admission check: CREATE and UPDATE of the object (not status)."""
    if request.get("operation") not in ("CREATE", "UPDATE") or request.get("subResource"):
        return None
    env = request.get("object")
    if not isinstance(env, dict):
        return "request.object must be a RuntimeEnvironment object"
    return runtime_environment_problem(env, allowed)


@dataclass(frozen=True)
class Runtime:
    """What a runtime name resolved to."""

    name: str
    image: str


def resolve_runtime(runtime: str, catalogue: Mapping[str, Obj]) -> Runtime | None:
    """The catalogue entry a bare ``spec.runtime`` names, or None (unknown, or not an entry a
    pod may run). An image reference (containing ``/``) is never looked up."""
    if "/" in runtime:
        return None
    env = catalogue.get(runtime)
    if env is None:
        return None
    image = (env.get("spec") or {}).get("image")
    if not isinstance(image, str) or not image:
        return None
    return Runtime(name=runtime, image=image)
