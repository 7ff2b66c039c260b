"""wspin: digest-pinned agentd and opencode delivery for workspace pods, and the control plane
around them.

This package is the ground floor every process stands on, in layers, each allowed to import
only the layers below it (``pyproject.toml``'s import-linter contracts hold them):

- ``wspin.http`` (the HTTP server every port runs, and the probe endpoints) and ``wspin.kube``
  (the plain-dict API client, informers, leader election).
- ``wspin.core``: pure values and rules (the contract, objects, errors, clock, quantities,
  redaction, flag and log helpers).

Above it: ``certs``, then the processes ``webhook`` and ``controller`` (never importing each
other), then ``wspinctl``, the ``wspin`` console script and the operator commands.
"""

__version__ = "0.1.0"
