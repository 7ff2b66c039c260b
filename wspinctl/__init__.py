"""The roof: the ``wspin`` console script and the operator commands.

- ``cli``: the console script; loads the one command being run (a process's or an operator
  command's flag module).
- ``check_cli`` and ``status_cli``: the operator commands ``wspin check`` (is an installation
  healthy?) and ``wspin status`` (which workspace pods run which release).
- ``check``, ``status``, ``permissions``, ``install``: what they read of a Helm release (its
  object names, the processes' arguments, the API calls each process makes).

Above the processes: a command may read their settings and rules; nothing imports this package.
"""
