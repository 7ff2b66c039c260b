"""Registers the Workspace controller with the manager (called by ``setup_controllers``)."""

from __future__ import annotations

import logging
from typing import Final

from controller.runtime.manager import Manager
from controller.settings import ControllerSettings
from controller.staging.arming import RelayStagingConfig
from controller.staging.redact import Redactor
from controller.staging.staging_pass import RelayStagingPass
from controller.workspace.metrics import VerifyMetrics
from controller.workspace.reconciler import StagingPass, WorkspaceReconciler
from wspin.logs import add_scrubber
from wspin.resources import PODS, PVCS, WORKSPACES
from wspin.workspace_pod import SELECTOR

OWNED_SELECTOR: Final = SELECTOR
"""Every workspace pod and PVC carries these labels (``pod.selector_labels``): the same
definition the injector and the chart's selectors use."""

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
    the same cache. Both hold only objects with the workspace labels, not every pod and PVC
    in the cluster. ``staging`` is the per-workspace relay staging pass, run in Creating and
    Active; when only ``relay_staging`` (the armed configuration) is given, the pass is built
    from it here, and its redactor is registered with the log formatter so no staged key
    reaches a log line.
    """
    if relay_staging is not None and staging is None:
        # One redactor per process: the pass registers each staged key with it, and every
        # rendered log line goes through it.
        redactor = Redactor()
        add_scrubber(redactor.redact)
        staging_pass = RelayStagingPass(relay_staging, manager.kube, redactor=redactor)
        manager.add_cleanup(staging_pass.close)
        staging = staging_pass
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
