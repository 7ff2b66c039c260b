"""wspin: digest-pinned agentd and opencode delivery for workspace pods, and the control plane
around them.

The shared code lives here in layers, each allowed to import only the layers below it
(``pyproject.toml``'s import-linter contracts hold them):

- ``wspin.cli``: the console script; loads the one command being run.
- ``wspin.ops``: the operator commands (``wspin check``, ``wspin status``) and what they read
  of an installation.
- the processes, ``webhook`` and ``controller`` (never importing each other), then ``certs``.
- ``wspin.http`` (the HTTP server every port runs, and the probe endpoints) and ``wspin.kube``
  (the plain-dict API client, informers, leader election).
- ``wspin.core``: pure values and rules (the contract, objects, errors, clock, quantities,
  redaction, flag and log helpers).
"""

__version__ = "0.1.0"
