"""The workspace pod, built from the Workspace, its credentials and the settings (pure: no
I/O, no clock).

The pod is created *without* delivery wiring; the admission webhook injects the agentd and
opencode image volumes, their read-only mounts and the sha256 pins on CREATE. Everything else
agentd needs to run is built here: names, labels, owner, the hardened security context, node
architecture and runtime class, the platform init containers, the optional package setup
init, the agentd native sidecar in sidecar mode, probes, resources and the pod's own volumes
(``containers``, ``volumes``, ``probes``, ``resources``, ``packages`` hold the pieces).
"""

from __future__ import annotations

import re
from typing import Final

from controller.settings import WorkspaceSettings
from controller.types import Obj
from controller.workspace.pod.compute import ResourcesError, container_resources
from controller.workspace.pod.containers import (
    DEFAULT_MAX_ACTIVE_SESSIONS,
    PodInputs,
    agentd_sidecar,
    platform_bootstrap,
    platform_init,
    platform_materialize,
    workspace_container,
    workspace_setup,
)
from controller.workspace.pod.credentials import (
    ANNOTATION_CREDENTIALS_KEY,
    ANNOTATION_CREDENTIALS_ROTATION,
    WorkspaceCredentials,
)
from controller.workspace.pod.names import (
    PodBuildError,
    names,
    owned_metadata,
    selector_labels,
)
from controller.workspace.pod.packages import PackagesError, needs_setup, setup_script
from controller.workspace.pod.recycle import (
    ANNOTATION_RESTART_GENERATION,
    LABEL_ARCH,
    architecture_of,
    pod_is_stale,
    restart_generation_of,
)
from controller.workspace.pod.volumes import base_volumes, sidecar_volumes
from wspin.core.contract import LABEL_WORKSPACE
from wspin.core.owners import record_of
from wspin.core.runtimes import Runtime
from wspin.core.tenancy import LABEL_TENANT
from wspin.core.workspace import WorkspaceSpec

__all__ = [
    "ANNOTATION_RESTART_GENERATION",
    "LABEL_ARCH",
    "PodBuildError",
    "architecture_of",
    "desired_pod",
    "names",
    "pod_is_stale",
    "restart_generation_of",
    "sanitize_label",
]

LABEL_RUNTIME: Final = "runtime"
ANNOTATION_RUNTIME_ENV: Final = "llmsafespaces.dev/runtime-env"
"""The RuntimeEnvironment a bare ``spec.runtime`` resolved to."""
ANNOTATION_CREATED_BY: Final = "llmsafespaces.dev/created-by"
UNSPECIFIED: Final = "unspecified"

DEFAULT_UID: Final = 1000
DEFAULT_GID: Final = 1000

# Labels and names the API server would reject: fail the Workspace with a reason instead.
_MAX_LABEL_VALUE: Final = 63
_MAX_NAME: Final = 253
_LABEL_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")


def sanitize_label(value: str) -> str:
    """A label value from free text: ``:``, ``/``, ``@`` (and anything else a label value cannot
    hold) → ``_``, the last 63 characters kept, non-alphanumerics trimmed from both ends;
    nothing left → ``unspecified``."""
    cleaned = _LABEL_UNSAFE.sub("_", value)[-_MAX_LABEL_VALUE:]
    start, end = 0, len(cleaned)
    while start < end and not cleaned[start].isalnum():
        start += 1
    while end > start and not cleaned[end - 1].isalnum():
        end -= 1
    return cleaned[start:end] or UNSPECIFIED


def tenant_of(ws: Obj) -> str:
    """The verified owner's orgID when set, else its userID, sanitised for a label; a
    Workspace without an owner record has none (``unspecified``)."""
    record = record_of(ws)
    tenant = (record.org_id or record.user_id) if record is not None else ""
    return sanitize_label(tenant)


def dev_preview_of(spec: Obj) -> bool:
    """``spec.networkAccess.devPreview``: only a literal true enables it."""
    return WorkspaceSpec.of(spec).dev_preview


def max_active_sessions_of(spec: Obj) -> int:
    """``spec.maxActiveSessions`` within the CRD's 1-20, else the CRD's default (an object
    stored before the field was declared has none)."""
    return _max_active_sessions(WorkspaceSpec.of(spec))


def _max_active_sessions(spec: WorkspaceSpec) -> int:
    value = spec.max_active_sessions
    return DEFAULT_MAX_ACTIVE_SESSIONS if value is None else value


def owner_labels(ws: Obj) -> dict[str, str]:
    """The labels the tenant quota counts a vouched owner by (none for any other owner)."""
    record = record_of(ws)
    return record.quota_labels() if record is not None else {}


def _spec(ws: Obj) -> Obj:
    spec = ws.get("spec")
    return spec if isinstance(spec, dict) else {}


def runtime_image(spec: WorkspaceSpec) -> str:
    """``spec.runtime`` as the image. The reconciler resolves a bare name through the runtime
    catalogue first and passes the RuntimeEnvironment's image instead (``desired_pod``'s
    ``runtime``); an image-shaped runtime is the image, restricted by the validator."""
    runtime = spec.runtime
    if runtime is None or not runtime.strip():
        raise PodBuildError("spec.runtime is required: name a runtime or an image")
    return runtime


def runtime_class_of(spec: WorkspaceSpec, settings: WorkspaceSettings) -> str | None:
    """None/absent → the controller default; any string, "" included, wins; "" → unset."""
    given = spec.runtime_class
    chosen = settings.default_runtime_class if given is None else str(given)
    return chosen or None


def _identity(spec: WorkspaceSpec) -> tuple[int, int]:
    """runAsUser/runAsGroup: 1000 each, overridden by a non-zero ``spec.podSecurityContext``
    value (zero means "default", never root)."""
    context = spec.pod_security_context or {}
    if not isinstance(context, dict):
        raise PodBuildError("spec.podSecurityContext must be an object")
    chosen = []
    for key, default in (("runAsUser", DEFAULT_UID), ("runAsGroup", DEFAULT_GID)):
        value = context.get(key) or 0
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise PodBuildError(
                f"spec.podSecurityContext.{key} must be a whole number >= 0 (got {value!r})"
            )
        chosen.append(value or default)
    return chosen[0], chosen[1]


def _agentd_image(settings: WorkspaceSettings) -> str:
    if settings.agentd is None or not settings.agentd.image:
        raise PodBuildError(
            "agentdDelivery.image is mandatory: the platform init containers"
            + (" and the agentd sidecar" if settings.agentd_sidecar else "")
            + " run the digest-pinned agentd image",
            "set --agentd-image / agentdDelivery.image on the controller",
        )
    return settings.agentd.image


def desired_pod(
    ws: Obj,
    settings: WorkspaceSettings,
    *,
    credentials: WorkspaceCredentials,
    runtime: Runtime | None = None,
    claim: str | None = None,
) -> Obj:
    """The workspace pod for ``ws``; raises PodBuildError naming the field that prevents it.

    ``credentials`` are the Workspace's derived values: the readiness and startup probes of
    agentd's ``/v1/readyz`` carry its admin token as a bearer (agentd refuses readyz
    without it), and the pod records the key they came from. ``claim`` is the PVC to mount
    (``storage.claim_name``; ``workspace-<ws>`` by default).

    Order of the pieces (stable, so a golden diff shows only what changed): main
    container, the pod's own volumes, init containers, then the sidecar mutation last (the
    sidecar is the final init container; its two stores are the final volumes).
    """
    spec = _spec(ws)
    meta = ws.get("metadata") or {}
    ws_name = str(meta.get("name", ""))
    if len(ws_name) > _MAX_LABEL_VALUE:
        raise PodBuildError(
            f"Workspace name {ws_name!r} is longer than {_MAX_LABEL_VALUE} characters and cannot "
            f"label its pod ({LABEL_WORKSPACE}); use a shorter name"
        )
    pod_names = names(ws)
    if len(pod_names.pod) > _MAX_NAME:
        raise PodBuildError(f"pod name {pod_names.pod!r} would exceed {_MAX_NAME} characters")
    view = WorkspaceSpec.of(spec)
    uid, gid = _identity(view)
    arch = architecture_of(ws)
    try:
        resources = container_resources(spec)
        script = setup_script(spec) if needs_setup(spec) else None
    except (ResourcesError, PackagesError) as err:
        raise PodBuildError(err.message, err.fix) from None
    inputs = PodInputs(
        ws_name=ws_name,
        runtime_image=runtime.image if runtime is not None else runtime_image(view),
        agentd_image=_agentd_image(settings),
        resources=resources,
        sidecar=settings.agentd_sidecar,
        api_service_url=settings.api_service_url,
        api_public_url=settings.api_public_url,
        inference_relay_url=settings.inference_relay_url,
        preview_origin_base_domain=settings.preview_origin_base_domain,
        upload_staging=settings.upload_staging,
        admin_token=credentials.admin_token,
        dev_preview=view.dev_preview,
        max_active_sessions=_max_active_sessions(view),
    )
    labels = {
        **selector_labels(ws_name),
        LABEL_RUNTIME: sanitize_label(view.runtime or ""),
        # Informational, from the verified owner; it decides nothing: the quota's tenant is
        # this key on the Namespace, which the platform sets, or the vouched owner's digests
        # below (labels the ownership policies let only the controller write).
        LABEL_TENANT: tenant_of(ws),
        **owner_labels(ws),
    }
    volumes = base_volumes(
        claim or pod_names.pvc,
        ws_name,
        relay=bool(settings.inference_relay_url),
        sidecar=settings.agentd_sidecar,
    )
    init_containers = [platform_init(inputs)]
    if script is not None:
        init_containers.append(workspace_setup(inputs, script))
    if not inputs.sidecar:
        init_containers += [platform_bootstrap(inputs), platform_materialize(inputs)]
    else:
        init_containers.append(agentd_sidecar(inputs))
        volumes += sidecar_volumes()
    pod_spec: Obj = {
        "serviceAccountName": pod_names.service_account,
        "automountServiceAccountToken": False,
        "enableServiceLinks": False,
        "terminationGracePeriodSeconds": settings.termination_grace,
        "nodeSelector": {LABEL_ARCH: arch},
        "securityContext": {
            "runAsUser": uid,
            "runAsGroup": gid,
            "fsGroup": gid,
            "fsGroupChangePolicy": "OnRootMismatch",
            "runAsNonRoot": True,
            # The CRD's own seccompProfile is deliberately ignored.
            "seccompProfile": {"type": "RuntimeDefault"},
        },
        "initContainers": init_containers,
        "containers": [workspace_container(inputs)],
        "volumes": volumes,
    }
    runtime_class = runtime_class_of(view, settings)
    if runtime_class:
        pod_spec["runtimeClassName"] = runtime_class
    metadata = owned_metadata(ws, pod_names.pod, labels)
    metadata["annotations"] = {
        ANNOTATION_CREATED_BY: "controller",
        ANNOTATION_RESTART_GENERATION: restart_generation_of(ws),
        ANNOTATION_CREDENTIALS_KEY: credentials.key_id,
    }
    if credentials.rotation:
        metadata["annotations"][ANNOTATION_CREDENTIALS_ROTATION] = str(credentials.rotation)
    if runtime is not None:
        metadata["annotations"][ANNOTATION_RUNTIME_ENV] = runtime.name
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": pod_spec}
