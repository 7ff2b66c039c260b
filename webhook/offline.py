"""Offline injection for ``wspin inject``: manifests in, injected manifests out.

The same ``inject`` function the webhook runs, applied to Pods, Lists, and the pod templates
of workload kinds, like ``istioctl kube-inject``. Other objects pass through untouched.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import jsonpatch
import yaml

from webhook.inject import InjectConfig, inject
from wspin.core.errors import WspinError
from wspin.core.objects import Obj

# Where each workload kind keeps its pod template (metadata + spec).
TEMPLATE_PATHS: dict[str, tuple[str, ...]] = {
    "Deployment": ("spec", "template"),
    "StatefulSet": ("spec", "template"),
    "DaemonSet": ("spec", "template"),
    "ReplicaSet": ("spec", "template"),
    "Job": ("spec", "template"),
    "CronJob": ("spec", "jobTemplate", "spec", "template"),
}


class ManifestError(WspinError):
    """Input that is not a Kubernetes manifest we can read."""


def load_documents(text: str, source: str) -> list[Obj]:
    """Every non-empty YAML/JSON document in ``text``; errors name the source and document."""
    try:
        documents = [doc for doc in yaml.safe_load_all(text) if doc is not None]
    except yaml.YAMLError as err:
        raise ManifestError(
            f"{source}: not valid YAML or JSON: {err}", "pass a Pod, a List or a workload manifest"
        ) from err
    for index, doc in enumerate(documents, 1):
        if not isinstance(doc, dict) or "kind" not in doc:
            raise ManifestError(
                f"{source}: document {index} is not a Kubernetes object (no 'kind')",
                "pass a Pod, a List or a workload manifest",
            )
    return documents


def inject_object(obj: Obj, cfg: InjectConfig, warnings: list[str]) -> Obj:
    """The object with delivery injected into its pod (or pod template), if it has one."""
    kind = obj.get("kind")
    if kind == "List" or (isinstance(kind, str) and kind.endswith("List") and "items" in obj):
        return {**obj, "items": [inject_object(item, cfg, warnings) for item in obj["items"]]}
    if kind == "Pod":
        return _inject_pod(obj, cfg, warnings, str(obj.get("metadata", {}).get("name", "")))
    path = TEMPLATE_PATHS.get(str(kind))
    if path is None:
        return obj
    parent: Any = obj
    for key in path[:-1]:
        parent = parent.get(key) if isinstance(parent, dict) else None
    template = parent.get(path[-1]) if isinstance(parent, dict) else None
    if not isinstance(template, dict):
        return obj
    name = f"{kind}/{obj.get('metadata', {}).get('name', '')}"
    injected = _inject_pod(template, cfg, warnings, name)
    result: Obj = jsonpatch.apply_patch(
        obj, [{"op": "replace", "path": "/" + "/".join(path), "value": injected}]
    )
    return result


def _inject_pod(pod: Obj, cfg: InjectConfig, warnings: list[str], name: str) -> Obj:
    injection = inject(pod, cfg)
    warnings.extend(f"{name}: {warning}" for warning in injection.warnings)
    if not injection.patch:
        return pod
    patched: Obj = jsonpatch.apply_patch(pod, list(injection.patch))
    return patched


def dump_documents(documents: Iterable[Obj]) -> str:
    return yaml.safe_dump_all(list(documents), sort_keys=False, default_flow_style=False)
