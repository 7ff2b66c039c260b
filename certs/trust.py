"""Whether the API server trusts the certificate a replica serves: every entry of both
webhook configurations carries a CA that signed it. Until then each call through them fails
with ``x509: certificate signed by unknown authority``, so the replica is not ready.

After a re-install the configurations are new and carry no bundle, while the Lease may still
name a replica of the old release that could not release it (the uninstall deletes the RBAC it
needed at the same moment as the replica). So a replica that does not hold the Lease fills
configurations that carry no bundle at all with the bundle the Secret records as published.
That decides nothing a leader would not: it repeats a publication already made, and it cannot
undo a later one, because a leader never publishes an empty bundle.
"""

from __future__ import annotations

import logging

from cryptography import x509

from certs.build import fingerprint
from certs.cabundle import Target, patch_ca_bundle, untrusting
from certs.store import Stored
from wspin.core.errors import KubeAPIError
from wspin.core.logs import fields
from wspin.kube.client import Kube

log = logging.getLogger("wspin.certs")

NOT_READ = "the webhook configurations have not been read yet"


class Trust:
    """What the last read of the configurations showed, for readiness."""

    def __init__(self, kube: Kube, webhooks: tuple[Target, ...]) -> None:
        self.kube = kube
        self.webhooks = list(webhooks)
        self._problem: str | None = NOT_READ if webhooks else None
        self._error: str | None = None

    def problem(self) -> str | None:
        """Why the API server cannot call this replica yet, or None; the last answer is kept
        while the configurations cannot be read."""
        return self._problem

    async def check(self, leaf: x509.Certificate, stored: Stored, *, leading: bool) -> None:
        """Read whether the configurations trust ``leaf``; when not ``leading``, first fill
        configurations without any bundle from the published Secret ``stored``. An API
        error is logged once (with ``fix``) and keeps the last answer."""
        if not self.webhooks:
            return
        try:
            found = await untrusting(self.kube, leaf, self.webhooks)
            present = [target for target, why in found if why != "not found"]
            if present and stored.published and not leading:
                filled = await patch_ca_bundle(
                    self.kube, stored.bundle_pem, present, fill_only=True
                )
                if filled:
                    log.info(
                        "caBundle filled from the published Secret",
                        extra=fields(
                            configurations=filled,
                            bundle=[fingerprint(c) for c in stored.bundle],
                            reason="the configurations carried no CA bundle and this "
                            "replica does not hold the Lease",
                        ),
                    )
                    found = await untrusting(self.kube, leaf, self.webhooks)
        except KubeAPIError as err:
            if str(err) != self._error:
                self._error = str(err)
                log.warning(
                    "cannot read the webhook configurations; readiness keeps its last answer",
                    extra=fields(
                        error=str(err),
                        fix="grant the webhook's service account get and update on its two "
                        "webhook configurations (the chart does)",
                    ),
                )
            return
        self._error = None
        self._problem = (
            None
            if not found
            else "the webhook configurations do not carry the CA of the served certificate "
            "yet: " + "; ".join(f"{target.name}: {why}" for target, why in found)
        )
