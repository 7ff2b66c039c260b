"""The runtime catalogue: what makes a RuntimeEnvironment acceptable, and what a Workspace's
bare ``spec.runtime`` name resolves to.

Pure. The API server applies these rules at admission (the chart's ValidatingAdmissionPolicy
renders the same checks in CEL); the controller applies them again before it runs an entry's
image, so an entry stored before the policy existed, or edited around it, never runs. The
webhook's Workspace validator and the controller both resolve names through ``resolve_runtime``.

A RuntimeEnvironment is where a platform team publishes an image for tenants to name, so its
rules are stricter than a tenant's own ``spec.runtime``: the image must name its registry
(contain ``/``), come from an allow-listed registry prefix, and be pinned by digest, so every
Workspace that names the runtime runs the same bytes however the tag moves.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Final, Protocol

from wspin.core.kinds import Resource
from wspin.core.objects import Obj, ObjectKey

RUNTIME_ENVIRONMENTS: Final = Resource(
    "llmsafespaces.dev", "v1", "runtimeenvironments", namespaced=False, kind="RuntimeEnvironment"
)

# Image references never exceed ~255 characters; 512 is generous and bounds the regex work.
MAX_IMAGE_LENGTH: Final = 512
MAX_LANGUAGE_LENGTH: Final = 63
_IMAGE_CHARS = re.compile(r"^[a-zA-Z0-9._/:@-]+$")
_IMAGE_FORBIDDEN: Final = ("..", "\x00", "\\")
_DIGEST_PINNED = re.compile(r"@sha256:[a-f0-9]{64}$")


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


def runtime_environment_problem(env: Obj, allowed: tuple[str, ...] | None) -> str | None:
    """None when ``env`` is an acceptable RuntimeEnvironment, else why not (naming the field).

    ``allowed`` None skips the registry allow-list (the controller does not hold it; the API
    server's policy enforced it when the entry was stored)."""
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
    problem = registry_problem("spec.image", image, allowed) if allowed is not None else None
    if problem is not None:
        return problem
    if not _DIGEST_PINNED.search(image):
        return (
            f"spec.image {image!r} is not digest-pinned: pin it as "
            "registry/repo[:tag]@sha256:<64 hex>"
        )
    language = spec.get("language")
    if not isinstance(language, str) or not language.strip():
        return "spec.language is required, e.g. python or nodejs"
    if len(language) > MAX_LANGUAGE_LENGTH:
        return f"spec.language is {len(language)} characters; the limit is {MAX_LANGUAGE_LENGTH}"
    return None


@dataclass(frozen=True)
class Runtime:
    """What a runtime name resolved to."""

    name: str
    image: str


def resolve_runtime(runtime: str, catalogue: Mapping[str, Obj]) -> Runtime | str:
    """The image a bare ``spec.runtime`` runs, or why it runs none (unknown name, or an entry
    that breaks the rules). An image reference (containing ``/``) is never looked up."""
    env = catalogue.get(runtime) if "/" not in runtime else None
    if env is None:
        return (
            f"spec.runtime {runtime!r} names no RuntimeEnvironment; publish one "
            "(kubectl get runtimeenvironments) or change spec.runtime"
        )
    problem = runtime_environment_problem(env, None)
    if problem is not None:
        return f"RuntimeEnvironment {runtime!r} cannot be run: {problem}"
    return Runtime(name=runtime, image=env["spec"]["image"])


class _Cache(Protocol):
    def get(self, key: ObjectKey) -> Obj | None: ...

    def list(
        self, namespace: str | None = None, labels: dict[str, str] | None = None
    ) -> list[Obj]: ...


class RuntimeCatalogue(Mapping[str, Obj]):
    """RuntimeEnvironments by name, read from a watch-fed cache (never the API)."""

    def __init__(self, cache: _Cache) -> None:
        self._cache = cache

    def __getitem__(self, name: str) -> Obj:
        found = self._cache.get(ObjectKey("", name))
        if found is None:
            raise KeyError(name)
        return found

    def __iter__(self) -> Iterator[str]:
        return (obj["metadata"]["name"] for obj in self._cache.list())

    def __len__(self) -> int:
        return len(self._cache.list())
