"""The Workspace controller: a Workspace becomes a PVC, a service account and a workspace pod.

``pod`` (pod, PVC and service account bodies), ``status`` (phase and conditions) and
``verify`` (exit codes 81 to 84 → conditions) are pure functions of their inputs; ``reconciler``
reads caches, writes through the API and records Events and metrics; ``wiring`` registers it
with the manager. Delivery wiring is never added here: the admission webhook injects it.
"""
