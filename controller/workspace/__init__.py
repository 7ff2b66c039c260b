"""The Workspace controller: a Workspace becomes a PVC, a service account and a workspace pod.

``pod`` assembles the pod from ``containers``, ``volumes``, ``probes``, ``resources`` and
``packages``; those, ``status`` (phase and conditions) and ``verify`` (exit codes 81 to 84 →
conditions) are pure functions of their inputs; ``reconciler`` reads caches, writes through
the API and records Events and metrics; ``wiring`` registers it with the manager. Delivery
wiring (image volumes, their mounts, the pins) is never added here: the admission webhook
injects it.
"""
