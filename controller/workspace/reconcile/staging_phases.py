"""In which phases the Workspace reconciler runs the relay staging pass. Pure.

Staged material (envelopes in the relay namespace, scoped tokens in the handoff Secret) exists
from the first pass, which runs before the pod is built, until the Workspace is deleted. An
unbound credential must lose its envelope, and the pass's own deadline (token renewal, the
revocation staleness bound) must be kept, whatever the pod does meanwhile: wait to be
scheduled or for capacity (Pending), start or be replaced (Creating), run (Active), stop for a
suspension (Suspending, Suspended), or keep running a spec that no longer builds (Failed). A
revocation that waited for the pod to be scheduled would leave a token the workspace may
already hold working at the router for as long as the pod stays unscheduled.

So the pass runs in every phase but Terminating, where the Workspace's cleanup deletes what
was staged instead.
"""

from __future__ import annotations

from typing import Final

from wspin.core.fleet import Phase

NO_STAGING: Final[frozenset[Phase]] = frozenset({"Terminating"})


def stages_in(phase: Phase) -> bool:
    """Whether the relay staging pass runs for a Workspace whose reconcile lands in ``phase``."""
    return phase not in NO_STAGING
