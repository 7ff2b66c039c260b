"""Certificates as files: writing them (``wspin certs generate``) and serving them with reload.

The file source fits both user-supplied certificates and cert-manager's, which reach the
pod as a mounted Secret that the kubelet updates in place: the source re-reads the files on
an interval and swaps the served certificate only when the bytes changed.
"""

from __future__ import annotations

import asyncio
import logging
import os
from pathlib import Path

from certs.build import CertificateError, KeyPair, fingerprint, load_key_pair
from certs.clock import Clock, utc_now
from certs.expiry import ExpiryReporter
from certs.tls import ServesFromContext, ServingContext, context_for
from wspin.errors import ConfigError
from wspin.logs import fields

log = logging.getLogger("wspin.certs")

RELOAD_INTERVAL = 10.0
"""Seconds between reads; the kubelet itself takes up to a minute to update a mounted Secret."""
TOLERATED_FAILURES = 3
"""Consecutive failed reads logged quietly: a writer replacing cert and key one after the
other is caught between the two. After that each failure is a warning."""


def write_certificates(out: Path, ca: KeyPair, serving: KeyPair) -> list[Path]:
    """Write ``ca.crt``, ``tls.crt`` and ``tls.key`` (mode 0600) into ``out``.

    Each file is written beside its target and renamed over it, so a reader sees the old
    or the new file, never half of one.
    """
    out.mkdir(parents=True, exist_ok=True)
    written = [
        _replace(out / "ca.crt", ca.cert_pem, 0o644),
        _replace(out / "tls.crt", serving.cert_pem, 0o644),
        _replace(out / "tls.key", serving.key_pem, 0o600),
    ]
    return written


def _replace(path: Path, data: bytes, mode: int) -> Path:
    partial = path.with_name(f".{path.name}.partial")
    fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    try:
        os.fchmod(fd, mode)  # O_CREAT's mode is masked by umask and ignored for existing files
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
    finally:
        os.close(fd)
    os.replace(partial, path)
    return path


class FileSource(ServesFromContext):
    """Serves ``cert_file``/``key_file`` and reloads them when their bytes change.

    A read that fails (a file missing, or a cert and key that do not match yet) keeps the
    previous certificate in service and is retried next interval; ``healthy()`` stays about
    the certificate actually served, which is still valid, so a writer's bad moment never
    takes every replica out of the Service at once.
    """

    def __init__(
        self,
        cert_file: Path,
        key_file: Path,
        *,
        interval: float = RELOAD_INTERVAL,
        clock: Clock = utc_now,
    ) -> None:
        self.cert_file = cert_file
        self.key_file = key_file
        self.interval = interval
        self._clock = clock
        self._serving = ServingContext()
        self._expiry = ExpiryReporter()
        self._failures = 0

    def load_at_start(self) -> None:
        """Read and serve the files now; a problem exits the process (``ConfigError``).

        Blocking, and meant for start-up before the event loop serves anything: a webhook
        whose certificate files are wrong should fail loudly rather than start unready.
        """
        try:
            cert_pem, key_pem = self._read()
            pair, _ = load_key_pair(cert_pem, key_pem, str(self.cert_file))
            context = context_for(cert_pem, key_pem)
        except (OSError, CertificateError) as err:
            raise ConfigError(
                f"cannot serve TLS from {self.cert_file} and {self.key_file}: {err}",
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
        """One check: swap in changed files; True when the served certificate changed."""
        try:
            cert_pem, key_pem = await asyncio.to_thread(self._read)
            if self._serving.serves(cert_pem, key_pem):
                self._failures = 0
                self._observe()
                return False
            pair = await self._serving.load(cert_pem, key_pem, str(self.cert_file))
        except (OSError, CertificateError) as err:
            self._failures += 1
            level = logging.INFO if self._failures <= TOLERATED_FAILURES else logging.WARNING
            log.log(
                level,
                "certificate files not reloaded; still serving the previous certificate",
                extra=fields(
                    certFile=str(self.cert_file),
                    keyFile=str(self.key_file),
                    consecutiveFailures=self._failures,
                    error=str(err),
                ),
            )
            self._observe()
            return False
        self._failures = 0
        self._report(pair, "reloaded")
        return True

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
