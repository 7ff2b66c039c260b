"""Server-side TLS over a plain TCP transport, through OpenSSL memory BIOs.

The server does TLS itself rather than through ``loop.create_server(ssl=…)`` for three
bounds asyncio's TLS transport cannot give without patching its internals: the connection cap
is counted from accept (asyncio hands the protocol a connection only after its handshake), the
handshake has the server's own deadline and eviction, and no connection holds a read buffer
(asyncio allocates 256 KiB per TLS connection). It is the same ``SSLObject`` machinery
asyncio's own TLS transport runs on.
"""

from __future__ import annotations

import contextlib
import ssl

PLAINTEXT_READ = 64 * 1024
"""Bytes of plaintext taken from OpenSSL per call."""


class TlsChannel:
    """One connection's TLS session: ciphertext in, plaintext out, and back."""

    __slots__ = ("_incoming", "_tls", "established", "outgoing_bio", "peer_closed")

    def __init__(self, context: ssl.SSLContext) -> None:
        self._incoming = ssl.MemoryBIO()
        self.outgoing_bio = ssl.MemoryBIO()
        """Bytes waiting to be sent; ``outgoing_bio.pending`` says whether there are any."""
        self._tls = context.wrap_bio(self._incoming, self.outgoing_bio, server_side=True)
        self.established = False
        self.peer_closed = False

    def receive(self, ciphertext: bytes | memoryview) -> bytes:
        """Take bytes from the socket; return the plaintext they complete (often b"").

        Raises ``ssl.SSLError`` on a broken handshake or record. After the client's
        close_notify, ``peer_closed`` is set (the plaintext before it is still returned).
        Handshake bytes to send back wait in ``outgoing()``.
        """
        self._incoming.write(ciphertext)
        if not self.established:
            try:
                self._tls.do_handshake()
            except ssl.SSLWantReadError:
                return b""
            self.established = True
        chunks: list[bytes] = []
        while True:
            try:
                chunk = self._tls.read(PLAINTEXT_READ)
            except ssl.SSLWantReadError:
                break
            except ssl.SSLZeroReturnError:
                chunk = b""
            if not chunk:  # the close_notify: nothing follows it
                self.peer_closed = True
                break
            chunks.append(chunk)
            if not self._incoming.pending and not self._tls.pending():
                break  # all taken: another read would only raise SSLWantReadError
        if len(chunks) == 1:
            return chunks[0]
        return b"".join(chunks)

    def send(self, plaintext: bytes) -> bytes:
        """The ciphertext for ``plaintext``, with anything else waiting to be sent."""
        view = memoryview(plaintext)
        while view:
            written = self._tls.write(view)
            view = view[written:]
        return self.outgoing_bio.read()

    def outgoing(self) -> bytes:
        """Bytes the session produced on its own (handshake, session tickets, alerts)."""
        return self.outgoing_bio.read()

    def close_notify(self) -> bytes:
        """The close_notify alert to send before closing; the client's is not waited for."""
        if self.established:
            with contextlib.suppress(ssl.SSLError):
                self._tls.unwrap()
        return self.outgoing_bio.read()
