"""The host's channel to a sandbox server: length-prefixed JSON, one job in, one result out.

What it guarantees: a message is read whole or not at all (a clean end of file between messages is
None; an end inside one is an EOFError), never past a deadline (TimeoutError), and never larger than
the bound the reader sets, so a server that floods the channel cannot make the host buffer without
end. Standard library only: the server (harness.py, run as a script) and the host's worker.py
import it.
"""

from __future__ import annotations

import json
import os
import select
import struct
import time

_HEADER = struct.Struct(">I")
_CHUNK = 1 << 16


def write_message(fd: int, message: dict) -> None:
    """Send one JSON message, length-prefixed (ASCII-escaped, so any str survives)."""
    data = json.dumps(message).encode()
    view = memoryview(_HEADER.pack(len(data)) + data)
    while view:
        view = view[os.write(fd, view) :]


def read_message(fd: int, deadline: float | None = None, max_bytes: int | None = None) -> dict | None:
    """Read one message; None at a clean end of file; TimeoutError past ``deadline`` (monotonic).

    ``max_bytes`` bounds what the host buffers for a reply from inside the sandbox.
    """
    header = _read_exact(fd, _HEADER.size, deadline)
    if header is None:
        return None
    size = _HEADER.unpack(header)[0]
    if max_bytes is not None and size > max_bytes:
        raise ValueError(f"a {size}-byte message exceeds the {max_bytes}-byte bound")
    body = _read_exact(fd, size, deadline)
    if body is None:
        raise EOFError("the peer closed the channel in the middle of a message")
    return json.loads(body)


def _read_exact(fd: int, size: int, deadline: float | None) -> bytes | None:
    data = bytearray()
    poller = select.poll()
    poller.register(fd, select.POLLIN)
    while len(data) < size:
        if deadline is not None:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not poller.poll(remaining * 1000):
                raise TimeoutError("no answer before the deadline")
        chunk = os.read(fd, min(size - len(data), _CHUNK))
        if not chunk:
            if data:
                raise EOFError("the peer closed the channel in the middle of a message")
            return None
        data += chunk
    return bytes(data)
