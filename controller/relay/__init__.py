"""The InferenceRelay controller: a fleet of one relay VM per cloud provider.

What lives here: the reconciler and its pure decisions (fleet slots, state transitions,
conditions), the cloud drivers behind one Protocol, cloud-init rendering, the router health
scrape, the peers ConfigMap and token Secret, the orphan detector and the metrics.
What does not: the manager, work queue and informers (``controller.runtime``); Workspace logic.
"""
