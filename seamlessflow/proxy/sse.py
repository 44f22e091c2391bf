"""Server-sent events from an engine's stream, split from whatever pieces the socket delivers.

Why not `async for line in response.content`: that awaits once per line (two lines per event: the `data:`
line and the blank one), and at 16–30 events a call those awaits were a visible share of the proxy's CPU per
call. Reading the bytes that arrived (`iter_any`) and splitting them here costs one await per network read,
however many events it holds. Pure: no I/O.
"""

from __future__ import annotations


class SSESplitter:
    """Feed raw bytes, get the payloads of complete `data:` lines (a partial line waits for the next feed)."""

    def __init__(self) -> None:
        self._rest = b""

    def feed(self, piece: bytes) -> list[bytes]:
        lines = (self._rest + piece).split(b"\n")
        self._rest = lines.pop()
        return [line[5:].strip() for line in lines if line.startswith(b"data:")]

    def close(self) -> list[bytes]:
        """The last line, when the stream ended without a newline after it."""
        rest, self._rest = self._rest, b""
        return [rest[5:].strip()] if rest.startswith(b"data:") else []
