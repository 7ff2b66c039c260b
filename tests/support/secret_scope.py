"""The chart's Secret-scope policy installed for one release, and the controller's service
account able to write Secrets anywhere as far as RBAC goes, so the policy alone decides what it
may write (tests of the policy itself, and of the controller's own writes under it). Works on
the test API server and on a real one, as an admin who may impersonate."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable

import pytest

from tests.chart.helm import PINS, render
from tests.support.policy_resources import BINDINGS, POLICIES
from wspin.core.errors import Forbidden
from wspin.core.kinds import SECRETS, Resource
from wspin.core.objects import Obj
from wspin.kube.client import Kube

RBAC = "rbac.authorization.k8s.io"
CLUSTER_ROLES = Resource(RBAC, "v1", "clusterroles", namespaced=False, kind="ClusterRole")
CLUSTER_ROLE_BINDINGS = Resource(
    RBAC, "v1", "clusterrolebindings", namespaced=False, kind="ClusterRoleBinding"
)
SCOPE = "outside its namespace the wspin controller writes only its own Secrets"
"""The words of the policy's first refusal (a name that is not the controller's)."""


def policy_documents(release: str, relay: str) -> list[tuple[Resource, Obj]]:
    """The rendered policy and binding for a release in ``release`` staging into ``relay``."""
    rendered = render(
        ("full.yaml",), {**PINS, "controller.relayStaging.namespace": relay}, namespace=release
    )
    found = [
        (POLICIES if d["kind"] == "ValidatingAdmissionPolicy" else BINDINGS, d)
        for d in rendered
        if d["metadata"]["name"].endswith("-controller-secrets")
    ]
    assert [d["kind"] for _, d in found] == [
        "ValidatingAdmissionPolicy",
        "ValidatingAdmissionPolicyBinding",
    ]
    return found


def secret_access(release: str) -> list[tuple[Resource, Obj]]:
    """Every Secret verb, cluster wide, for the release's controller account, and what a relay
    staging pass writes besides (Workspaces, their status, Events)."""
    name = f"wspin-test-{release}-secrets"
    verbs = ["get", "create", "update", "patch", "delete", "deletecollection"]
    subject = {"kind": "ServiceAccount", "name": "wspin-controller", "namespace": release}
    rules = [
        {"apiGroups": [""], "resources": ["secrets"], "verbs": verbs},
        {
            "apiGroups": ["llmsafespaces.dev"],
            "resources": ["workspaces", "workspaces/status"],
            "verbs": ["get", "patch"],
        },
        {"apiGroups": [""], "resources": ["events"], "verbs": ["create"]},
    ]
    return [
        (CLUSTER_ROLES, {"metadata": {"name": name}, "rules": rules}),
        (
            CLUSTER_ROLE_BINDINGS,
            {
                "metadata": {"name": name},
                "roleRef": {"apiGroup": RBAC, "kind": "ClusterRole", "name": name},
                "subjects": [subject],
            },
        ),
    ]


@contextlib.asynccontextmanager
async def controller_under_policy(
    kube: Kube, kube_as: Callable[..., Kube], *, release: str, relay: str, probe_namespace: str
) -> AsyncIterator[Kube]:
    """A client acting as the release's controller account, once the policy is enforced;
    everything installed is deleted after."""
    installed = policy_documents(release, relay) + secret_access(release)
    for resource, obj in installed:
        await kube.create(resource, obj)
    try:
        controller = kube_as(
            f"system:serviceaccount:{release}:wspin-controller", "system:serviceaccounts"
        )
        await _wait_until_enforced(controller, probe_namespace)
        yield controller
    finally:
        for resource, obj in reversed(installed):
            await kube.delete(resource, obj["metadata"]["name"])


async def _wait_until_enforced(controller: Kube, namespace: str) -> None:
    """A real API server takes a moment to load a new policy, binding and role (the test
    server: none)."""
    probe = {"metadata": {"name": "not-the-controllers"}}
    for _ in range(600):
        try:
            await controller.create(SECRETS, probe, namespace, dry_run=True)
        except Forbidden as err:
            if SCOPE in str(err):
                return
        await asyncio.sleep(0.1)
    pytest.fail("the Secret-scope policy was not enforced within 60 s")
