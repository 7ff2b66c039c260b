"""The pure core both processes stand on: the external contract (names, labels, env, exit
codes), objects and kinds, the error hierarchy, the clock, the one retry backoff
(``backoff``) and uid jitter (``jitter``), quantities, redaction, the delivery
configuration, the workspace-pod definition, the typed view of a Workspace (``workspace``:
each spec and status field named once), the runtime catalogue's rules, and the flag and
JSON-log helpers.

No network, file or API access lives here, and nothing here imports a layer above
(``wspin.kube``, ``wspin.http``, the processes). The flag helpers are the one place that read
the environment, once, while a parser is built at start.
"""
