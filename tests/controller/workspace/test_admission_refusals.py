"""A workspace pod refused by admission (a webhook that cannot be called, a webhook or a
ValidatingAdmissionPolicy that denies, Pod Security): the Workspace names who refused and why,
one Warning Event and one log line per episode, no traceback, a retry that backs off, and the
pod once admission lets it through.

The policy and the unreachable webhook are real objects on the API server (the test server
judges them as kube-apiserver does; a real one with ``WSPIN_TEST_KUBECONFIG``)."""

from __future__ import annotations

import datetime
import logging
import uuid
from collections.abc import AsyncIterator

import pytest

from controller.toolkit.conditions import MESSAGE_LIMIT, condition, set_condition
from controller.workspace.pod.refusals import (
    RETRY_MAX,
    RETRY_MIN,
    Refusal,
    recorded,
    refusal_of,
    refused_condition,
    retry_delay,
)
from tests.controller.workspace.conftest import Harness
from tests.kubeapi import KubeServer
from tests.kubeapi.admission import Denial
from tests.support.policy_resources import BINDINGS, POLICIES
from tests.support.waiting import eventually
from wspin.core.clock import format_time
from wspin.core.errors import KubeAPIError
from wspin.core.kinds import EVENTS, MUTATING_WEBHOOKS, PODS
from wspin.core.objects import Obj
from wspin.kube.client import Kube

NOW = datetime.datetime(2026, 11, 29, 12, 0, tzinfo=datetime.UTC)

# -- reading the API server's answer ---------------------------------------------------------


@pytest.mark.parametrize(
    ("answer", "reason", "by", "detail"),
    [
        (
            'Internal error occurred: failed calling webhook "pods.wspin.llmsafespaces.dev": '
            'failed to call webhook: Post "https://wspin-webhook.wspin.svc:443/mutate-pods?'
            'timeout=5s": dial tcp 10.96.0.12:443: connect: connection refused',
            "AdmissionWebhookFailed",
            'admission webhook "pods.wspin.llmsafespaces.dev"',
            "failed to call webhook: Post",
        ),
        (
            'admission webhook "guard.example.com" denied the request: images from '
            "docker.io are not allowed",
            "AdmissionWebhookDenied",
            'admission webhook "guard.example.com"',
            "images from docker.io are not allowed",
        ),
        (
            'admission webhook "guard.example.com" denied the request without explanation',
            "AdmissionWebhookDenied",
            'admission webhook "guard.example.com"',
            "without explanation",
        ),
        (
            "pods \"ws1-0123abcd\" is forbidden: ValidatingAdmissionPolicy 'no-gpu' with "
            "binding 'no-gpu-team-a' denied request: GPUs need a quota",
            "AdmissionPolicyDenied",
            "ValidatingAdmissionPolicy 'no-gpu' with binding 'no-gpu-team-a'",
            "GPUs need a quota",
        ),
        (
            'pods "ws1-0123abcd" is forbidden: violates PodSecurity "restricted:latest": '
            'seccompProfile (pod or container "workspace" must set securityContext.'
            'seccompProfile.type to "RuntimeDefault" or "Localhost")',
            "PodSecurity",
            'Pod Security "restricted:latest"',
            "seccompProfile (pod or container",
        ),
        (
            'create pods t1/ws1-0123abcd: pods "ws1-0123abcd" is forbidden: pod rejected: '
            'RuntimeClass "gvisor" not found',
            "AdmissionRefused",
            "the API server's admission",
            'pod rejected: RuntimeClass "gvisor" not found',
        ),
        (
            'pods "ws1-0123abcd" is forbidden: exceeded quota: team-a, requested: '
            "limits.memory=8Gi, used: limits.memory=60Gi, limited: limits.memory=64Gi",
            "AdmissionRefused",
            "the API server's admission",
            "exceeded quota: team-a",
        ),
    ],
)
def test_every_admission_refusal_names_who_refused_and_why(
    answer: str, reason: str, by: str, detail: str
) -> None:
    refusal = refusal_of(answer)
    assert refusal is not None
    assert (refusal.reason, refusal.by) == (reason, by)
    assert refusal.detail.startswith(detail)
    assert refusal.message.startswith(f"{by} ")


@pytest.mark.parametrize(
    "answer",
    [
        'Pod "ws1-0123abcd" is invalid: spec.runtimeClassName: Invalid value: "Bad!"',
        'pods "ws1" is forbidden: unable to create new content in namespace t1 because it is '
        "being terminated",
        'pods is forbidden: User "system:serviceaccount:wspin:wspin-controller" cannot create '
        'resource "pods" in API group "" in the namespace "t1"',
        "HTTP 500",
        "",
    ],
)
def test_other_answers_are_no_admission_refusal(answer: str) -> None:
    assert refusal_of(answer) is None


def test_the_condition_strips_url_credentials_and_keeps_a_bounded_message() -> None:
    answer = (
        'admission webhook "mirror.example.com" denied the request: cannot reach '
        "https://ci:s3cr3t@registry.example.com/v2/ " + "x" * 100_000
    )
    refusal = refusal_of(answer)
    assert refusal is not None
    found = refused_condition(refusal, 3)
    assert (found["type"], found["status"], found["reason"]) == (
        "PodAdmitted",
        "False",
        "AdmissionWebhookDenied",
    )
    assert "s3cr3t" not in found["message"] and "ci:" not in found["message"]
    assert len(found["message"]) <= MESSAGE_LIMIT


def test_one_episode_is_one_kind_of_refusal_by_one_webhook_or_policy() -> None:
    down = Refusal("AdmissionWebhookFailed", 'admission webhook "a"', "connection refused")
    stamped = set_condition([], refused_condition(down, 1), format_time(NOW))
    assert recorded(down)(stamped)
    timeout = Refusal("AdmissionWebhookFailed", 'admission webhook "a"', "deadline exceeded")
    assert recorded(timeout)(stamped)  # the same webhook still down: the same episode
    assert not recorded(Refusal("AdmissionWebhookDenied", 'admission webhook "a"', "no"))(stamped)
    assert not recorded(Refusal("AdmissionWebhookFailed", 'admission webhook "a2"', "x"))(stamped)
    assert not recorded(down)([condition("PodAdmitted", "True", "Admitted")])


def test_the_retry_waits_half_the_episode_age_within_bounds() -> None:
    down = Refusal("AdmissionWebhookFailed", 'admission webhook "a"', "connection refused")
    stamped = set_condition([], refused_condition(down, 1), format_time(NOW))
    second = datetime.timedelta(seconds=1)
    assert retry_delay([], NOW) == RETRY_MIN
    assert retry_delay(stamped, NOW) == RETRY_MIN
    assert retry_delay(stamped, NOW + 60 * second) == 30.0
    assert retry_delay(stamped, NOW + 86_400 * second) == RETRY_MAX


# -- against the API server --------------------------------------------------------------------


def probe_pod(namespace: str) -> Obj:
    return {
        "metadata": {"name": "admission-probe", "namespace": namespace},
        "spec": {
            "automountServiceAccountToken": False,
            "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}],
        },
    }


async def dry_run_refusal(kube: Kube, namespace: str) -> str:
    """The API server's answer to a dry-run pod create there ("" when admitted)."""
    try:
        await kube.create(PODS, probe_pod(namespace), namespace, dry_run=True)
    except KubeAPIError as err:
        return err.message
    return ""


def names_namespace(namespace: str) -> Obj:
    return {"matchLabels": {"kubernetes.io/metadata.name": namespace}}


@pytest.fixture
async def refusing_policy(kube: Kube, namespace: str) -> AsyncIterator[str]:
    """A ValidatingAdmissionPolicy refusing every pod created in the test's namespace, in
    force on the API server (its policy informer has caught up)."""
    name = f"wspin-test-refuse-{uuid.uuid4().hex[:8]}"
    await kube.create(
        POLICIES,
        {
            "metadata": {"name": name},
            "spec": {
                "failurePolicy": "Fail",
                "matchConstraints": {
                    "resourceRules": [
                        {
                            "apiGroups": [""],
                            "apiVersions": ["v1"],
                            "operations": ["CREATE"],
                            "resources": ["pods"],
                        }
                    ]
                },
                "validations": [
                    {"expression": "false", "message": "pods are frozen during the migration"}
                ],
            },
        },
    )
    await kube.create(
        BINDINGS,
        {
            "metadata": {"name": name},
            "spec": {
                "policyName": name,
                "validationActions": ["Deny"],
                "matchResources": {"namespaceSelector": names_namespace(namespace)},
            },
        },
    )
    try:
        await eventually(
            lambda: _says(kube, namespace, "denied request"), "the policy in force", timeout=30
        )
        yield name
    finally:
        await kube.delete(BINDINGS, name, missing_ok=True)
        await kube.delete(POLICIES, name, missing_ok=True)


@pytest.fixture
async def unreachable_webhook(kube: Kube, namespace: str) -> AsyncIterator[str]:
    """A mutating webhook for pods in the test's namespace whose Service does not exist, with
    ``failurePolicy: Fail``: the cluster's state when a webhook is down."""
    name = f"wspin-test-down-{uuid.uuid4().hex[:8]}"
    entry = f"down-{uuid.uuid4().hex[:8]}.wspin-test.dev"
    await kube.create(
        MUTATING_WEBHOOKS,
        {
            "metadata": {"name": name},
            "webhooks": [
                {
                    "name": entry,
                    "clientConfig": {
                        "service": {"name": "absent", "namespace": namespace, "path": "/m"}
                    },
                    "rules": [
                        {
                            "apiGroups": [""],
                            "apiVersions": ["v1"],
                            "operations": ["CREATE"],
                            "resources": ["pods"],
                        }
                    ],
                    "namespaceSelector": names_namespace(namespace),
                    "failurePolicy": "Fail",
                    "sideEffects": "None",
                    "admissionReviewVersions": ["v1"],
                    "timeoutSeconds": 2,
                }
            ],
        },
    )
    try:
        await eventually(
            lambda: _says(kube, namespace, "failed calling webhook"),
            "the webhook in force",
            timeout=30,
        )
        yield entry
    finally:
        await kube.delete(MUTATING_WEBHOOKS, name, missing_ok=True)


async def _says(kube: Kube, namespace: str, words: str) -> bool:
    return words in await dry_run_refusal(kube, namespace)


async def refusal_events(h: Harness, reason: str) -> list[Obj]:
    listing = await h.kube.list(EVENTS, h.namespace, fields="involvedObject.name=ws1")
    return [e for e in listing.get("items") or [] if e.get("reason") == reason]


def condition_of(ws: Obj, type_: str) -> Obj | None:
    conditions = (ws.get("status") or {}).get("conditions") or []
    return next((c for c in conditions if c["type"] == type_), None)


async def test_a_policy_that_refuses_the_pod_is_named_on_the_workspace_once_per_episode(
    harness: Harness, refusing_policy: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    await harness.apply()
    requeue = await harness.reconcile()
    assert requeue is not None and requeue.after == RETRY_MIN
    ws = await harness.workspace()
    admitted = condition_of(ws, "PodAdmitted")
    assert admitted is not None
    assert (admitted["status"], admitted["reason"]) == ("False", "AdmissionPolicyDenied")
    assert admitted["message"].startswith(f"ValidatingAdmissionPolicy '{refusing_policy}'")
    assert "pods are frozen during the migration" in admitted["message"]
    ready = condition_of(ws, "Ready")
    assert ready is not None and ready["reason"] == "PodAdmissionRefused"
    assert (ws["status"]["reason"], ws["status"]["message"]) == (
        "PodAdmissionRefused",
        admitted["message"],
    )
    assert ws["status"]["phase"] == "Pending"

    # Refused again a minute into the episode: nothing new to say, and a longer wait.
    harness.clock.advance(60)
    requeue = await harness.reconcile()
    assert requeue is not None and requeue.after == pytest.approx(30.0)
    assert len(await refusal_events(harness, "AdmissionPolicyDenied")) == 1
    lines = [r for r in caplog.records if r.getMessage().startswith("admission refused")]
    assert len(lines) == 1
    assert lines[0].fields["by"].startswith("ValidatingAdmissionPolicy")  # type: ignore[attr-defined]
    assert not [r for r in caplog.records if r.exc_info]


async def test_a_webhook_that_cannot_be_called_is_named_and_the_pod_follows_its_return(
    kube: Kube, harness: Harness, unreachable_webhook: str
) -> None:
    await harness.apply()
    await harness.reconcile()
    admitted = condition_of(await harness.workspace(), "PodAdmitted")
    assert admitted is not None and admitted["reason"] == "AdmissionWebhookFailed"
    assert admitted["message"].startswith(f'admission webhook "{unreachable_webhook}" could not')
    assert len(await refusal_events(harness, "AdmissionWebhookFailed")) == 1

    # The webhook's configuration goes (or it answers again): the next retry builds the pod.
    for config in (await kube.list(MUTATING_WEBHOOKS)).get("items") or []:
        if any(w["name"] == unreachable_webhook for w in config.get("webhooks") or []):
            await kube.delete(MUTATING_WEBHOOKS, config["metadata"]["name"])
    await eventually(
        lambda: _admitted(kube, harness.namespace), "the webhook out of force", timeout=30
    )
    await harness.reconcile()
    ws = await harness.workspace()
    assert condition_of(ws, "PodAdmitted") is None
    assert ws["status"].get("reason") != "PodAdmissionRefused"
    assert await kube.get_or_none(PODS, await harness.pod_name(), harness.namespace)
    assert len(await refusal_events(harness, "AdmissionWebhookFailed")) == 1


async def _admitted(kube: Kube, namespace: str) -> bool:
    return "webhook" not in await dry_run_refusal(kube, namespace)


async def test_a_denying_webhook_then_another_are_two_episodes(
    harness: Harness, kube_server: KubeServer
) -> None:
    pods = f"/api/v1/namespaces/{harness.namespace}/pods"
    kube_server.deny_creates(Denial("webhook", "guard-a.example.com", "not today", pods, 2))
    await harness.apply()
    await harness.reconcile()
    await harness.reconcile()
    kube_server.deny_creates(Denial("webhook", "guard-b.example.com", "nor now", pods))
    await harness.reconcile()
    denied = await refusal_events(harness, "AdmissionWebhookDenied")
    assert sorted(e["message"] for e in denied) == [
        'admission webhook "guard-a.example.com" refused the workspace pod: not today',
        'admission webhook "guard-b.example.com" refused the workspace pod: nor now',
    ]


async def test_a_refused_claim_is_named_like_a_refused_pod(
    harness: Harness, kube_server: KubeServer, caplog: pytest.LogCaptureFixture
) -> None:
    claims = f"/api/v1/namespaces/{harness.namespace}/persistentvolumeclaims"
    kube_server.deny_creates(Denial("policy", "storage-classes", "no default class", claims))
    await harness.apply()
    await harness.reconcile()
    ws = await harness.workspace()
    admitted = condition_of(ws, "PodAdmitted")
    assert admitted is not None and admitted["reason"] == "AdmissionPolicyDenied"
    assert (
        "refused the workspace's PersistentVolumeClaim: no default class" in (admitted["message"])
    )
    assert not [r for r in caplog.records if r.exc_info]
    await harness.reconcile()  # the denial is spent: claim and pod are created
    assert condition_of(await harness.workspace(), "PodAdmitted") is None
