"""Why a workspace pod is in trouble, and what recovery does about it. Pure but for the Events.

``failures`` classifies a failed pod (four classes), ``boot`` the platform's own boot failing,
``stuck`` a pod that does not start and ``causes`` says why in words a user can act on (read
from its Warning Events by ``pod_events``, the one I/O module here); ``verify`` maps exit codes
81 to 84 to conditions. ``policy`` is the backoff per class and the status record that keeps
it; ``decision`` is one pass's recovery decision from all of them (whether an episode is new
is ``controller.toolkit.episodes``). Metrics: ``metrics`` and ``verify_metrics``.
"""
