"""Defaults of a Workspace's compute that the pod builder applies and the validator checks.

Pure data, shared so the two cannot drift: the validator must cap the limits the pod will
really get, including the ones the builder derives (a request alone gets a limit of
``LIMIT_BURST_FACTOR`` times the request).
"""

from __future__ import annotations

from typing import Final

DEFAULT_CPU_REQUEST: Final = "500m"
"""CPU request of a Workspace that sets none."""
DEFAULT_MEMORY_REQUEST: Final = "512Mi"
"""Memory request of a Workspace that sets none."""
LIMIT_BURST_FACTOR: Final = 4
"""An absent limit is this many times the request: burst room for builds and installs
without letting one workspace take the node."""
