"""Cloud drivers: ``aws`` (boto3), ``oci`` (oci SDK) and ``fake`` (in-process), one Protocol.

Only this package talks to a cloud. ``base`` holds the contract: the request and result values,
the VM tag contract and the three error classes the reconciler acts on.
"""
