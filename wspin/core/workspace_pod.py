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
Its ``workspace`` container and ``agentd`` sidecar run the delivered entry point
(``entrypoint_problem``), which the chart's delivery policy checks again.
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
from wspin.core.objects import Obj

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


WORKSPACE_COMMAND: Final = (AGENTD.binary_path,)
"""The ``workspace`` container's command: the delivered supervisor, never a shell."""
WORKSPACE_ARGS: Final = (("--supervise",), ("supervise-opencode",))
"""Its args: agentd supervising opencode in-process, or (beside the agentd sidecar) only
opencode."""
SIDECAR_COMMAND: Final = (AGENTD.binary_path, "--sidecar")
"""The ``agentd`` native sidecar's command (it takes no args)."""
# As a decoded pod holds them (lists), built once: every workspace pod admitted is checked.
_WORKSPACE_COMMAND_JSON: Final = list(WORKSPACE_COMMAND)
_WORKSPACE_ARGS_JSON: Final = [list(args) for args in WORKSPACE_ARGS]
_SIDECAR_COMMAND_JSON: Final = list(SIDECAR_COMMAND)


def entrypoint_problem(pod: Obj) -> str | None:
    """Why the pod would not run the delivered agentd, or None.

    A workspace pod is a promise that its ``workspace`` container runs the pinned supervisor
    (which verifies opencode before it spawns it), and so does the ``agentd`` sidecar when
    there is one: having the volumes mounted is not enough. The chart's delivery policy
    checks the same, so a pod the injector never saw is held to it too.
    """
    spec = pod.get("spec") or {}
    for container in spec.get("containers") or ():
        if isinstance(container, dict) and container.get("name") == MAIN_CONTAINER:
            command, args = container.get("command"), container.get("args")
            if command != _WORKSPACE_COMMAND_JSON or args not in _WORKSPACE_ARGS_JSON:
                wanted = " or ".join(f"args [{', '.join(a)}]" for a in WORKSPACE_ARGS)
                return (
                    f"container {MAIN_CONTAINER!r} must run the delivered agentd: command "
                    f"[{AGENTD.binary_path}] with {wanted} (got command {_shown(command)}, args "
                    f"{_shown(args)})"
                )
    for container in spec.get("initContainers") or ():
        if isinstance(container, dict) and container.get("name") == SIDECAR_CONTAINER:
            command, args = container.get("command"), container.get("args")
            if command != _SIDECAR_COMMAND_JSON or args not in (None, []):
                return (
                    f"the {SIDECAR_CONTAINER!r} sidecar must run the delivered agentd: command "
                    f"[{', '.join(SIDECAR_COMMAND)}] and no args (got command "
                    f"{_shown(command)}, args {_shown(args)})"
                )
    return None


def _shown(value: Any, limit: int = 120) -> str:
    """A caller's value for a message, cut to ``limit`` characters."""
    text = "none" if value is None else json.dumps(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


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
