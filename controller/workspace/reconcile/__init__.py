"""The Workspace reconcile: one pass reads a Workspace and its pod, decides, writes, records.

``reconciler`` is the one class, the loop (the finalizer and return, else the phase's writes,
one status write, what follows it); every dependency of a pass is one frozen ``deps``
(``ReconcileDeps``, built in ``wiring``). ``phases`` has one handler per phase and ``upkeep``
what the controller does on its own for an Active pod (drains, health restarts, automatic
suspends, TTL). Their decision is a ``Plan``;
``record`` turns it into the status to write.
Pure helpers: ``suspension`` (``spec.suspend``), ``idle`` (idle, lifetime and TTL deadlines),
``deadlines`` (requeue), ``anchors`` (what latencies are measured from), ``staging_phases``,
``owner_record`` (the verified owner). I/O: ``orgstatus`` (the API service's org status),
``recovery_report`` and ``verify_report`` (what a pass reports once its status is written).
Metrics: ``lifecycle_metrics``, ``fleet_metrics``, ``rollout_metrics``.
"""
