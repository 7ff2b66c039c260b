"""What kube-apiserver's registry strategies do to built-in kinds on create and update.

Only the behaviour the product can observe is emulated: the initial status of pods,
namespaces and PVCs, Secret ``stringData`` and update rules (type and ``immutable``), pod spec
immutability, and the ImageVolume
feature gate being off (the pod strategy then drops image volumes and the mounts that use
them, and keeps env, exactly as recorded on v1.32 in the admission fixtures' README).
"""

from __future__ import annotations

import base64
import re

from tests.kubeapi.kinds import Kind
from tests.kubeapi.status import ApiError, invalid
from wspin.core.objects import Obj

_CONTAINER_LISTS = ("initContainers", "containers", "ephemeralContainers")
#: Pod spec fields an update may change (core/v1 ValidatePodUpdate, without resize).
_MUTABLE_POD_SPEC = ("activeDeadlineSeconds", "tolerations", "terminationGracePeriodSeconds")


NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"


def prepare_create(kind: Kind, obj: Obj, *, image_volume_gate: bool) -> None:
    """Apply the kind's create-time strategy to ``obj`` in place."""
    if kind.custom and kind.status_subresource:
        obj.pop("status", None)
    if kind.group:
        return
    if kind.plural == "pods":
        _validate_pod(obj)
        if not image_volume_gate:
            drop_image_volumes(obj["spec"])
        obj["status"] = {"phase": "Pending", "qosClass": _qos_class(obj["spec"])}
    elif kind.plural == "namespaces":
        label_namespace(obj)
        obj["spec"] = {"finalizers": ["kubernetes"]}
        obj["status"] = {"phase": "Active"}
    elif kind.plural == "persistentvolumeclaims":
        obj["status"] = {"phase": "Pending"}
    elif kind.plural == "secrets":
        obj.setdefault("type", "Opaque")
    fold_string_data(kind, obj)


def label_namespace(obj: Obj) -> None:
    """kube-apiserver keeps ``kubernetes.io/metadata.name`` equal to a namespace's name, on
    create and on every update, so namespace selectors can pick namespaces by name."""
    meta = obj["metadata"]
    meta["labels"] = {**(meta.get("labels") or {}), NAMESPACE_NAME_LABEL: meta["name"]}


def prepare_update(kind: Kind, old: Obj, new: Obj) -> None:
    """Apply the kind's update-time strategy and validation to ``new`` in place."""
    fold_string_data(kind, new)
    if kind.plural == "secrets" and not kind.group:
        _validate_secret_update(old, new)
    if kind.plural == "namespaces" and not kind.group:
        label_namespace(new)
    if kind.plural == "pods" and not kind.group:
        _validate_pod(new)
        if _frozen_pod_spec(old["spec"]) != _frozen_pod_spec(new["spec"]):
            raise invalid(
                "Pod",
                new["metadata"]["name"],
                "spec",
                "Forbidden: pod updates may not change fields other than "
                "`spec.containers[*].image`, `spec.initContainers[*].image`, "
                "`spec.activeDeadlineSeconds`, `spec.tolerations` (only additions to "
                "existing tolerations) or `spec.terminationGracePeriodSeconds`",
            )


def _validate_secret_update(old: Obj, new: Obj) -> None:
    """core/v1 ValidateSecretUpdate: the type never changes (an update without one is
    defaulted to Opaque first), and a Secret marked ``immutable`` keeps its data and the
    mark."""
    name = new["metadata"]["name"]
    new.setdefault("type", "Opaque")
    if new["type"] != old.get("type", "Opaque"):
        raise invalid("Secret", name, "type", f'Invalid value: "{new["type"]}": field is immutable')
    if old.get("immutable") is True:
        if new.get("immutable") is not True:
            raise invalid(
                "Secret", name, "immutable", "Forbidden: field is immutable when `immutable` is set"
            )
        if (new.get("data") or {}) != (old.get("data") or {}):
            raise invalid(
                "Secret", name, "data", "Forbidden: field is immutable when `immutable` is set"
            )


def fold_string_data(kind: Kind, obj: Obj) -> None:
    """Secrets: ``stringData`` is write-only; the server folds it into base64 ``data``."""
    if kind.plural != "secrets" or kind.group or "stringData" not in obj:
        return
    data = obj.setdefault("data", {}) or {}
    for key, value in (obj.pop("stringData") or {}).items():
        data[key] = base64.b64encode(str(value).encode()).decode()
    obj["data"] = data


def drop_image_volumes(spec: Obj) -> None:
    """The gate-off pod strategy: image volumes and every mount of them vanish, env stays."""
    volumes = spec.get("volumes") or []
    dropped = {v.get("name") for v in volumes if "image" in v}
    if not dropped:
        return
    spec["volumes"] = [v for v in volumes if v.get("name") not in dropped]
    if not spec["volumes"]:
        del spec["volumes"]
    for list_name in _CONTAINER_LISTS:
        for container in spec.get(list_name) or []:
            mounts = [m for m in container.get("volumeMounts") or [] if m["name"] not in dropped]
            if mounts:
                container["volumeMounts"] = mounts
            else:
                container.pop("volumeMounts", None)


def _validate_pod(pod: Obj) -> None:
    spec = pod.get("spec")
    name = pod.get("metadata", {}).get("name") or pod.get("metadata", {}).get("generateName", "")
    if not isinstance(spec, dict) or not spec.get("containers"):
        raise invalid("Pod", name, "spec.containers", "Required value")
    for list_name in _CONTAINER_LISTS:
        for n, container in enumerate(spec.get(list_name) or []):
            for field in ("name", "image"):
                if not container.get(field) and not (list_name == "ephemeralContainers"):
                    raise invalid("Pod", name, f"spec.{list_name}[{n}].{field}", "Required value")


def _frozen_pod_spec(spec: Obj) -> Obj:
    frozen = {k: v for k, v in spec.items() if k not in _MUTABLE_POD_SPEC}
    for list_name in ("initContainers", "containers"):
        frozen[list_name] = [
            {k: v for k, v in c.items() if k != "image"} for c in spec.get(list_name) or []
        ]
    return frozen


def _qos_class(spec: Obj) -> str:
    """BestEffort, Guaranteed or Burstable from the containers' cpu/memory resources."""
    containers = [*(spec.get("initContainers") or []), *(spec.get("containers") or [])]
    resources = [c.get("resources") or {} for c in containers]
    if not any(r.get("requests") or r.get("limits") for r in resources):
        return "BestEffort"
    for r in resources:
        limits, requests = r.get("limits") or {}, r.get("requests") or {}
        for name in ("cpu", "memory"):
            if name not in limits or requests.get(name, limits[name]) != limits[name]:
                return "Burstable"
    return "Guaranteed"


def check_name(kind: Kind, name: str) -> None:
    """Names are DNS-1123 subdomains (namespaces: labels), as the API server validates."""
    label = kind.plural == "namespaces" and not kind.group
    pattern = (
        r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
        if label
        else (r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
    )
    limit = 63 if label else 253
    if len(name) > limit or not re.fullmatch(pattern, name):
        raise ApiError(
            422,
            f'{kind.kind} "{name}" is invalid: metadata.name: Invalid value: "{name}": '
            f"a lowercase RFC 1123 {'label' if label else 'subdomain'} must consist of lower "
            "case alphanumeric characters, '-' or '.', and must start and end with an "
            f"alphanumeric character (at most {limit} characters)",
            "Invalid",
        )


_LABEL_NAME = r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
_SUBDOMAIN = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*"


def check_labels(kind: Kind, obj: Obj) -> None:
    """Label keys are qualified names and values at most 63 characters of the label alphabet,
    as the API server validates every object's metadata on every write (its wording)."""
    meta = obj.get("metadata") or {}
    name = str(meta.get("name", ""))
    for key, value in (meta.get("labels") or {}).items():
        problem = _key_problem(str(key))
        if problem is None and not isinstance(value, str):
            problem = "must be a string"
        elif problem is None and len(value) > 63:
            key, problem = value, "must be no more than 63 characters"
        elif problem is None and value and not re.fullmatch(_LABEL_NAME, value):
            key, problem = (
                value,
                (
                    "a valid label must be an empty string or consist of alphanumeric characters, "
                    "'-', '_' or '.', and must start and end with an alphanumeric character"
                ),
            )
        if problem is not None:
            raise invalid(kind.kind, name, "metadata.labels", f'Invalid value: "{key}": {problem}')


def _key_problem(key: str) -> str | None:
    prefix, slash, base = key.rpartition("/")
    if slash and not prefix:
        return "prefix part must be non-empty"
    if len(prefix) > 253:
        return "prefix part must be no more than 253 characters"
    if prefix and not re.fullmatch(_SUBDOMAIN, prefix):
        return (
            "prefix part a lowercase RFC 1123 subdomain must consist of lower case "
            "alphanumeric characters, '-' or '.', and must start and end with an alphanumeric "
            "character"
        )
    if len(base) > 63:
        return "name part must be no more than 63 characters"
    if not re.fullmatch(_LABEL_NAME, base):
        return (
            "name part must consist of alphanumeric characters, '-', '_' or '.', and must "
            "start and end with an alphanumeric character"
        )
    return None
