"""Cloud drivers: ``aws`` (boto3), ``oci`` (oci SDK) and ``fake`` (in-process), one Protocol.

Only this package talks to a cloud, and it knows nothing else of the relay controller (an
import-linter contract forbids every other ``controller.relay`` module here). ``base`` holds
the contract: the request and result values, the VM tag contract and the three error classes
the reconciler acts on. ``providers`` is the registry: one entry per real driver (credentials
Secret, SDK, defaults, shape table), which builds it; a real driver never imports that
registry, it is handed what it needs. ``select`` picks the drivers a process runs.
"""
