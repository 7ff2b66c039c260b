"""The wspin webhook process: the pod injector, the Workspace validator, the tenant quota, the
pin resolution they serve with, and the admission port's edge.

Policies (``inject``, ``validate``, ``tenant_quota``, ``pins``) are pure or take their I/O as
arguments, and take values, never flags or the environment: ``settings`` declares and parses
every flag once, ``server`` wires the process. Never imports ``controller``; shared code lives
in ``wspin``.

Metrics, the one pattern both processes follow:

- Each process builds one ``CollectorRegistry`` at start (``wspin.http.probes.
  process_registry()``; in the controller the manager's ``manager.registry``) and serves it on
  its metrics port. Nothing registers on ``prometheus_client.REGISTRY``.
- Each part that exports metrics has one class taking that registry in its constructor
  (``AdmissionMetrics(registry)``, ``CertificateMetrics(registry)``,
  ``ImageVolumeGate(..., registry=)``, ``RuntimeMetrics``, ``RelayMetrics``,
  ``VerifyMetrics``): prometheus_client metric objects created with ``registry=``, or a
  ``Collector`` that turns plain numbers into families at scrape time where recording sits
  on a hot path (the admission port). No metric is created at import time.
- The object is handed to whatever records, through constructors; tests pass a fresh
  ``CollectorRegistry()`` and read it back (``tests/support/metrics.py``).
"""
