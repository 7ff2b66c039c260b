"""wspin: code both processes share.

What lives here: the external contract (names, labels, env, exit codes), the delivery
configuration and its validation, the error hierarchy, flag and logging helpers, the
Kubernetes client factory and the console script. What does not: anything that only the
webhook or only the controller needs (those live in ``webhook/`` and ``controller/``, which
never import each other).
"""

__version__ = "0.1.0"
