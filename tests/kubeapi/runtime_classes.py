"""The RuntimeClass admission plugin on pod creates, as kube-apiserver v1.32 runs it
(``plugin/pkg/admission/runtimeclass``): a pod naming a RuntimeClass that does not exist is
refused before mutating webhooks run, dry runs too, with ``admission.NewForbidden``: 403,
``pods "<name>" is forbidden: pod rejected: RuntimeClass "<class>" not found``. The class's
overhead and scheduling, which the plugin copies onto the pod, are not emulated.
"""

from __future__ import annotations

from collections.abc import Callable

from tests.kubeapi.status import ApiError
from wspin.core.objects import Obj


def admit_runtime_class(pod: Obj, lookup: Callable[[str], Obj | None]) -> None:
    """Refuse ``pod`` when its ``spec.runtimeClassName`` names no stored RuntimeClass."""
    spec = pod.get("spec")
    wanted = spec.get("runtimeClassName") if isinstance(spec, dict) else None
    if not isinstance(wanted, str) or not wanted or lookup(wanted) is not None:
        return
    meta = pod.get("metadata") or {}
    name = str(meta.get("name") or meta.get("generateName") or "")
    raise ApiError(
        403,
        f'pods "{name}" is forbidden: pod rejected: RuntimeClass "{wanted}" not found',
        "Forbidden",
        {"name": name, "kind": "pods"},
    )
