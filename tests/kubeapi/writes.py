"""The pure rules of one write: typing the body, merging an update, no-op and generation.

Kept apart from the store because none of it needs state: given the stored object and the
request body, these functions decide what the new object is (or which error to answer).
"""

from __future__ import annotations

import copy
import json
from typing import Any

from tests.kubeapi.defaults import label_namespace, prepare_update
from tests.kubeapi.kinds import Kind
from tests.kubeapi.status import bad_request, conflict, invalid, stale
from wspin.core.objects import Obj

#: Metadata only the server sets; an update keeps the stored values whatever the body says.
_SERVER_META = (
    "uid",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "generation",
    "namespace",
    "name",
    "resourceVersion",
)
_VOLATILE_META = ("resourceVersion", "managedFields")


def typed(kind: Kind, body: Any) -> Obj:
    """A copy of ``body`` with apiVersion/kind defaulted from the URL, or a 400.

    Only built-in kinds are defaulted: a custom resource's body is decoded as unstructured
    JSON, which must say its own kind and apiVersion."""
    if not isinstance(body, dict):
        raise bad_request(f"the request body must be a JSON object (a {kind.kind})")
    if kind.custom and not body.get("kind"):
        raise bad_request(
            f"the object provided is unrecognized (must be of type {kind.kind}): "
            f"Object 'Kind' is missing in '{json.dumps(body)}'"
        )
    if kind.custom and not body.get("apiVersion"):
        raise bad_request(
            "the API version in the data () does not match the expected API version "
            f"({kind.api_version})"
        )
    obj = copy.deepcopy(body)
    for field, expected in (("apiVersion", kind.api_version), ("kind", kind.kind)):
        if obj.get(field) in (None, ""):
            obj[field] = expected
        elif obj[field] != expected:
            raise bad_request(
                f"the API version and kind in the body ({obj.get('apiVersion')}, "
                f"{obj.get('kind')}) do not match the URL ({expected!s} for {kind.plural})"
            )
    if not isinstance(obj.setdefault("metadata", {}), dict):
        raise bad_request("metadata must be an object")
    return obj


def check_same_namespace(meta: Obj, namespace: str) -> None:
    if meta.get("namespace") not in (None, "", namespace):
        raise bad_request(
            "the namespace of the provided object does not match the namespace sent on the request"
        )


def merged_update(kind: Kind, old: Obj, new: Obj, *, status: bool) -> Obj:
    """The object an update of ``old`` with ``new`` stores (generation not yet bumped).

    ``status`` is the ``/status`` endpoint: the status changes, and on built-in kinds the
    metadata too (``_status_update``). The main endpoint of a kind with a status subresource
    keeps the stored status. resourceVersion and uid in the body
    are preconditions.
    """
    name, meta, old_meta = old["metadata"]["name"], new["metadata"], old["metadata"]
    if meta.get("resourceVersion") and meta["resourceVersion"] != old_meta["resourceVersion"]:
        raise stale(kind.plural, kind.group, name)
    if meta.get("uid") and meta["uid"] != old_meta["uid"]:
        raise conflict(
            kind.plural,
            kind.group,
            name,
            f"Precondition failed: UID in precondition: {meta['uid']}, UID in object meta: "
            f"{old_meta['uid']}",
        )
    if status:
        return _status_update(kind, old, new)
    result = copy.deepcopy(new)
    _keep_server_meta(result, old_meta)
    if kind.status_subresource:
        result.pop("status", None)
        if "status" in old:
            result["status"] = copy.deepcopy(old["status"])
    if old_meta.get("deletionTimestamp"):
        added = set(meta.get("finalizers") or ()) - set(old_meta.get("finalizers") or ())
        if added:
            raise invalid(
                kind.kind,
                name,
                "metadata.finalizers",
                "Forbidden: no new finalizers can be added if the object is being deleted",
            )
    prepare_update(kind, old, result)
    if kind.tracks_generation and _spec_part(kind, result) != _spec_part(kind, old):
        result["metadata"]["generation"] = int(old_meta.get("generation", 1)) + 1
    return result


def _keep_server_meta(result: Obj, old_meta: Obj) -> None:
    for key in _SERVER_META:
        result["metadata"].pop(key, None)
        if key in old_meta:
            result["metadata"][key] = old_meta[key]


def _status_update(kind: Kind, old: Obj, new: Obj) -> Obj:
    """What a write through ``/status`` stores, per kube-apiserver v1.32's status strategies.

    A custom resource keeps everything but its status (the apiextensions status strategy
    copies the old object over the new one). A built-in kind keeps its spec, and takes the
    rest of the metadata from the request: pods, PVCs, Services and Namespaces apply label,
    annotation and finalizer changes made through ``/status``. On top of that pods keep their
    ownerReferences (``podStatusStrategy``: old kubelets corrupted them) and Deployments their
    labels.
    """
    if kind.custom:
        result = copy.deepcopy(old)
        result.pop("status", None)
        if new.get("status") is not None:
            result["status"] = new["status"]
        return result
    result = {k: copy.deepcopy(v) for k, v in old.items() if k not in ("metadata", "status")}
    result["metadata"] = copy.deepcopy(new["metadata"])
    if new.get("status") is not None:
        result["status"] = copy.deepcopy(new["status"])
    old_meta, meta = old["metadata"], result["metadata"]
    _keep_server_meta(result, old_meta)
    kept = {"pods": ("ownerReferences",), "deployments": ("labels",)}.get(kind.plural, ())
    for key in kept:
        meta.pop(key, None)
        if key in old_meta:
            meta[key] = copy.deepcopy(old_meta[key])
    if kind.plural == "namespaces" and not kind.group:
        label_namespace(result)
    return result


def ephemeral_update(old: Obj, new: Obj) -> Obj:
    """``pods/ephemeralcontainers``: only ``spec.ephemeralContainers`` changes, and only by
    additions (kube-apiserver refuses removing or changing one, or reusing a name)."""
    name = old["metadata"]["name"]
    meta = new.get("metadata") or {}
    if (
        meta.get("resourceVersion")
        and meta["resourceVersion"] != old["metadata"]["resourceVersion"]
    ):
        raise stale("pods", "", name)
    before = (old.get("spec") or {}).get("ephemeralContainers") or []
    after = (new.get("spec") or {}).get("ephemeralContainers") or []
    if after[: len(before)] != before:
        raise invalid(
            "Pod",
            name,
            "spec.ephemeralContainers",
            "Forbidden: existing ephemeral containers may not be changed",
        )
    taken = {
        c.get("name")
        for kind in ("containers", "initContainers")
        for c in old["spec"].get(kind) or []
    }
    for container in after[len(before) :]:
        if (
            not isinstance(container, dict)
            or not container.get("name")
            or not container.get("image")
        ):
            raise invalid("Pod", name, "spec.ephemeralContainers", "Required value: name and image")
        if container["name"] in taken:
            raise invalid(
                "Pod",
                name,
                "spec.ephemeralContainers[0].name",
                f'Duplicate value: "{container["name"]}"',
            )
        taken.add(container["name"])
    result = copy.deepcopy(old)
    result["spec"]["ephemeralContainers"] = copy.deepcopy(after)
    return result


def bound_pod(old: Obj, binding: Obj) -> Obj:
    """``pods/binding``: the pod with ``spec.nodeName`` set to the Binding's target and the
    Binding's annotations copied onto it (kube-apiserver's ``setPodNodeAndMetadata``: a
    scheduler may leave annotations this way). An already assigned pod is a 409."""
    name = old["metadata"]["name"]
    target = binding.get("target") or {}
    node = target.get("name") if isinstance(target, dict) else None
    if not isinstance(node, str) or not node:
        raise invalid("Binding", name, "target.name", "Required value")
    assigned = (old.get("spec") or {}).get("nodeName")
    if assigned:
        raise conflict("pods", "", name, f"pod {name} is already assigned to node {assigned!r}")
    result = copy.deepcopy(old)
    result["spec"]["nodeName"] = node
    annotations = (binding.get("metadata") or {}).get("annotations") or {}
    if annotations:
        meta = result["metadata"]
        meta["annotations"] = {**(meta.get("annotations") or {}), **annotations}
    return result


def is_no_op(old: Obj, new: Obj) -> bool:
    """A write that changes nothing neither bumps resourceVersion nor emits an event."""
    return _comparable(old) == _comparable(new)


def _comparable(obj: Obj) -> Obj:
    meta = {k: v for k, v in obj.get("metadata", {}).items() if k not in _VOLATILE_META}
    return {**obj, "metadata": meta}


def _spec_part(kind: Kind, obj: Obj) -> Obj:
    """What ``generation`` tracks: everything but metadata (and status, with the subresource)."""
    skip = {"metadata", "status"} if kind.status_subresource else {"metadata"}
    return {k: v for k, v in obj.items() if k not in skip}
