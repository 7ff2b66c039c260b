"""The test server's ValidatingAdmissionPolicy emulation: matching, bindings, the answer."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tests.kubeapi import KubeServer
from tests.support.policy_resources import BINDINGS, POLICIES
from wspin.core.errors import Invalid
from wspin.core.kinds import CONFIGMAPS, NAMESPACES, PODS
from wspin.kube.client import Kube


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


def _label_guard(resources: list[str]) -> dict[str, object]:
    return {
        "metadata": {"name": "keep-app-label"},
        "spec": {
            "matchConstraints": {
                "resourceRules": [
                    {
                        "apiGroups": [""],
                        "apiVersions": ["v1"],
                        "operations": ["UPDATE"],
                        "resources": resources,
                    }
                ],
            },
            "validations": [
                {
                    "expression": "has(object.metadata.labels) && 'app' in object.metadata.labels",
                    "message": "keep the app label",
                }
            ],
        },
    }


@pytest.mark.parametrize(
    ("resources", "status_judged"), [(["pods"], False), (["pods", "pods/status"], True)]
)
async def test_a_rule_judges_a_subresource_only_when_it_lists_it(
    kube_server: KubeServer,
    kube: Kube,
    namespace: str,
    resources: list[str],
    status_judged: bool,
) -> None:
    await kube.create(POLICIES, _label_guard(resources))
    await kube.create(
        BINDINGS,
        {
            "metadata": {"name": "keep-app-label"},
            "spec": {"policyName": "keep-app-label", "validationActions": ["Deny"]},
        },
    )
    pod = {
        "metadata": {"name": "p", "labels": {"app": "x"}},
        "spec": {"containers": [{"name": "c", "image": "busybox:1.36"}]},
    }
    await kube.create(PODS, pod, namespace)
    drop = {"metadata": {"labels": {"app": None}}}
    with pytest.raises(Invalid):
        await kube.patch(PODS, "p", drop, namespace)
    if status_judged:
        with pytest.raises(Invalid):
            await kube.patch(PODS, "p", drop, namespace, sub="status")
    else:
        stored = await kube.patch(PODS, "p", drop, namespace, sub="status")
        assert "app" not in (stored["metadata"].get("labels") or {})


async def test_policies_judge_an_impersonated_request_as_that_user(
    kube_server: KubeServer, kube: Kube, kube_as: Callable[..., Kube], namespace: str
) -> None:
    await kube.create(
        POLICIES,
        {
            "metadata": {"name": "only-robot"},
            "spec": {
                "matchConstraints": {
                    "resourceRules": [
                        {
                            "apiGroups": [""],
                            "apiVersions": ["v1"],
                            "operations": ["CREATE"],
                            "resources": ["configmaps"],
                        }
                    ]
                },
                "validations": [
                    {
                        "expression": "request.userInfo.username == 'robot' && "
                        "'crew' in request.userInfo.groups",
                        "message": "only the robot",
                    }
                ],
            },
        },
    )
    await kube.create(
        BINDINGS,
        {
            "metadata": {"name": "only-robot"},
            "spec": {"policyName": "only-robot", "validationActions": ["Deny"]},
        },
    )
    with pytest.raises(Invalid):
        await kube.create(CONFIGMAPS, configmap("c1", {}), namespace)
    await kube_as("robot", "crew").create(CONFIGMAPS, configmap("c2", {}), namespace)
