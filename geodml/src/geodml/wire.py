"""Bytes on the wire between two processes: a TCP relay that listens on a loopback port, forwards
every connection to an upstream address and counts, with a timestamp, every chunk of bytes it
carries in each direction. Put between a Flower SuperNode and its SuperLink, it measures what
that data center's link really carried (HTTP requests and responses with their headers, Flower's
protobuf framing, polls and heartbeats), to set beside the ledger's count of the same run.

The count is at the socket level (payload bytes of the TCP streams, as ``recv`` returns them):
TCP/IP headers (52-66 B a segment on loopback) and the relay's own second hop are not in it.
"""

from __future__ import annotations

import socket
import threading
import time
from dataclasses import dataclass, field

#: Direction names: bytes the client sent towards upstream, and bytes upstream sent back.
UP, DOWN = "up", "down"
_CHUNK = 1 << 16


@dataclass
class RelayCount:
    """What one relay carried. events: (unix time in seconds, direction UP or DOWN, bytes) per
    chunk forwarded, in order; connections: TCP connections accepted."""

    events: list[tuple[float, str, int]] = field(default_factory=list)
    connections: int = 0

    def total(self, direction: str | None = None, start: float = float("-inf"), end: float = float("inf")) -> int:
        """Bytes forwarded in direction (None: both) with start <= time <= end (unix seconds)."""
        return sum(n for t, d, n in self.events if start <= t <= end and (direction is None or d == direction))


class CountingRelay:
    """A TCP relay from 127.0.0.1:port (0: a free port, see .port) to upstream (host, port),
    counting every byte it forwards (RelayCount). One thread accepts, two per connection pump.
    Use as a context manager or call close(). Raises OSError if it cannot listen."""

    def __init__(self, upstream: tuple[str, int], port: int = 0):
        self.upstream = upstream
        self.count = RelayCount()
        self._lock = threading.Lock()
        self._closed = threading.Event()
        self._socks: list[socket.socket] = []
        self._server = socket.create_server(("127.0.0.1", port))
        self.port = int(self._server.getsockname()[1])
        threading.Thread(target=self._accept, name=f"relay-{self.port}", daemon=True).start()

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                client, _ = self._server.accept()
            except OSError:  # closed
                return
            try:
                up = socket.create_connection(self.upstream, timeout=10)
                up.settimeout(None)
            except OSError:
                client.close()
                continue
            with self._lock:
                self.count.connections += 1
                self._socks += [client, up]
            threading.Thread(target=self._pump, args=(client, up, UP), daemon=True).start()
            threading.Thread(target=self._pump, args=(up, client, DOWN), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket, direction: str) -> None:
        try:
            while True:
                data = src.recv(_CHUNK)
                if not data:
                    break
                dst.sendall(data)
                with self._lock:
                    self.count.events.append((time.time(), direction, len(data)))
        except OSError:
            pass
        finally:
            # Half-close so the other side sees the end of this direction (HTTP keep-alive ends cleanly).
            for s, how in ((dst, socket.SHUT_WR), (src, socket.SHUT_RD)):
                try:
                    s.shutdown(how)
                except OSError:
                    pass

    def snapshot(self) -> RelayCount:
        """A copy of the count so far (safe to read while the relay runs)."""
        with self._lock:
            return RelayCount(list(self.count.events), self.count.connections)

    def close(self) -> None:
        """Stop listening and close every relayed connection."""
        self._closed.set()
        self._server.close()
        with self._lock:
            socks, self._socks = self._socks, []
        for s in socks:
            try:
                s.close()
            except OSError:
                pass

    def __enter__(self) -> "CountingRelay":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
