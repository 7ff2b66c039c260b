"""The chart's workspace-pod policies, judged with CEL as kube-apiserver would: their names,
the judge, and the admission requests they see (captures, as the real injector leaves them)."""

from __future__ import annotations

import copy
import json
from typing import Any

import jsonpatch

from tests.chart.helm import NAMESPACE, Rendered
from tests.fixtures import ADMISSION
from tests.kubeapi.policies import Denial, judge
from webhook.demo import DEMO_CONFIG
from webhook.inject import inject
from wspin.core.objects import Obj

DELIVERY = f"wspin-{NAMESPACE}-workspace-pod-delivery"
INTEGRITY = f"wspin-{NAMESPACE}-workspace-pod-integrity"
DEBUG = f"wspin-{NAMESPACE}-workspace-pod-debug"


def check(rendered: Rendered, policy: str, request: Obj) -> Denial | None:
    (binding,) = [
        b
        for b in rendered.of_kind("ValidatingAdmissionPolicyBinding")
        if b["spec"]["policyName"] == policy
    ]
    return judge(rendered.get("ValidatingAdmissionPolicy", policy), binding, request)


def capture(name: str) -> Obj:
    request: Obj = json.loads((ADMISSION / name).read_text())["request"]
    return request


def injected(name: str = "pod-create-workspace.json") -> Obj:
    """A CREATE capture with its object as the real injector leaves it."""
    request = capture(name)
    patch = inject(request["object"], DEMO_CONFIG).patch
    request["object"] = jsonpatch.apply_patch(request["object"], list(patch))
    return request


def updated(request: Obj, change: Any) -> Obj:
    """An UPDATE of the stored pod in ``request`` whose new object ``change`` edits."""
    old = copy.deepcopy(request["object"])
    new = copy.deepcopy(old)
    change(new)
    return {
        **request,
        "operation": "UPDATE",
        "object": new,
        "oldObject": old,
        "options": {"kind": "UpdateOptions", "apiVersion": "meta.k8s.io/v1"},
    }


def container(pod: Obj, name: str) -> Obj:
    found: Obj = next(
        c
        for c in pod["spec"]["containers"] + pod["spec"].get("initContainers", [])
        if c["name"] == name
    )
    return found


def stored() -> Obj:
    """The captured UPDATE of a stored workspace pod (a label added), injected form."""
    request = capture("extra-gate-off-pod-update-labels-existing-imagevolume.json")
    for key in ("object", "oldObject"):
        pod = request[key]
        pod["metadata"].setdefault("annotations", {})["llmsafespaces.dev/delivery"] = (
            DEMO_CONFIG.receipt
        )
    return request
