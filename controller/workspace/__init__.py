"""The Workspace controller: a Workspace becomes a PVC, a credentials Secret, a service account
and a workspace pod, and a status the API routes by.

Packages, each importing only those below it (an import-linter contract holds this):
``wiring`` (registration with the manager) > ``reconcile`` (the pass: observe, decide, act,
record) > ``recovery`` (pod trouble and its backoff), ``agent`` (agentd in Active pods) and
``egress`` (the NetworkPolicy), which do not import each other > ``pod`` (the owned objects,
built and written). Delivery wiring (image volumes, their mounts, the pins) is never added
here: the admission webhook injects it.
"""
