"""ServiceAccounts as a v1.32 cluster has them: the controller manager's ``default`` account in
every namespace, and the ServiceAccount admission plugin on pod creates.

The plugin (``plugin/pkg/admission/serviceaccount``) gives a pod that names no account the
namespace's ``default`` one and refuses a pod whose account does not exist, before mutating
webhooks run and for dry runs too, with ``admission.NewForbidden``: 403, ``pods "<name>" is
forbidden: error looking up service account <ns>/<account>: serviceaccount "<account>" not
found`` (``<name>`` is the generateName prefix when the pod has no name yet). The projected
token volume it mounts into pods that do not opt out is not emulated.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

from tests.kubeapi.status import ApiError
from wspin.core.objects import Obj

DEFAULT_ACCOUNT: Final = "default"


def default_account(namespace: str) -> Obj:
    """What the controller manager's serviceaccounts controller creates in a new namespace."""
    return {"metadata": {"name": DEFAULT_ACCOUNT, "namespace": namespace}}


def admit_service_account(
    namespace: str, pod: Obj, lookup: Callable[[str, str], Obj | None]
) -> None:
    """Name the ``default`` account on a pod that names none, then refuse the pod unless its
    account exists (``lookup(namespace, name)``)."""
    spec = pod.get("spec")
    if not isinstance(spec, dict):
        return  # validation answers with its own error
    account = str(spec.get("serviceAccountName") or "") or DEFAULT_ACCOUNT
    spec["serviceAccountName"] = account
    if lookup(namespace, account) is not None:
        return
    meta = pod.get("metadata") or {}
    name = str(meta.get("name") or meta.get("generateName") or "")
    raise ApiError(
        403,
        f'pods "{name}" is forbidden: error looking up service account {namespace}/{account}: '
        f'serviceaccount "{account}" not found',
        "Forbidden",
        {"name": name, "kind": "pods"},
    )
