"""The zygote: the sandbox's first process, from which every process that runs a program is forked.

The harness starts, prepares the interpreter (preloaded modules, filters, confinement), and then
splits in two before it reads any job:

- the **zygote** (this module; PID 1 under bwrap, the subreaper on the local backend) never reads
  a job, a test, a program or an output. For each run it forks the run's process with the
  descriptors the server hands it (``SCM_RIGHTS``), reports that process's exit status, and at
  the end of the run kills and reaps every process but the server. A program therefore starts
  from memory that never held another run's tests, programs or results: scanning its own heap
  (ctypes, ``/proc/self/mem`` is refused anyway) finds nothing of any earlier run.
- the **server** (``harness.Server.serve``) talks to the host, supervises runs, forks the trusted
  test process of split runs itself (trusted code only), and renews the scratch folders.

A run's own texts travel to its process in a memfd that only that process reads. Messages go on
a ``SOCK_SEQPACKET`` socket pair: from the server ``F`` and a JSON job (with the run's descriptors)
or ``E`` (end the run), JSON back. Standard library only (and the sandbox's own C module, whose
``zygote_serve`` is the loop).
"""

from __future__ import annotations

import json
import os
import socket
import struct
from collections.abc import Callable

_SIZES = struct.Struct("<II")  # a payload text's name and text, in bytes
_MESSAGE = 1 << 16


class ZygoteGone(Exception):
    """The zygote died or broke its protocol (a program killed it, on the local backend)."""


class Zygote:
    """The zygote. Its loop is ``native.zygote_serve`` (``_editforge_sys.c``): between runs it runs
    no Python, so it writes almost none of the pages it shares with the run's process (each such
    write is a copy-on-write fault while that process lives). ``start_run(job, fds)`` runs in each
    fork and never returns."""

    def __init__(
        self, server_pid: int, sock: socket.socket, start_run: Callable[[dict, dict], None], native
    ) -> None:
        self.server_pid, self.sock, self.start_run, self.native = server_pid, sock, start_run, native

    def loop(self) -> None:
        """Serve the server until it exits (the loop then kills what is left) and return. In each
        run's process (a fork inside the loop) start the run instead."""
        zygote = os.getpid()
        try:
            request = self.native.zygote_serve(self.sock.fileno(), self.server_pid)
        except BaseException:
            if os.getpid() != zygote:  # a run's process that failed before it began
                os._exit(70)
            raise
        if request is None:  # the server is gone
            return
        try:  # the run's process
            body, fds = request
            message = json.loads(body)
            self.sock.close()
            self.start_run(message["job"], dict(zip(message["fds"], fds, strict=True)))
        finally:
            os._exit(70)  # start_run never returns


class ZygoteClient:
    """The server's end: asks the zygote to fork a run's process, hears when it exits."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.exited: int | None = None

    def fileno(self) -> int:
        return self.sock.fileno()

    def fork(self, job: dict, fds: dict[str, int]) -> int:
        """Fork the run's process with ``fds`` (name -> descriptor, closed here once sent); its pid."""
        self.exited = None
        names = list(fds)
        try:
            socket.send_fds(
                self.sock, [b"F" + json.dumps({"job": job, "fds": names}).encode()], [fds[n] for n in names]
            )
        except OSError as exc:
            raise ZygoteGone(f"cannot reach the zygote: {exc}") from None
        finally:
            for fd in fds.values():
                os.close(fd)
        return self._expect("pid")["pid"]

    def event(self) -> None:
        """Read one message that arrived unasked (the run's process exited)."""
        message = self._receive()
        if "exited" in message:
            self.exited = message["exited"]

    def end(self) -> int | None:
        """Kill every process of the run; the exit status of the run's process (None: it had none)."""
        try:
            self.sock.send(b"E")
        except OSError as exc:
            raise ZygoteGone(f"cannot reach the zygote: {exc}") from None
        message = self._expect("ended")
        status = message["status"]
        return self.exited if self.exited is not None else status

    def _expect(self, key: str) -> dict:
        while True:
            message = self._receive()
            if key in message:
                return message
            if "exited" in message:
                self.exited = message["exited"]

    def _receive(self) -> dict:
        try:
            data = self.sock.recv(_MESSAGE)
        except OSError as exc:
            raise ZygoteGone(f"the zygote is gone: {exc}") from None
        if not data:
            raise ZygoteGone("the zygote is gone")
        return json.loads(data)


def payload_fd(texts: dict[str, str]) -> int:
    """A memfd holding ``texts`` (name -> text), for the run's process alone to read: each as the
    byte lengths of its name and text, then both in UTF-8 (lone surrogates kept). Not JSON: the
    decoder's objects are pages of the zygote that every run's process would copy (its first write
    to each), where this format needs only a Struct and ``bytes.decode``."""
    fd = os.memfd_create("editforge-job", os.MFD_CLOEXEC)
    parts = []
    for name, text in texts.items():
        key, value = name.encode(), text.encode("utf-8", "surrogatepass")
        parts += [_SIZES.pack(len(key), len(value)), key, value]
    data = memoryview(b"".join(parts))
    while data:
        data = data[os.write(fd, data) :]
    os.lseek(fd, 0, os.SEEK_SET)
    return fd


def read_payload(fd: int) -> dict[str, str]:
    chunks = []
    while chunk := os.read(fd, 1 << 20):
        chunks.append(chunk)
    os.close(fd)
    data = b"".join(chunks)
    texts, at = {}, 0
    while at < len(data):
        key_size, size = _SIZES.unpack_from(data, at)
        at += _SIZES.size
        name = data[at : at + key_size].decode()
        at += key_size
        texts[name] = data[at : at + size].decode("utf-8", "surrogatepass")
        at += size
    return texts
