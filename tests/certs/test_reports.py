"""Serving reports and the Service's endpoints: what the Lease holder waits on in a rotation."""

from __future__ import annotations

import datetime
import json

import pytest

from certs.reports import (
    Replicas,
    ServingReports,
    endpoints_of,
    lagging,
    reports_in,
    reports_name,
)
from tests.certs.conftest import NOW, SECRET, SERVICE, endpoint_slice
from tests.kubeapi import KubeServer
from wspin.core.kinds import CONFIGMAPS
from wspin.core.objects import Obj
from wspin.kube.client import Kube


def _slice(*endpoints: Obj) -> Obj:
    return {"endpoints": list(endpoints)}


def _pod(name: str, **conditions: bool | None) -> Obj:
    endpoint: Obj = {"addresses": ["10.0.0.1"], "targetRef": {"kind": "Pod", "name": name}}
    if conditions:
        endpoint["conditions"] = {k: v for k, v in conditions.items() if v is not None}
    return endpoint


@pytest.mark.parametrize(
    ("endpoint", "takes_traffic"),
    [
        (_pod("p"), True),  # no conditions: ready, per the EndpointSlice API
        (_pod("p", ready=True), True),
        (_pod("p", ready=False), False),
        (_pod("p", ready=False, serving=True, terminating=True), True),
        (_pod("p", ready=False, serving=False, terminating=True), False),
    ],
)
def test_an_endpoint_takes_traffic_when_ready_or_still_serving(
    endpoint: Obj, takes_traffic: bool
) -> None:
    taking, present = endpoints_of([_slice(endpoint)])
    assert present == {"p"}
    assert (taking == {"p"}) is takes_traffic


def test_endpoints_across_slices_and_bare_addresses_are_all_counted() -> None:
    bare = {"addresses": ["10.0.0.9"], "conditions": {"ready": True}}
    taking, present = endpoints_of(
        [_slice(_pod("a")), _slice(_pod("b", ready=False), bare), {"endpoints": None}]
    )
    assert taking == {"a", "address/10.0.0.9"}
    assert present == {"a", "b", "address/10.0.0.9"}


def test_reports_that_do_not_parse_are_ignored() -> None:
    good = json.dumps({"fingerprint": "f" * 64, "reportedAt": NOW.isoformat()})
    configmap = {"data": {"a": good, "b": "not json", "c": "[1]", "d": '{"fingerprint": 1}'}}
    assert reports_in(configmap) == {"a": "f" * 64}
    assert reports_in(None) == {}


def test_lagging_replicas_are_those_taking_traffic_without_the_fingerprint() -> None:
    replicas = Replicas(frozenset({"c", "a", "b"}), {"a": "new", "b": "old", "d": "old"})
    assert lagging(replicas, "new") == ("b", "c")


async def test_reports_are_created_then_merged_per_replica_without_conflicts(
    kube: Kube, namespace: str
) -> None:
    reports = ServingReports(kube, namespace, reports_name(SECRET), SERVICE)
    await reports.publish("a", "1" * 64, NOW)
    await reports.publish("b", "2" * 64, NOW)
    await reports.publish("a", "3" * 64, NOW + datetime.timedelta(seconds=1))
    assert await reports.reported("a") == "3" * 64
    assert await reports.reported("b") == "2" * 64
    assert await reports.reported("c") is None
    stored = await kube.get(CONFIGMAPS, f"{SECRET}-serving", namespace)
    assert json.loads(stored["data"]["a"]) == {
        "fingerprint": "3" * 64,
        "reportedAt": (NOW + datetime.timedelta(seconds=1)).isoformat(),
    }
    assert stored["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "wspin"


async def test_reports_of_pods_gone_from_every_slice_are_dropped(
    kube: Kube, namespace: str
) -> None:
    reports = ServingReports(kube, namespace, reports_name(SECRET), SERVICE)
    for pod in ("a", "b", "old-1", "old-2"):
        await reports.publish(pod, "f" * 64, NOW)
    await endpoint_slice(kube, namespace, {"a": True, "b": False})
    replicas = await reports.replicas()
    assert replicas.taking_traffic == {"a"}
    assert replicas.present == {"a", "b"}
    assert set(replicas.serving) == {"a", "b", "old-1", "old-2"}  # as read this round
    stored = await kube.get(CONFIGMAPS, f"{SECRET}-serving", namespace)
    assert set(stored["data"]) == {"a", "b"}


async def test_without_a_service_nobody_takes_traffic_and_nothing_is_dropped(
    kube: Kube, namespace: str
) -> None:
    reports = ServingReports(kube, namespace, reports_name(SECRET), "no-such-service")
    await reports.publish("a", "f" * 64, NOW)
    replicas = await reports.replicas()
    assert replicas.taking_traffic == frozenset()
    assert await reports.reported("a") == "f" * 64


async def test_slices_of_another_service_are_not_read(kube: Kube, namespace: str) -> None:
    await endpoint_slice(kube, namespace, {"a": True})
    other = ServingReports(kube, namespace, reports_name(SECRET), f"{SERVICE}-other")
    assert (await other.replicas()).taking_traffic == frozenset()


async def test_a_forbidden_report_propagates_for_the_caller_to_log(
    kube: Kube, namespace: str, kube_server: KubeServer
) -> None:
    from wspin.core.errors import Forbidden

    kube_server.fail_next(403, method="PATCH")
    reports = ServingReports(kube, namespace, reports_name(SECRET), SERVICE)
    with pytest.raises(Forbidden):
        await reports.publish("a", "f" * 64, NOW)


async def test_two_replicas_creating_the_reports_at_once_both_end_up_recorded(
    kube: Kube, namespace: str, kube_server: KubeServer
) -> None:
    """Replica a's patch finds no ConfigMap, b creates it, a's create then conflicts."""
    b = ServingReports(kube, namespace, reports_name(SECRET), SERVICE)
    await b.publish("b", "2" * 64, NOW)
    kube_server.fail_next(404, method="PATCH", message='configmaps "x" not found')
    a = ServingReports(kube, namespace, reports_name(SECRET), SERVICE)
    await a.publish("a", "1" * 64, NOW)
    assert await a.reported("a") == "1" * 64
    assert await a.reported("b") == "2" * 64
