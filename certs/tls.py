"""The server-side TLS context whose certificate can change under a running listener.

Why an ``sni_callback`` swap rather than ``load_cert_chain`` into the listening context:
the replacement context is built completely (and off the event loop, since it reads key
material) before anything can see it, and the swap is one reference assignment on the
loop. Reloading the live context instead loads the certificate and then the key in two
steps; a handshake between them, or a key that fails to load, leaves the listener with a
certificate and key that do not match. OpenSSL calls the callback for every ClientHello,
with or without SNI, and the connection then uses the swapped context's certificate.
Connections already established keep the certificate they shook hands with.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import os
import ssl
import tempfile
from collections.abc import Iterator

from certs.build import CertificateError, KeyPair
from certs.validity import check_pair, pair_problem
from wspin.core.clock import Clock


def server_context() -> ssl.SSLContext:
    """A TLS 1.2+ server context with no certificate (the callback supplies one)."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    # A TLS 1.2 client that renegotiates makes the server redo the handshake's key exchange
    # as often as it asks, on one connection that no deadline sees as stalled. OpenSSL 3
    # refuses it by default; the option refuses it whatever OpenSSL the interpreter links.
    context.options |= ssl.OP_NO_RENEGOTIATION
    return context


def context_for(cert_pem: bytes, key_pem: bytes) -> ssl.SSLContext:
    """A server context holding this certificate chain and key (blocking: reads key files).

    ``load_cert_chain`` only takes paths, so the PEM goes through anonymous in-memory files
    where the platform has them (no key material on disk, works with a read-only root
    filesystem), else through a private temporary directory that is removed at once.
    """
    context = server_context()
    with _pem_paths(cert_pem, key_pem) as (cert_path, key_path):
        try:
            context.load_cert_chain(cert_path, key_path)
        except ssl.SSLError as err:
            raise CertificateError(f"TLS library rejected the certificate or key: {err}") from err
    return context


class ServingContext:
    """One listening context for the process's lifetime; the served certificate swaps."""

    def __init__(self) -> None:
        self._listening = server_context()
        self._listening.sni_callback = self._select
        self._current: ssl.SSLContext | None = None
        self._pair: KeyPair | None = None
        self._loaded: tuple[bytes, bytes] | None = None

    @property
    def listening(self) -> ssl.SSLContext:
        """Pass this once to the server (aiohttp ``TCPSite(ssl_context=…)``)."""
        return self._listening

    @property
    def pair(self) -> KeyPair | None:
        """The certificate and key served to new connections, if any."""
        return self._pair

    def serves(self, cert_pem: bytes, key_pem: bytes) -> bool:
        """These exact bytes are what new connections already get."""
        return self._loaded == (cert_pem, key_pem)

    async def load(
        self, cert_pem: bytes, key_pem: bytes, what: str, now: datetime.datetime
    ) -> KeyPair:
        """Check the pair, build its context in a thread, then swap it in.

        Raises ``UnusablePair`` (and keeps serving the previous certificate) when the pair is
        unreadable, mismatched, expired or not yet valid at ``now``; ``CertificateError``
        when the TLS library refuses it.
        """
        pair = check_pair(cert_pem, key_pem, what, now)
        context = await asyncio.to_thread(context_for, cert_pem, key_pem)
        self.swap(context, pair, (cert_pem, key_pem))
        return pair

    def swap(self, context: ssl.SSLContext, pair: KeyPair, pem: tuple[bytes, bytes]) -> None:
        """Serve ``context`` (built from ``pem``, holding ``pair``) to every new connection."""
        self._current, self._pair, self._loaded = context, pair, pem

    def _select(
        self, connection: ssl.SSLObject | ssl.SSLSocket, _server_name: str | None, _: object
    ) -> int | None:
        if self._current is not None:
            connection.context = self._current
        return None


@contextlib.contextmanager
def _pem_paths(cert_pem: bytes, key_pem: bytes) -> Iterator[tuple[str, str]]:
    if hasattr(os, "memfd_create") and os.path.isdir("/dev/fd"):
        fds = [os.memfd_create("wspin-tls", os.MFD_CLOEXEC) for _ in range(2)]
        try:
            for fd, data in zip(fds, (cert_pem, key_pem), strict=True):
                _write_all(fd, data)
            yield f"/dev/fd/{fds[0]}", f"/dev/fd/{fds[1]}"
        finally:
            for fd in fds:
                os.close(fd)
        return
    with tempfile.TemporaryDirectory(prefix="wspin-tls-") as folder:  # mode 0700
        paths = (os.path.join(folder, "tls.crt"), os.path.join(folder, "tls.key"))
        for path, data in zip(paths, (cert_pem, key_pem), strict=True):
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
            try:
                _write_all(fd, data)
            finally:
                os.close(fd)
        yield paths


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


class ServesFromContext:
    """The ``CertificateSource`` answers every source gives the same way: from the
    ``ServingContext`` it keeps current (``_serving``) and its clock (``_clock``)."""

    _serving: ServingContext
    _clock: Clock

    def ssl_context(self) -> ssl.SSLContext:
        return self._serving.listening

    def healthy(self) -> bool:
        return self.problem() is None

    def problem(self) -> str | None:
        """Why the served certificate is unusable now (none, outside its validity), or None."""
        pair = self._serving.pair
        if pair is None:
            return "no serving certificate loaded"
        found = pair_problem(pair, self._clock())
        return None if found is None else f"serving certificate: {found[1]}"

    def trust_problem(self) -> str | None:
        """None: a source whose CA someone else publishes cannot tell (the self-managed
        source, which publishes it, says)."""
        return None

    def not_after(self) -> datetime.datetime | None:
        pair = self._serving.pair
        return pair.not_after if pair else None
