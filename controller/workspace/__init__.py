"""The Workspace controller: a Workspace becomes a PVC, a credentials Secret, a service account
and a workspace pod, and a status the API routes by.

Pure: ``pod`` assembles the pod from ``containers``, ``volumes``, ``probes``, ``compute`` and
``packages``; ``owned`` (names, owner), ``storage`` (the PVC), ``credentials`` (derived values,
the Secret), ``podfacts`` (a pod's status read once), ``lifecycle`` (phases from pod facts),
``status`` (the status to write), ``suspension`` (the ``spec.suspend`` request), ``verify``
(exit codes 81 to 84 → conditions), ``agent_report`` (agentd's answers, bounded),
``agent_view`` and ``agent_status`` (what the agent's reads make of the status), ``drain``
(session drains before a recycle) and ``idle`` (idle, lifetime and TTL deadlines). I/O:
``credential_keys`` (the controller's key, read at start), ``writes`` (owned objects),
``agent_client`` and ``agent_scheduler`` (the one bounded reader of agentd for the fleet),
``phases`` (one handler per phase) with ``upkeep`` (drains, health restarts, automatic
suspends, TTL), ``reconciler`` (the reconcile loop, one status write per pass) and ``wiring``
(registration with the manager). Metrics: ``agent_metrics`` and ``agent_usage``.
Delivery wiring (image volumes, their mounts, the pins) is never added here: the admission
webhook injects it.
"""
