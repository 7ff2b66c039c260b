"""The API calls each wspin process makes, as ``wspin check`` asks RBAC about them.

Read from the process's own arguments, because what it calls depends on them: the webhook
reads its pins cache only for an artifact without per-arch hashes, keeps its certificate
Secret, Lease and webhook configurations only with ``--self-managed-certs``, and dry-runs pods
only with its image-volume probe on; the controller takes its Lease only with leader
election. The chart grants exactly these (tests/chart/test_rbac_matches_code.py holds the
chart to the code's calls); relay staging and InferenceRelay permissions are not listed here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from controller.workspace.pod.credential_keys import KEY_SECRET as CREDENTIALS_KEY_SECRET
from wspin.core.contract import ARTIFACTS
from wspinctl.install import LEADER_LEASE, Installation, ProcessArgs

_CRD_GROUP = "llmsafespaces.dev"
_COORDINATION = "coordination.k8s.io"
_ADMISSION = "admissionregistration.k8s.io"


@dataclass(frozen=True)
class Call:
    """One permission: verb on group/resource[/subresource], in a namespace ("" = cluster
    wide), on one name ("" = any)."""

    verb: str
    group: str
    resource: str
    namespace: str = ""
    name: str = ""
    subresource: str = ""

    def attributes(self) -> dict[str, Any]:
        """The SubjectAccessReview ``resourceAttributes``."""
        attrs = {"verb": self.verb, "group": self.group, "resource": self.resource}
        for key in ("namespace", "name", "subresource"):
            if value := getattr(self, key):
                attrs[key] = value
        return attrs

    def describe(self) -> str:
        resource = f"{self.resource}/{self.subresource}" if self.subresource else self.resource
        where = f" in {self.namespace}" if self.namespace else " (cluster-wide)"
        return f"{self.verb} {resource}{' ' + self.name if self.name else ''}{where}"


def _each(verbs: str, group: str, resource: str, **kw: str) -> list[Call]:
    return [Call(verb, group, resource, **kw) for verb in verbs.split()]


def webhook_calls(args: ProcessArgs, install: Installation) -> list[Call]:
    ns = install.namespace
    calls: list[Call] = _each("list watch", "", "namespaces")
    if not args.switch("--skip-image-volume-probe"):
        calls += _each("create", "", "pods", namespace=ns)
    for artifact in ARTIFACTS:
        pinned = all(args.value(f"--{artifact.name}-binary-sha256-{a}") for a in ("amd64", "arm64"))
        if not pinned:
            cache = artifact.pins_configmap
            calls += _each("get update", "", "configmaps", namespace=ns, name=cache)
            calls += _each("create", "", "configmaps", namespace=ns)
    if args.switch("--self-managed-certs"):
        secret = args.value("--secret") or f"{install.webhook}-tls"
        calls += _each("get update", "", "secrets", namespace=ns, name=secret)
        calls += _each("create", "", "secrets", namespace=ns)
        calls += _each(
            "get update", _COORDINATION, "leases", namespace=ns, name=f"{secret}-authority"
        )
        calls += _each("create", _COORDINATION, "leases", namespace=ns)
        mutating = args.value("--mutating-webhook-name") or install.mutating_webhook
        validating = args.value("--validating-webhook-name") or install.validating_webhook
        calls += _each("get update", _ADMISSION, "mutatingwebhookconfigurations", name=mutating)
        calls += _each("get update", _ADMISSION, "validatingwebhookconfigurations", name=validating)
    return list(dict.fromkeys(calls))


def controller_calls(args: ProcessArgs, install: Installation) -> list[Call]:
    calls = [
        *_each("get list watch patch delete", _CRD_GROUP, "workspaces"),
        *_each("patch", _CRD_GROUP, "workspaces", subresource="status"),
        *_each("update", _CRD_GROUP, "workspaces", subresource="finalizers"),
        *_each("get list watch create delete", "", "pods"),
        *_each("list watch create delete", "", "persistentvolumeclaims"),
        *_each("create", "", "serviceaccounts"),
        *_each("create update", "", "secrets"),
        *_each("create list", "", "events"),
        *_each("list watch", "", "namespaces"),
        *_each("get", "", "secrets", namespace=install.namespace, name=CREDENTIALS_KEY_SECRET),
        *_each("create", "", "secrets", namespace=install.namespace),
    ]
    if args.switch("--enable-leader-election"):
        ns = install.namespace
        calls += _each("get update", _COORDINATION, "leases", namespace=ns, name=LEADER_LEASE)
        calls += _each("create", _COORDINATION, "leases", namespace=ns)
    return calls


def needed_calls(component: str, args: ProcessArgs, install: Installation) -> list[Call]:
    """The calls ``component`` ("webhook" or "controller") makes with these arguments."""
    if component == "webhook":
        return webhook_calls(args, install)
    return controller_calls(args, install)
