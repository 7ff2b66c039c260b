"""What a workspace pod is: the one definition the injector, the controller and the chart share.

Pure data and pure functions, no I/O. The injector's handler asks ``workspace_pod_problem``,
the controller's pod and PVC caches select by ``SELECTOR``, and the chart renders
``SELECTOR_LABELS`` into the mutating webhook's objectSelector and the admission policies'
match constraints (a chart test compares the rendered selector with these values). When the
definitions drift apart a pod can carry the labels yet never be injected, and the policies
would then judge pods the injector never saw.

A pod is a workspace pod when it carries the two selector labels; the Workspace label and the
``workspace`` container are then required, not optional: a pod that claims to be a workspace
pod and lacks either is denied with the reason, so nothing can pass as one without delivery.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any, Final

from wspin.core.contract import (
    AGENTD,
    ARTIFACTS,
    DELIVERY_ANNOTATION,
    LABEL_APP,
    LABEL_APP_VALUE,
    LABEL_COMPONENT,
    LABEL_COMPONENT_VALUE,
    LABEL_WORKSPACE,
    MAIN_CONTAINER,
    OPENCODE,
    PLATFORM_INIT_PREFIX,
    SIDECAR_CONTAINER,
    Artifact,
)

Obj = dict[str, Any]

SELECTOR_LABELS: Final[Mapping[str, str]] = {
    LABEL_APP: LABEL_APP_VALUE,
    LABEL_COMPONENT: LABEL_COMPONENT_VALUE,
}
"""The labels that make a pod a workspace pod, for every selector that picks them out."""

SELECTOR: Final = ",".join(f"{key}={value}" for key, value in SELECTOR_LABELS.items())
"""``SELECTOR_LABELS`` as a list/watch ``labelSelector`` (the controller's caches)."""

DELIVERY_ENV_NAMES: Final = tuple(
    name
    for artifact in ARTIFACTS
    for name in (
        artifact.marker_env,
        artifact.binary_env,
        artifact.sha256_env("amd64"),
        artifact.sha256_env("arm64"),
    )
)
"""The pins the ``workspace`` container carries, in the order the injector writes them."""


def has_selector_labels(labels: Mapping[str, Any]) -> bool:
    """``labels`` include both selector labels."""
    return SELECTOR_LABELS.items() <= labels.items()


DIGEST: Final = re.compile(r"^sha256:[0-9a-f]{64}$")
"""A digest as the receipt records it."""
MAX_RECEIPT: Final = 4096
"""Bytes: the injector writes about 170; anything longer is not its receipt."""


def is_workspace_pod(obj: Obj) -> bool:
    """The object carries both selector labels (and so gets the workspace-pod rules)."""
    return has_selector_labels((obj.get("metadata") or {}).get("labels") or {})


def workspace_pod_problem(pod: Obj) -> str | None:
    """Why a pod with the selector labels cannot be admitted as a workspace pod; None = eligible.

    Call only for pods ``is_workspace_pod`` accepts: other pods are none of our business.
    The injector asks for every workspace pod it admits, so the eligible case is checked
    before any message is built.
    """
    labels = (pod.get("metadata") or {}).get("labels") or {}
    containers = (pod.get("spec") or {}).get("containers") or []
    if labels.get(LABEL_WORKSPACE):
        for container in containers:
            if isinstance(container, dict) and container.get("name") == MAIN_CONTAINER:
                return None
    claimed = f"pod carries the workspace-pod labels ({SELECTOR})"
    if not labels.get(LABEL_WORKSPACE):
        return (
            f"{claimed} but no {LABEL_WORKSPACE} label naming its Workspace; workspace pods "
            f"are built by the controller from a Workspace: add the label or remove "
            f"{LABEL_APP}/{LABEL_COMPONENT}"
        )
    names = ", ".join(repr(c.get("name")) for c in containers if isinstance(c, dict))
    return (
        f"{claimed} but has no container named {MAIN_CONTAINER!r} (containers: "
        f"{names or 'none'}); agentd and opencode are delivered into that container: name "
        f"the main container {MAIN_CONTAINER!r} or remove the labels"
    )


def artifacts_for(container_name: str, kind: str) -> tuple[Artifact, ...]:
    """The delivery mounts a container must have.

    ``kind`` is ``containers`` or ``initContainers``. The ``workspace`` container runs both
    binaries; the agentd native sidecar and the ``platform-*`` init containers run agentd only;
    every other container gets neither, so a helper image never sees the pinned binaries.
    """
    if kind == "containers":
        return (AGENTD, OPENCODE) if container_name == MAIN_CONTAINER else ()
    if kind == "initContainers" and (
        container_name == SIDECAR_CONTAINER or container_name.startswith(PLATFORM_INIT_PREFIX)
    ):
        return (AGENTD,)
    return ()


# -- the receipt annotation ------------------------------------------------------------------


def build_receipt(digests: Mapping[str, str]) -> str:
    """The receipt value for artifact name → 64-hex digest: compact JSON, sorted keys, each
    digest as ``sha256:<hex>`` (the admission policy compares this exact string)."""
    return json.dumps(
        {name: f"sha256:{digest}" for name, digest in digests.items()},
        sort_keys=True,
        separators=(",", ":"),
    )


def parse_receipt(obj: Obj) -> dict[str, str]:
    """Artifact name → ``sha256:<hex>`` from the object's receipt annotation; entries that
    are not such a digest are left out, and an annotation that is absent, longer than
    ``MAX_RECEIPT`` or not a JSON object names nothing (a forged or damaged receipt)."""
    annotations = (obj.get("metadata") or {}).get("annotations") or {}
    raw = annotations.get(DELIVERY_ANNOTATION)
    if not isinstance(raw, str) or len(raw) > MAX_RECEIPT:
        return {}
    try:
        decoded = json.loads(raw)
    except ValueError:
        return {}
    if not isinstance(decoded, dict):
        return {}
    return {
        name: value
        for name, value in decoded.items()
        if isinstance(name, str) and isinstance(value, str) and DIGEST.match(value)
    }
