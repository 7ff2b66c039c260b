"""Event-to-key mapping (which ownerReferences point at a controller's objects) and the
reconcile outcome switch."""

from __future__ import annotations

from prometheus_client import CollectorRegistry

from controller.runtime.controller import Controller, owner_keys, owner_mapper, reconcile_one
from controller.runtime.metrics import RuntimeMetrics
from controller.runtime.queue import WorkQueue
from controller.types import ObjectKey, Requeue
from wspin.core.kinds import CONFIGMAPS, INFERENCE_RELAYS, WORKSPACES
from wspin.kube.client import Kube
from wspin.kube.informer import Informer


def test_only_a_controller_reference_of_the_right_kind_and_group_maps_to_an_owner() -> None:
    obj = {
        "metadata": {
            "namespace": "ns",
            "ownerReferences": [
                {"apiVersion": "llmsafespaces.dev/v1", "kind": "Workspace", "name": "w1"},
                {
                    "apiVersion": "other.dev/v1",
                    "kind": "Workspace",
                    "name": "w2",
                    "controller": True,
                },
                {
                    "apiVersion": "llmsafespaces.dev/v1",
                    "kind": "Workspace",
                    "name": "w3",
                    "controller": True,
                },
            ],
        }
    }
    assert owner_keys(obj, WORKSPACES) == [ObjectKey("ns", "w3")]


def test_a_cluster_scoped_owner_maps_to_a_key_without_namespace() -> None:
    obj = {
        "metadata": {
            "namespace": "relay-ns",
            "ownerReferences": [
                {
                    "apiVersion": "llmsafespaces.dev/v1",
                    "kind": "InferenceRelay",
                    "name": "r1",
                    "controller": True,
                }
            ],
        }
    }
    assert list(owner_mapper(INFERENCE_RELAYS)(obj)) == [ObjectKey("", "r1")]


def test_an_object_without_owners_maps_to_nothing() -> None:
    assert owner_keys({"metadata": {"name": "x"}}, WORKSPACES) == []


async def test_a_success_resets_the_backoff_and_the_next_failure_starts_at_5ms() -> None:
    outcomes: list[Exception | None] = [
        RuntimeError("a"),
        RuntimeError("b"),
        None,
        RuntimeError("c"),
    ]

    class Scripted:
        name = "scripted"

        async def reconcile(self, _: ObjectKey) -> Requeue | None:
            outcome = outcomes.pop(0)
            if outcome is not None:
                raise outcome
            return None

    queue = WorkQueue("scripted")
    controller = Controller(Scripted(), Informer(Kube(None), CONFIGMAPS), queue)  # type: ignore[arg-type]
    metrics = RuntimeMetrics(CollectorRegistry())
    item = ObjectKey("ns", "a")
    for _ in range(2):
        await reconcile_one(controller, queue, item, metrics)
    assert queue.backoff.retries(item) == 2
    await reconcile_one(controller, queue, item, metrics)
    assert queue.backoff.retries(item) == 0
    await reconcile_one(controller, queue, item, metrics)
    assert queue.backoff.retries(item) == 1  # 5 ms again, not 20 ms
    queue.shut_down()


async def test_each_reconcile_is_timed_and_each_failure_counted_by_kind_and_error_type() -> None:
    from wspin.core.errors import TerminalError, TransientError

    outcomes: list[Exception | Requeue | None] = [
        None,
        Requeue(after=5),
        TransientError("busy"),
        TerminalError("never"),
        RuntimeError("bug"),
    ]

    class Scripted:
        name = "scripted"

        async def reconcile(self, _: ObjectKey) -> Requeue | None:
            outcome = outcomes.pop(0)
            if isinstance(outcome, Exception):
                raise outcome
            return outcome

    registry = CollectorRegistry()
    queue = WorkQueue("scripted")
    controller = Controller(Scripted(), Informer(Kube(None), WORKSPACES), queue)  # type: ignore[arg-type]
    metrics = RuntimeMetrics(registry)
    metrics.init_controller("scripted", "Workspace")

    def errors(error_type: str) -> float | None:
        return registry.get_sample_value(
            "llmsafespaces_reconciliation_errors_total",
            {"resource": "Workspace", "error_type": error_type},
        )

    assert [errors(kind) for kind in ("transient", "terminal", "unexpected")] == [0, 0, 0]
    for _ in range(5):
        await reconcile_one(controller, queue, ObjectKey("ns", "a"), metrics)
    assert [errors(kind) for kind in ("transient", "terminal", "unexpected")] == [1, 1, 1]
    for status, count in (("ok", 2), ("error", 3)):
        assert (
            registry.get_sample_value(
                "llmsafespaces_reconciliation_duration_seconds_count",
                {"resource": "Workspace", "status": status},
            )
            == count
        )
    queue.shut_down()
