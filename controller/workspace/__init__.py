"""The Workspace controller: a Workspace becomes a PVC, a credentials Secret, a service account
and a workspace pod, and a status the API routes by.

Pure: ``pod`` assembles the pod from ``containers``, ``volumes``, ``probes``, ``compute`` and
``packages``; ``owned`` (names, owner), ``storage`` (the PVC), ``credentials`` (derived values,
the Secret), ``podfacts`` (a pod's status read once), ``lifecycle`` (phases from pod facts),
``status`` (the status to write), ``suspension`` (the ``spec.suspend`` request) and ``verify``
(exit codes 81 to 84 → conditions). I/O: ``credential_keys`` (the controller's key, read at
start), ``writes`` (owned objects), ``phases`` (one handler per phase), ``reconciler`` (the
reconcile loop, one status write per pass) and ``wiring`` (registration with the manager).
Delivery wiring (image volumes, their mounts, the pins) is never added here: the admission
webhook injects it.
"""
