"""Registers the Workspace controller with the manager (called by ``setup_controllers``)."""

from __future__ import annotations

import logging

from controller.runtime.manager import Manager
from controller.settings import ControllerSettings
from controller.staging.arming import RelayStagingConfig
from controller.workspace.metrics import VerifyMetrics
from controller.workspace.reconciler import StagingPass, WorkspaceReconciler
from wspin.resources import PODS, PVCS, WORKSPACES

log = logging.getLogger("controller.workspace")


def register(
    manager: Manager,
    settings: ControllerSettings,
    *,
    relay_staging: RelayStagingConfig | None = None,
    staging: StagingPass | None = None,
) -> None:
    """Add the Workspace reconciler over shared caches of Workspaces, pods and PVCs.

    The pod and PVC caches are the ones ``add_controller`` keeps for ``owns``, so each kind is
    watched once: a change to an owned object queues its Workspace, and the reconciler reads
    the same cache. ``staging`` is the per-workspace relay staging pass, run in Creating and
    Active; ``relay_staging`` is the armed configuration it is built from.
    """
    if relay_staging is not None and staging is None:
        log.error(
            "relay staging is armed but no per-workspace staging pass was given; "
            "workspaces will get no staged relay keys"
        )
    reconciler = WorkspaceReconciler(
        manager.kube,
        manager.cache(WORKSPACES),
        manager.cache(PODS),
        manager.cache(PVCS),
        settings.workspace,
        metrics=VerifyMetrics(manager.registry),
        staging=staging,
    )
    manager.add_controller(reconciler, for_=WORKSPACES, owns=(PODS, PVCS))
