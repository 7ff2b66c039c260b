"""Registers the Workspace controller with the manager (called by ``setup_controllers``)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Final

from controller.runtime.manager import Manager
from controller.settings import ControllerSettings
from controller.types import Obj, ObjectKey, StagingPass
from controller.workspace.agent.metering import Metering
from controller.workspace.agent.metrics import AgentMetrics
from controller.workspace.agent.scheduler import AgentScheduler
from controller.workspace.agent.usage import AgentUsageCollector
from controller.workspace.egress.dns import DnsResolver
from controller.workspace.egress.policy import CILIUM_NETWORK_POLICIES, NETWORK_POLICIES
from controller.workspace.egress.sync import EgressPolicies
from controller.workspace.pod.credential_keys import CredentialKeys
from controller.workspace.reconcile.deps import ReconcileDeps
from controller.workspace.reconcile.fleet_metrics import WorkspaceFleetCollector
from controller.workspace.reconcile.lifecycle_metrics import LifecycleMetrics
from controller.workspace.reconcile.orgstatus import OrgStatusCache, OrgStatusMetrics
from controller.workspace.reconcile.reconciler import WorkspaceReconciler
from controller.workspace.reconcile.rollout_metrics import WorkspacePodsCollector, served_digests
from controller.workspace.recovery.metrics import InRecoveryCollector, RecoveryMetrics
from controller.workspace.recovery.verify_metrics import VerifyMetrics
from wspin.core.contract import LABEL_APP, LABEL_APP_VALUE, LABEL_WORKSPACE
from wspin.core.kinds import NAMESPACES, PODS, PVCS, WORKSPACES, Resource
from wspin.core.runtimes import RUNTIME_ENVIRONMENTS, RuntimeCatalogue
from wspin.core.tenancy import NamespaceLabels
from wspin.core.workspace import WorkspaceSpec
from wspin.core.workspace_pod import SELECTOR

OWNED_SELECTOR: Final = SELECTOR
"""Every workspace pod and PVC carries these labels (``pod.selector_labels``): the same
definition the injector and the chart's selectors use."""
POLICY_SELECTOR: Final = f"{LABEL_APP}={LABEL_APP_VALUE},{LABEL_WORKSPACE}"
"""The labels of every egress policy the controller writes (``egress.policy`` metadata)."""

log = logging.getLogger("controller.workspace")


def register(
    manager: Manager,
    settings: ControllerSettings,
    *,
    keys: CredentialKeys,
    staging: StagingPass | None = None,
    redact: Callable[[str], str] = lambda text: text,
) -> None:
    """Add the Workspace reconciler over shared caches of Workspaces, pods and PVCs, with
    every dependency of its passes in one ``ReconcileDeps``.

    ``keys`` is the workspace credentials key (``credential_keys.load_credential_keys``, read
    at start).

    The pod and PVC caches are the ones ``add_controller`` keeps for ``owns``, so each kind is
    watched once: a change to an owned object queues its Workspace, and the reconciler reads
    the same cache. Both hold only objects with the workspace labels, not every pod and PVC
    in the cluster. ``staging`` is the per-workspace relay staging pass (built by
    ``controller.setup`` when armed), run in Creating and Active. ``redact`` is the process's
    redactor: what the kubelet or the scheduler said passes through it before it reaches a
    condition, a log line or an Event.
    """
    metrics = VerifyMetrics(manager.registry)
    orgs = None
    if settings.workspace.api_service_url and settings.api_internal_token:
        # Org-owned Workspaces of a suspended organisation are suspended (checked per
        # reconcile, cached per org).
        orgs = OrgStatusCache(
            None,
            settings.workspace.api_service_url,
            settings.api_internal_token,
            OrgStatusMetrics(manager.registry),
        )
        manager.add_cleanup(orgs.close)
    owns: list[tuple[Resource, str]] = [(PODS, OWNED_SELECTOR), (PVCS, OWNED_SELECTOR)]
    egress = None
    mode = settings.workspace.egress.mode
    if mode != "off":
        cilium = mode == "cilium"
        resource = CILIUM_NETWORK_POLICIES if cilium else NETWORK_POLICIES
        egress = EgressPolicies(
            manager.kube,
            manager.cache(resource, labels=POLICY_SELECTOR),
            DnsResolver(),
            settings.workspace.egress,
            cilium=cilium,
            legacy_before=keys.created,
        )
        owns.append((resource, POLICY_SELECTOR))
    workspaces = manager.cache(WORKSPACES)

    def naming(env: Obj) -> list[ObjectKey]:
        """The Workspaces whose bare runtime names a RuntimeEnvironment that changed."""
        name = env["metadata"]["name"]
        return [
            ObjectKey.of(ws)
            for ws in workspaces.list()
            if WorkspaceSpec.of(ws.get("spec")).runtime == name
        ]

    def in_namespace(namespace: Obj) -> list[ObjectKey]:
        """The Workspaces of a Namespace whose labels changed (the org, the override)."""
        return [ObjectKey.of(ws) for ws in workspaces.list(namespace["metadata"]["name"])]

    runtimes = RuntimeCatalogue(manager.cache(RUNTIME_ENVIRONMENTS))
    pods = manager.cache(PODS, labels=OWNED_SELECTOR)
    # One reader of agentd for the whole fleet, leader-only: what it reads that changes a
    # Workspace's status queues that Workspace, whose reconcile writes it.
    agent_metrics = AgentMetrics(manager.registry)
    # Billing counters; a deleted Workspace's series go with it.
    metering = Metering(manager.registry)
    workspaces.add_handler(metering.workspace_event)
    agents = AgentScheduler(
        settings.workspace.agent,
        workspaces=workspaces,
        pods=pods,
        metrics=agent_metrics,
        metering=metering,
        notify=manager.requeue(WorkspaceReconciler.name),
    )
    manager.add_runnable("agent-scheduler", agents.run)
    manager.registry.register(AgentUsageCollector(agents.targets))
    deps = ReconcileDeps(
        manager.kube,
        workspaces,
        pods,
        manager.cache(PVCS, labels=OWNED_SELECTOR),
        settings.workspace,
        keys,
        metrics,
        recovery_metrics=RecoveryMetrics(manager.registry),
        lifecycle=LifecycleMetrics(manager.registry),
        staging=staging,
        orgs=orgs,
        runtimes=runtimes,
        egress=egress,
        namespaces=NamespaceLabels(manager.cache(NAMESPACES)),
        agents=agents,
        agent_metrics=agent_metrics,
        redact=redact,
    )
    reconciler = WorkspaceReconciler(deps)
    manager.add_controller(
        reconciler,
        for_=WORKSPACES,
        owns=owns,
        watches=((RUNTIME_ENVIRONMENTS, naming), (NAMESPACES, in_namespace)),
    )
    # The rollout and fleet gauges read the same caches at scrape time.
    manager.registry.register(
        WorkspacePodsCollector(
            manager.cache(PODS, labels=OWNED_SELECTOR),
            manager.cache(WORKSPACES),
            served_digests(settings.workspace),
        )
    )
    manager.registry.register(WorkspaceFleetCollector(workspaces))
    manager.registry.register(InRecoveryCollector(workspaces))
