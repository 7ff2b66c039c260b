"""The controller runtime: informer caches, the work queue, the manager that wires them with
leader election and the probe/metrics servers, and the runtime's metrics. The manager reads
``controller.settings.RuntimeSettings`` itself; nothing copies its fields. Work that is not a
reconcile but wants the queue's guarantees (the agent reads) runs a queue of its own through
``pool.serve``, a bounded pool, inside a leader-only runnable.

Reconcilers never import this package's internals: they see ``controller.types`` only
(keys, ``Requeue``, ``ObjectReader``) and register through ``Manager.add_controller``.
"""

from controller.runtime.manager import Manager
from controller.runtime.queue import WorkQueue
from wspin.kube.informer import Informer

__all__ = ["Informer", "Manager", "WorkQueue"]
