"""Registers the Workspace controller with the manager (called by ``setup_controllers``)."""

from __future__ import annotations

import logging
from typing import Final

from controller.runtime.manager import Manager
from controller.settings import ControllerSettings
from controller.types import StagingPass
from controller.workspace.metrics import VerifyMetrics
from controller.workspace.reconciler import WorkspaceReconciler
from controller.workspace.rollout_metrics import WorkspacePodsCollector, served_digests
from wspin.contract import LABEL_APP, LABEL_APP_VALUE, LABEL_COMPONENT, LABEL_COMPONENT_VALUE
from wspin.resources import PODS, PVCS, WORKSPACES

OWNED_SELECTOR: Final = f"{LABEL_APP}={LABEL_APP_VALUE},{LABEL_COMPONENT}={LABEL_COMPONENT_VALUE}"
"""Every workspace pod and PVC carries these labels (``pod.selector_labels``)."""

log = logging.getLogger("controller.workspace")


def register(
    manager: Manager,
    settings: ControllerSettings,
    *,
    staging: StagingPass | None = None,
) -> None:
    """Add the Workspace reconciler over shared caches of Workspaces, pods and PVCs.

    The pod and PVC caches are the ones ``add_controller`` keeps for ``owns``, so each kind is
    watched once: a change to an owned object queues its Workspace, and the reconciler reads
    the same cache. Both hold only objects with the workspace labels, not every pod and PVC
    in the cluster. ``staging`` is the per-workspace relay staging pass (built by
    ``controller.setup`` when armed), run in Creating and Active.
    """
    reconciler = WorkspaceReconciler(
        manager.kube,
        manager.cache(WORKSPACES),
        manager.cache(PODS, labels=OWNED_SELECTOR),
        manager.cache(PVCS, labels=OWNED_SELECTOR),
        settings.workspace,
        metrics=VerifyMetrics(manager.registry),
        staging=staging,
    )
    manager.add_controller(
        reconciler, for_=WORKSPACES, owns=((PODS, OWNED_SELECTOR), (PVCS, OWNED_SELECTOR))
    )
    # The rollout gauge reads the same caches at scrape time.
    manager.registry.register(
        WorkspacePodsCollector(
            manager.cache(PODS, labels=OWNED_SELECTOR),
            manager.cache(WORKSPACES),
            served_digests(settings.workspace),
        )
    )
