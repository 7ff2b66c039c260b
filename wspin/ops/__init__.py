"""The operator commands: ``wspin check`` (is an installation healthy?) and ``wspin status``
(which workspace pods run which release), and what they read of a Helm release (its object
names, the processes' arguments, the API calls each process makes).

Above the processes: a command may read their settings and rules; no process imports this.
"""
