"""Cloud drivers: ``aws`` (boto3), ``oci`` (oci SDK) and ``fake`` (in-process), one Protocol.

Only this package talks to a cloud. Each real driver is one module here plus its entry in
``controller.relay.providers`` (credentials Secret, SDK, defaults, shape table), which builds
it; a driver never imports that registry, it is handed what it needs. ``base`` holds the
contract: the request and result values, the VM tag contract and the three error classes the
reconciler acts on.
"""
