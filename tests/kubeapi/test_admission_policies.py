"""The test server's ValidatingAdmissionPolicy emulation: matching, bindings, the answer."""

from __future__ import annotations

import pytest

from tests.kubeapi import KubeServer
from wspin.core.errors import Invalid
from wspin.core.kinds import CONFIGMAPS, NAMESPACES, Resource
from wspin.kube.client import Kube

GROUP = "admissionregistration.k8s.io"
POLICIES = Resource(GROUP, "v1", "validatingadmissionpolicies", False, "ValidatingAdmissionPolicy")
BINDINGS = Resource(
    GROUP, "v1", "validatingadmissionpolicybindings", False, "ValidatingAdmissionPolicyBinding"
)


async def install(kube: Kube, namespace: str, *, actions: list[str]) -> None:
    await kube.create(
        POLICIES,
        {
            "metadata": {"name": "no-evil"},
            "spec": {
                "matchConstraints": {
                    "resourceRules": [
                        {
                            "apiGroups": [""],
                            "apiVersions": ["v1"],
                            "operations": ["CREATE", "UPDATE"],
                            "resources": ["configmaps"],
                        }
                    ],
                    "objectSelector": {"matchLabels": {"checked": "yes"}},
                },
                "variables": [
                    {"name": "data", "expression": "has(object.data) ? object.data : {}"}
                ],
                "validations": [
                    {
                        "expression": "!('evil' in variables.data)",
                        "messageExpression": "'no evil in ' + object.metadata.name",
                    }
                ],
            },
        },
    )
    await kube.create(
        BINDINGS,
        {
            "metadata": {"name": "no-evil-here"},
            "spec": {
                "policyName": "no-evil",
                "validationActions": actions,
                "matchResources": {
                    "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}}
                },
            },
        },
    )


def configmap(name: str, data: dict[str, str], checked: bool = True) -> dict[str, object]:
    labels = {"checked": "yes"} if checked else {}
    return {"metadata": {"name": name, "labels": labels}, "data": data}


async def test_a_bound_policy_refuses_like_kube_apiserver(
    kube_server: KubeServer, kube: Kube, namespace: str
) -> None:
    await install(kube, namespace, actions=["Deny"])
    with pytest.raises(Invalid) as refused:
        await kube.create(CONFIGMAPS, configmap("c1", {"evil": "1"}), namespace)
    assert str(refused.value).endswith(
        "configmaps \"c1\" is forbidden: ValidatingAdmissionPolicy 'no-evil' with binding "
        "'no-evil-here' denied request: no evil in c1"
    )
    await kube.create(CONFIGMAPS, configmap("c2", {"good": "1"}), namespace)
    await kube.create(CONFIGMAPS, configmap("c3", {"evil": "1"}, checked=False), namespace)
    with pytest.raises(Invalid):
        await kube.patch(CONFIGMAPS, "c2", {"data": {"evil": "1"}}, namespace)


async def test_a_binding_for_another_namespace_refuses_nothing_here(
    kube_server: KubeServer, kube: Kube, namespace: str
) -> None:
    await install(kube, "elsewhere", actions=["Deny"])
    await kube.create(CONFIGMAPS, configmap("c1", {"evil": "1"}), namespace)
    namespace_obj = await kube.get(NAMESPACES, namespace)
    assert namespace_obj["metadata"]["labels"]["kubernetes.io/metadata.name"] == namespace
