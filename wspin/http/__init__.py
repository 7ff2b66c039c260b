"""HTTP serving: the one HTTP/1.1 server every port of both processes runs
(``wspin.http.server``, its connections in ``wspin.http.connection``, the requests they parse
in ``wspin.http.parsing``, what they share and who gives way in ``wspin.http.pool``, TLS in
``wspin.http.tls``), the bounds it enforces (``wspin.http.limits``), what an endpoint sees
(``wspin.http.messages``) and the probe and metrics endpoints (``wspin.http.probes``).
Nothing here knows admission, reconciling or the Kubernetes API.
"""
