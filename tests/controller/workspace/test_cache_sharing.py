"""The objects the Workspace reconciler writes, as its caches hold them: two Workspaces'
pods, claims and Workspaces share every part they have in common, and none can be changed
in place (what keeps 10,000 Workspaces and their pods in the controller's memory budget)."""

from __future__ import annotations

from tests.controller.workspace.conftest import Harness
from tests.controller.workspace.factories import ready_pod_status, reconcile_until
from tests.support.sharing import containers, unshared_equal_subtrees
from wspin.core.objects import ObjectKey
from wspin.kube.compaction import CachedDict, CachedList


async def test_two_serving_workspaces_share_in_the_caches_all_they_have_in_common(
    harness: Harness,
) -> None:
    h = harness
    names = ("ws1", "ws2")
    for n, name in enumerate(names):
        await h.apply(name)
        await h.reconcile(name)
        await h.set_pod_status(await h.pod_name(name), ready_pod_status(f"10.0.0.{n + 7}"))
        await reconcile_until(h, "Active", name)
    pods = [await h.pod_name(name) for name in names]
    claims = [f"workspace-{name}" for name in names]
    for cache, (first_name, second_name) in (
        (h.workspaces, names),
        (h.pods, pods),
        (h.pvcs, claims),
    ):
        first = cache.get(ObjectKey(h.namespace, first_name))
        second = cache.get(ObjectKey(h.namespace, second_name))
        assert first is not None and second is not None, cache.name
        assert first != second
        assert unshared_equal_subtrees(first, second) == [], cache.name
        assert all(isinstance(c, CachedDict | CachedList) for c in containers(first))
