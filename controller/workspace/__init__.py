"""The Workspace controller: a Workspace becomes a PVC, a credentials Secret, a service account
and a workspace pod, and a status the API routes by.

Pure: ``pod`` assembles the pod from ``containers``, ``volumes``, ``probes``, ``compute`` and
``packages``; ``owned`` (names, owner), ``storage`` (the PVC), ``credentials`` (derived values,
the Secret), ``podfacts`` (a pod's status read once), ``lifecycle`` (phases from pod facts),
``status`` (the status to write), ``suspension`` (the ``spec.suspend`` request), ``verify``
(exit codes 81 to 84 → conditions), ``failures`` (why a pod failed: four classes),
``stuck`` (a pod that does not start, and when that counts) and ``stuck_causes`` (why, in
words a user can act on), ``boot`` (the platform's boot failing), ``recovery``
(the backoff policy and the status record), ``healing`` (one pass's recovery decision),
``anchors`` (what creation and resume times are measured from), ``agent_report`` (agentd's
answers, bounded), ``agent_view`` and ``agent_status`` (what the agent's reads make of the
status), ``drain`` (session drains before a recycle) and ``idle`` (idle, lifetime and TTL
deadlines). I/O: ``credential_keys`` (the controller's key, read at start), ``writes`` (owned
objects), ``pod_events`` (a stuck pod's Events, bounded), ``agent_client`` and
``agent_scheduler`` (the one bounded reader of agentd for the fleet), ``phases`` (one handler
per phase) with ``upkeep`` (drains, health restarts, automatic suspends, TTL),
``recovery_report`` and ``verify_report`` (what a pass reports once its status is written),
``reconciler`` (the reconcile loop, one status write per pass) and ``wiring`` (registration
with the manager). Metrics: ``agent_metrics`` and ``agent_usage``.
Delivery wiring (image volumes, their mounts, the pins) is never added here: the admission
webhook injects it.
"""
