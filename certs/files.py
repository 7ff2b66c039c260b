"""Certificates as files: writing them (``wspin certs generate``) and serving them with reload.

The file source fits both user-supplied certificates and cert-manager's, which reach the
pod as a mounted Secret that the kubelet updates in place: the source re-reads the files on
an interval and swaps the served certificate only when the bytes changed.
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

from certs.atomic import write_atomically
from certs.build import CertificateError, KeyPair, fingerprint
from certs.expiry import ExpiryReporter
from certs.metrics import CertificateMetrics
from certs.tls import ServesFromContext, ServingContext, context_for
from certs.validity import UnusablePair, check_pair
from wspin.core.clock import Clock, utc_now
from wspin.core.errors import ConfigError
from wspin.core.logs import fields

log = logging.getLogger("wspin.certs")

RELOAD_INTERVAL = 10.0
"""Seconds between reads; the kubelet itself takes up to a minute to update a mounted Secret."""
TOLERATED_FAILURES = 3
"""Consecutive failed reads logged quietly: a writer replacing cert and key one after the
other is caught between the two. After that each failure is a warning."""


def write_certificates(out: Path, ca: KeyPair, serving: KeyPair) -> list[Path]:
    """Write ``ca.crt``, ``tls.crt`` and ``tls.key`` (mode 0600) into ``out``.

    Each file goes through ``write_atomically``: a reader sees the old or the new file, never
    half of one, and an entry planted in ``out`` is never followed.
    """
    out.mkdir(parents=True, exist_ok=True)
    written = [
        write_atomically(out / "ca.crt", ca.cert_pem, 0o644),
        write_atomically(out / "tls.crt", serving.cert_pem, 0o644),
        write_atomically(out / "tls.key", serving.key_pem, 0o600),
    ]
    return written


class FileSource(ServesFromContext):
    """Serves ``cert_file``/``key_file`` and reloads them when their bytes change.

    A read that fails (a file missing, a cert and key that do not match yet, a pair expired
    or not yet valid) keeps the previous certificate in service and is retried next
    interval; ``healthy()`` stays about the certificate actually served, which is still
    valid, so a writer's bad moment never takes every replica out of the Service at once.
    """

    def __init__(
        self,
        cert_file: Path,
        key_file: Path,
        *,
        metrics: CertificateMetrics,
        interval: float = RELOAD_INTERVAL,
        clock: Clock = utc_now,
    ) -> None:
        self.cert_file = cert_file
        self.key_file = key_file
        self.interval = interval
        self._clock = clock
        self._serving = ServingContext()
        self._metrics = metrics
        self._expiry = ExpiryReporter(metrics.expiry)
        self._failures = 0
        self._counted: tuple[tuple[bytes, bytes] | None, str, str] | None = None

    def load_at_start(self) -> None:
        """Read and serve the files now; a problem exits the process (``ConfigError``).

        Blocking, and meant for start-up before the event loop serves anything: a webhook
        whose certificate files are wrong (unreadable, mismatched, expired, not yet valid)
        fails loudly, naming the file and its flag, rather than start unready.
        """
        try:
            cert_pem, key_pem = self._read()
            pair = check_pair(cert_pem, key_pem, f"--tls-cert-file {self.cert_file}", self._clock())
            context = context_for(cert_pem, key_pem)
        except UnusablePair as err:
            raise ConfigError(f"cannot serve TLS: {self._explain(err)}", self._fix(err)) from err
        except (OSError, CertificateError) as err:
            raise ConfigError(
                f"cannot serve TLS from --tls-cert-file {self.cert_file} and --tls-key-file "
                f"{self.key_file}: {err}",
                "point --tls-cert-file and --tls-key-file at a readable PEM certificate and "
                "its unencrypted private key",
            ) from err
        self._serving.swap(context, pair, (cert_pem, key_pem))
        self._report(pair, "loaded")

    async def run(self) -> None:
        """Re-read the files every ``interval`` seconds until cancelled; never raises (the
        webhook runs this as a background task nobody awaits)."""
        while True:
            try:
                await self.reload()
            except Exception:
                log.exception(
                    "certificate file check failed", extra=fields(certFile=str(self.cert_file))
                )
            await asyncio.sleep(self.interval)

    async def reload(self) -> bool:
        """One check: swap in changed files; True when the served certificate changed.

        A pair that must not be served (``certs.validity``) keeps the current one, is logged
        with the reason and counted in ``wspin_webhook_certificate_reload_rejected_total``.
        """
        read: tuple[bytes, bytes] | None = None
        try:
            read = cert_pem, key_pem = await asyncio.to_thread(self._read)
            if self._serving.serves(cert_pem, key_pem):
                self._failures = 0
                self._observe()
                return False
            pair = await self._serving.load(cert_pem, key_pem, str(self.cert_file), self._clock())
        except (OSError, CertificateError) as err:
            self._refused(err, read)
            return False
        self._failures = 0
        self._counted = None
        self._report(pair, "reloaded")
        return True

    def _refused(self, err: OSError | CertificateError, read: tuple[bytes, bytes] | None) -> None:
        self._failures += 1
        reason = err.reason if isinstance(err, UnusablePair) else "unreadable"
        # Counted once per refused content, not once per interval it stays in place.
        counted = (read, reason, "" if read else str(err))
        if counted != self._counted:
            self._counted = counted
            self._metrics.rejected.labels(reason=reason).inc()
        # A writer replacing cert and key one after the other is caught between the two
        # (missing or mismatched for a moment); a validity problem is never such a moment.
        transient = reason in ("unreadable", "key-mismatch")
        quiet = transient and self._failures <= TOLERATED_FAILURES
        log.log(
            logging.INFO if quiet else logging.WARNING,
            "certificate files not reloaded; still serving the previous certificate",
            extra=fields(
                certFile=str(self.cert_file),
                keyFile=str(self.key_file),
                reason=reason,
                consecutiveFailures=self._failures,
                error=str(err),
            ),
        )
        self._observe()

    def _explain(self, err: UnusablePair) -> str:
        if err.reason == "key-mismatch":
            return (
                f"--tls-key-file {self.key_file} does not belong to --tls-cert-file "
                f"{self.cert_file}"
            )
        if err.reason == "unreadable":
            return f"--tls-cert-file {self.cert_file} / --tls-key-file {self.key_file}: {err}"
        return str(err)

    def _fix(self, err: UnusablePair) -> str:
        if err.reason == "key-mismatch":
            return "point --tls-key-file at the private key of --tls-cert-file's certificate"
        if err.reason in ("expired", "not-yet-valid"):
            return (
                "renew the certificate in --tls-cert-file (and --tls-key-file) or fix this "
                "node's clock; `wspin certs generate` writes a fresh pair"
            )
        return (
            "point --tls-cert-file and --tls-key-file at a readable PEM certificate and its "
            "unencrypted private key"
        )

    def _read(self) -> tuple[bytes, bytes]:
        return self.cert_file.read_bytes(), self.key_file.read_bytes()

    def _observe(self) -> None:
        pair = self._serving.pair
        if pair is not None:
            self._expiry.observe("serving", pair.cert, self._clock())

    def _report(self, pair: KeyPair, verb: str) -> None:
        log.info(
            f"serving certificate {verb}",
            extra=fields(
                certFile=str(self.cert_file),
                fingerprint=fingerprint(pair.cert),
                notAfter=pair.not_after.isoformat(),
            ),
        )
        self._observe()
