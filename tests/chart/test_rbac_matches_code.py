"""RBAC against the code: every Kubernetes call the processes make is granted, nothing else is.

The ledger below lists, module by module, the ``Kube`` calls the code makes and the grants they
need. An AST scan of the packages counts those calls, so a new call (or a removed one) fails
here until the ledger says what it needs; the chart's Roles and ClusterRoles must then grant
exactly the ledger. A missing verb is an outage in production (a 403 at the worst moment); an
extra one is privilege nobody uses.
"""

from __future__ import annotations

import ast
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import pytest

from controller.relay.drivers.providers import PROVIDERS
from controller.relay.peers import PEERS_CONFIGMAP
from controller.relay.tokens import TOKENS_SECRET
from controller.settings import LeaderElectionSettings
from controller.staging.secrets import HPKE_PUB_SECRET, MINT_KEY_SECRET
from controller.workspace.pod.credential_keys import KEY_SECRET
from tests.chart.helm import NAMESPACE, REPO, Rendered, render
from wspin.core.contract import AGENTD, OPENCODE

Atom = tuple[str, str, str, str, str]
"""(scope, apiGroup, resource, verb, resourceName or "") — one permission, fully expanded.
Scope: "cluster" (ClusterRole), "release" (Role in the release namespace), "relay" (Role in
the relay staging namespace)."""

KUBE_VERBS = {
    "get",
    "get_or_none",
    "list",
    "list_pages",
    "watch",
    "create",
    "replace",
    "patch",
    "delete",
    "delete_collection",
}
PACKAGES = ("webhook", "certs", "controller", "wspin", "wspinctl")
CRD_GROUP = "llmsafespaces.dev"
ADMISSION = "admissionregistration.k8s.io"
COORDINATION = "coordination.k8s.io"
DISCOVERY = "discovery.k8s.io"
RELAY_NAMESPACE = "llm-relay"

CERT_SECRET = "wspin-webhook-tls"
PINS = (AGENTD.pins_configmap, OPENCODE.pins_configmap)


def grant(
    scope: str, resource: str, verbs: Iterable[str], names: Iterable[str] = ("",), group: str = ""
) -> frozenset[Atom]:
    return frozenset((scope, group, resource, verb, name) for verb in verbs for name in names)


def union(*parts: frozenset[Atom]) -> frozenset[Atom]:
    return frozenset().union(*parts)


@dataclass(frozen=True)
class Use:
    """The ``Kube`` calls one module makes (method → count) and the grants they need."""

    module: str
    calls: Mapping[str, int]
    webhook: frozenset[Atom] = field(default_factory=frozenset)
    controller: frozenset[Atom] = field(default_factory=frozenset)


LEDGER = (
    # -- the webhook ------------------------------------------------------------------------
    Use(  # the pins cache: read when the registry is down, written after a registry read
        "webhook/pins.py",
        {"get": 2, "get_or_none": 1, "create": 1, "replace": 1},
        webhook=union(
            grant("release", "configmaps", ["get", "update"], PINS),
            grant("release", "configmaps", ["create"]),
        ),
    ),
    Use(  # the image-volume probe: a server-side dry-run pod in the own namespace
        "webhook/imagevolume_probe.py",
        {"create": 1},
        webhook=grant("release", "pods", ["create"]),
    ),
    Use(  # self-managed certificates: the CA and serving certificate Secret
        "certs/store.py",
        {"get_or_none": 1, "create": 1, "replace": 1},
        webhook=union(
            grant("release", "secrets", ["get", "update"], [CERT_SECRET]),
            grant("release", "secrets", ["create"]),
        ),
    ),
    Use(  # self-managed certificates: each replica reports the leaf it serves in one named
        # ConfigMap; the Lease holder reads which replicas the Service routes to
        "certs/reports.py",
        {"patch": 1, "create": 1, "get_or_none": 2, "list": 1},
        webhook=union(
            grant("release", "configmaps", ["get", "patch"], [f"{CERT_SECRET}-serving"]),
            grant("release", "configmaps", ["create"]),
            grant("release", "endpointslices", ["list"], group=DISCOVERY),
        ),
    ),
    Use(  # self-managed certificates: the caBundle of the two webhook configurations, and
        # (every replica, for readiness) whether they carry the CA of the served certificate
        "certs/cabundle.py",
        {"get": 2, "replace": 1},
        webhook=union(
            grant(
                "cluster",
                "mutatingwebhookconfigurations",
                ["get", "update"],
                [f"wspin-webhook-{NAMESPACE}"],
                ADMISSION,
            ),
            grant(
                "cluster",
                "validatingwebhookconfigurations",
                ["get", "update"],
                [f"wspin-webhook-{NAMESPACE}-workspaces"],
                ADMISSION,
            ),
        ),
    ),
    Use(  # Leases: the certificate authority's (webhook) and the leader's (controller)
        "wspin/kube/leader.py",
        {"get_or_none": 2, "create": 1, "replace": 2},
        webhook=union(
            grant(
                "release", "leases", ["get", "update"], [f"{CERT_SECRET}-authority"], COORDINATION
            ),
            grant("release", "leases", ["create"], group=COORDINATION),
        ),
        controller=union(
            grant(
                "release",
                "leases",
                ["get", "update"],
                [LeaderElectionSettings().name],
                COORDINATION,
            ),
            grant("release", "leases", ["create"], group=COORDINATION),
        ),
    ),
    # -- operator commands: they run with the operator's own credentials, never a chart
    # ServiceAccount, so they need no grant (only dry runs and reviews are ever created) ----
    Use(  # wspin check: reads, two dry-run pods, SubjectAccessReviews
        "wspinctl/check.py",
        {"get_or_none": 1, "create": 3},
    ),
    Use(  # wspin status: the webhook Deployment, workspace pods and Workspaces
        "wspinctl/status.py",
        {"get_or_none": 1, "list": 2},
    ),
    Use(  # the start check: one item of each resource the process watches, and its
        # namespace by name; both are lists the caches' grants below already allow
        "wspin/kube/preflight.py",
        {"list": 2},
    ),
    # -- the controller: caches -------------------------------------------------------------
    Use(  # list-then-watch: the controller's caches of Workspaces, their pods and PVCs, and
        # InferenceRelays; the webhook's runtime catalogue, the Namespaces' labels and (with a
        # tenant quota) the workspace pods it counts
        "wspin/kube/informer.py",
        {"list_pages": 1, "watch": 1},
        webhook=union(
            grant("cluster", "runtimeenvironments", ["list", "watch"], group=CRD_GROUP),
            grant("cluster", "namespaces", ["list", "watch"]),
            grant("cluster", "pods", ["list", "watch"]),
        ),
        controller=union(
            grant("cluster", "networkpolicies", ["list", "watch"], group="networking.k8s.io"),
            grant("cluster", "runtimeenvironments", ["list", "watch"], group=CRD_GROUP),
            grant("cluster", "workspaces", ["list", "watch"], group=CRD_GROUP),
            grant("cluster", "pods", ["list", "watch"]),
            grant("cluster", "persistentvolumeclaims", ["list", "watch"]),
            grant("cluster", "inferencerelays", ["list", "watch"], group=CRD_GROUP),
            grant("cluster", "namespaces", ["list", "watch"]),
        ),
    ),
    # -- the controller: Workspaces ---------------------------------------------------------
    Use(  # the pod, read live before the finalizer is released
        "controller/workspace/reconcile/reconciler.py",
        {"get_or_none": 1},
        controller=grant("cluster", "pods", ["get"]),
    ),
    Use(  # the live Workspace before a verify-failure or boot-failure Event
        "controller/toolkit/episodes.py",
        {"get_or_none": 1},
        controller=grant("cluster", "workspaces", ["get"], group=CRD_GROUP),
    ),
    Use(  # a workspace pod's Warning Events, one bounded page, while it does not start
        "controller/workspace/recovery/pod_events.py",
        {"list": 1},
        controller=grant("cluster", "events", ["list"]),
    ),
    Use(  # the owned objects: PVC, ServiceAccount and pod created (one helper; a create
        # answered AlreadyExists is read back for its owner), the password Secret created or
        # replaced whole (never read), the pod deleted
        "controller/workspace/pod/writes.py",
        {"create": 2, "replace": 1, "get_or_none": 1, "delete": 1},
        controller=union(
            grant("cluster", "pods", ["get", "create", "delete"]),
            grant("cluster", "persistentvolumeclaims", ["get", "create"]),
            grant("cluster", "serviceaccounts", ["get", "create"]),
            grant("cluster", "secrets", ["create", "update"]),
        ),
    ),
    Use(  # the consumed spec.suspend request, removed by a JSON patch that tests its value
        "controller/workspace/reconcile/suspension.py",
        {"patch": 1},
        controller=grant("cluster", "workspaces", ["patch"], group=CRD_GROUP),
    ),
    Use(  # the force-recycle marker, removed by a JSON patch that tests its value
        "controller/workspace/agent/drain.py",
        {"patch": 1},
        controller=grant("cluster", "workspaces", ["patch"], group=CRD_GROUP),
    ),
    Use(  # a Workspace kept Suspended past spec.ttlSecondsAfterSuspended: its own PVC
        # deleted by uid (kept as Terminated), or the Workspace deleted by uid (ttlAction delete)
        "controller/workspace/reconcile/act.py",
        {"delete": 2},
        controller=union(
            grant("cluster", "workspaces", ["delete"], group=CRD_GROUP),
            grant("cluster", "persistentvolumeclaims", ["delete"]),
        ),
    ),
    Use(  # the workspace credentials key in the controller's namespace: read by name,
        # created on first start (a create cannot be name-restricted)
        "controller/workspace/pod/credential_keys.py",
        {"get_or_none": 2, "create": 1},
        controller=union(
            grant("release", "secrets", ["get"], [KEY_SECRET]),
            grant("release", "secrets", ["create"]),
        ),
    ),
    Use(  # each Workspace's egress policy: created, replaced on change, deleted when unneeded
        "controller/workspace/egress/sync.py",
        {"create": 1, "replace": 1, "delete": 1},
        controller=grant(
            "cluster", "networkpolicies", ["create", "update", "delete"], group="networking.k8s.io"
        ),
    ),
    # -- the controller: the reconciler toolkit, for Workspaces and InferenceRelays ----------
    Use(
        "controller/toolkit/events.py",
        {"create": 1},
        controller=grant("cluster", "events", ["create"]),
    ),
    Use(  # finalizer add (with the request for the owner record of a Workspace that
        # predates it) and remove
        "controller/toolkit/finalizers.py",
        {"patch": 2},
        controller=union(
            grant("cluster", "workspaces", ["patch"], group=CRD_GROUP),
            grant("cluster", "inferencerelays", ["patch"], group=CRD_GROUP),
        ),
    ),
    Use(  # /status merge patches
        "controller/toolkit/status.py",
        {"patch": 1},
        controller=union(
            grant("cluster", "workspaces/status", ["patch"], group=CRD_GROUP),
            grant("cluster", "inferencerelays/status", ["patch"], group=CRD_GROUP),
        ),
    ),
    Use(  # the relay-router peers ConfigMap and the relay VM tokens Secret
        "controller/toolkit/upserts.py",
        {"get_or_none": 1, "get": 1, "create": 1, "replace": 1},
        controller=union(
            grant("release", "configmaps", ["get", "update"], [PEERS_CONFIGMAP]),
            grant("release", "configmaps", ["create"]),
            grant("release", "secrets", ["get", "update"], [TOKENS_SECRET]),
            grant("release", "secrets", ["create"]),
        ),
    ),
    # -- the controller: relay staging ------------------------------------------------------
    Use(  # the bookkeeping in the Workspace's status; an earlier release's annotations removed
        "controller/staging/desired.py",
        {"patch": 2},
        controller=union(
            grant("cluster", "workspaces/status", ["patch"], group=CRD_GROUP),
            grant("cluster", "workspaces", ["patch"], group=CRD_GROUP),
        ),
    ),
    Use(  # envelopes written blind and deleted by label; only two Secrets are read, by name
        "controller/staging/secrets.py",
        {"get_or_none": 1, "create": 1, "replace": 1, "delete_collection": 1},
        controller=union(
            grant("relay", "secrets", ["get"], [HPKE_PUB_SECRET, MINT_KEY_SECRET]),
            grant("relay", "secrets", ["create", "update", "deletecollection"]),
        ),
    ),
    Use(  # the per-workspace handoff Secret (its name varies with the Workspace)
        "controller/staging/handoff.py",
        {"get_or_none": 1, "replace": 1, "create": 1},
        controller=grant("cluster", "secrets", ["get", "update", "create"]),
    ),
    # -- the controller: InferenceRelays ----------------------------------------------------
    Use(  # the rotate annotation, cleared once status records the rotation
        "controller/relay/reconciler.py",
        {"patch": 1},
        controller=grant("cluster", "inferencerelays", ["patch"], group=CRD_GROUP),
    ),
    Use(  # the cluster id: the kube-system namespace's UID
        "controller/relay/identity.py",
        {"get": 1},
        controller=grant("cluster", "namespaces", ["get"], ["kube-system"]),
    ),
    Use(
        "controller/relay/orphans.py",
        {"list": 1},
        controller=grant("cluster", "inferencerelays", ["list"], group=CRD_GROUP),
    ),
    Use(
        "controller/relay/tokens.py",
        {"get_or_none": 1},
        controller=grant("release", "secrets", ["get"], [TOKENS_SECRET]),
    ),
    Use(
        "controller/relay/drivers/aws.py",
        {"get_or_none": 1},
        controller=grant("release", "secrets", ["get"], [PROVIDERS["aws"].credentials_secret]),
    ),
    Use(
        "controller/relay/drivers/oci.py",
        {"get_or_none": 1},
        controller=grant("release", "secrets", ["get"], [PROVIDERS["oci"].credentials_secret]),
    ),
)

IMPLICIT_CONTROLLER = grant("cluster", "workspaces/finalizers", ["update"], group=CRD_GROUP)
"""Not a call: the API server's OwnerReferencesPermissionEnforcement admission requires update
on the owner's finalizers subresource to set ``blockOwnerDeletion``, which every object the
controller creates for a Workspace (pod, PVC, ServiceAccount, handoff Secret) carries."""


def kube_calls_in_code() -> Counter[tuple[str, str]]:
    """(module, method) → how often a ``kube.<verb>(…)`` or ``<x>.kube.<verb>(…)`` call occurs."""
    found: Counter[tuple[str, str]] = Counter()
    for package in PACKAGES:
        for path in sorted((REPO / package).rglob("*.py")):
            module = path.relative_to(REPO).as_posix()
            if module == "wspin/kube/client.py":  # the client itself
                continue
            for node in ast.walk(ast.parse(path.read_text(), module)):
                if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
                    continue
                receiver = node.func.value
                named_kube = (isinstance(receiver, ast.Name) and receiver.id == "kube") or (
                    isinstance(receiver, ast.Attribute) and receiver.attr == "kube"
                )
                if named_kube and node.func.attr in KUBE_VERBS:
                    found[(module, node.func.attr)] += 1
    return found


def ledger_calls() -> Counter[tuple[str, str]]:
    return Counter({(use.module, m): n for use in LEDGER for m, n in use.calls.items()})


def ledger_grants(component: str) -> frozenset[Atom]:
    grants = union(*(getattr(use, component) for use in LEDGER))
    return grants | IMPLICIT_CONTROLLER if component == "controller" else grants


def chart_grants(rendered: Rendered, component: str) -> frozenset[Atom]:
    atoms: set[Atom] = set()
    for doc in rendered.of_kind("Role") + rendered.of_kind("ClusterRole"):
        meta = doc["metadata"]
        if meta["labels"].get("app.kubernetes.io/component") != component:
            continue
        scope = "cluster"
        if doc["kind"] == "Role":
            scope = {NAMESPACE: "release", RELAY_NAMESPACE: "relay"}[meta["namespace"]]
        for rule in doc["rules"]:
            for group in rule["apiGroups"]:
                for resource in rule["resources"]:
                    atoms |= grant(
                        scope, resource, rule["verbs"], rule.get("resourceNames") or [""], group
                    )
    return frozenset(atoms)


@pytest.fixture(scope="module")
def every_api_feature() -> Rendered:
    """Everything that talks to the API switched on: self-managed certificates, pins read from
    the registry (so the cache is used), the image-volume probe, leader election, relay staging
    and InferenceRelay with the real cloud drivers (they read their credential Secrets)."""
    no_hashes: dict[str, Any] = {
        f"{artifact}Delivery.binarySHA256{arch}": ""
        for artifact in ("agentd", "opencode")
        for arch in ("Amd64", "Arm64")
    }
    return render(
        ("minimal.yaml", "full.yaml"), {**no_hashes, "controller.inferenceRelay.cloud": ""}
    )


def test_every_kube_call_in_the_code_is_in_the_rbac_ledger() -> None:
    in_code, in_ledger = kube_calls_in_code(), ledger_calls()
    assert in_code == in_ledger, (
        f"calls not in the ledger: {dict(in_code - in_ledger)}; "
        f"ledger entries with no call: {dict(in_ledger - in_code)}"
    )


@pytest.mark.parametrize("component", ["webhook", "controller"])
def test_the_chart_grants_exactly_what_the_code_calls(
    every_api_feature: Rendered, component: str
) -> None:
    granted, needed = chart_grants(every_api_feature, component), ledger_grants(component)
    assert sorted(needed - granted) == [], "missing: the call gets 403 in production"
    assert sorted(granted - needed) == [], "granted but never used by the code"


@pytest.mark.parametrize("component", ["webhook", "controller"])
def test_no_values_set_grants_anything_the_code_does_not_use(
    any_render: Rendered, component: str
) -> None:
    assert sorted(chart_grants(any_render, component) - ledger_grants(component)) == []


def test_the_finalizers_grant_is_needed_because_owned_objects_block_owner_deletion() -> None:
    from controller.workspace.pod.names import owner_reference

    reference = owner_reference({"metadata": {"name": "ws", "uid": "u-1"}})
    assert reference["blockOwnerDeletion"] is True
