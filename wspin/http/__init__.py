"""HTTP serving: the connection limits every port enforces, the server that enforces them,
and the probe and metrics endpoints (``/healthz``, ``/readyz``, ``/metrics``) both processes
run. Nothing here knows admission, reconciling or the Kubernetes API.
"""
