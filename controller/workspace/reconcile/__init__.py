"""The Workspace reconcile: one pass observes a Workspace and its pod, decides, acts, records.

``reconciler`` is the one class and the loop: a Workspace without the finalizer gets it in one
write and the pass ends (that write's event brings the next); otherwise the pass runs
observe → decide → act → record. Every dependency of a pass is one frozen ``ReconcileDeps``
(``deps``, built in ``wiring``).

- observe: ``observe`` (``Observed``, the snapshot of the Workspace, its status, its
  ``spec.suspend`` request, its pod and its Namespace's labels, read once from the caches).
- decide: ``phases`` (one handler per phase) and ``upkeep`` (what the controller does on its
  own for an Active pod: drains, health restarts, automatic suspends, TTL) return a ``Plan``
  (``plan``: the writes, the status to write, Events, the deadline), over pure helpers:
  ``suspension`` (``spec.suspend``), ``idle`` (idle, lifetime and TTL deadlines),
  ``deadlines`` (requeue), ``staging_phases``, ``owner_record`` (the verified owner), and the
  recovery and verify decisions (``recovery_report``, ``verify_report``). The reads a
  decision needs beyond the caches are explicit steps: ``orgstatus`` (the API service's org
  status), a pod's Events, the live episode checks.
- act: ``act`` makes the plan's writes. Three writes are made while deciding, as explicit
  steps, because their answer decides the rest: the claim created before the pod that mounts
  it and the pod started (admission may refuse either: ``act.refused_pod``; relay staging
  runs first, ``act.stage``), and a user's force-recycle marker removed before the pod it
  releases.
- record: ``record`` turns the plan into the status the reconciler writes once (``anchors``:
  what latencies are measured from); then what follows the committed status: the consumed
  ``spec.suspend`` cleared, Events, the recovery and verify reports.

Metrics: ``lifecycle_metrics``, ``fleet_metrics``, ``rollout_metrics``.
"""
