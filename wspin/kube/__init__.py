"""Kubernetes access: the plain-dict API client and its configuration, informers (list, then
watch, into a cache of plain dicts) and Lease-based leader election.

Only modules that talk to the API server import this package; pure decisions take the dicts
they need as arguments. Nothing here knows a process or an HTTP server.
"""
