"""Supervising one run: its output collected up to the caps until it ends or its deadline passes,
then every process of it killed and reaped.

What it guarantees: no run outlives its wall-clock limit (the poll never waits past the deadline),
no stream the run writes is buffered beyond its cap (past the cap of stdout or stderr the run is
stopped), and after a run the zygote has killed and reaped everything it started, however it
detached itself; our trusted process is stopped too where it did not answer or will not serve
again. The host closing its channel mid-run ends the server. Standard library only.
"""

from __future__ import annotations

import os
import select
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # annotations only: nothing more is imported in the sandbox
    from core.sandbox.trusted_server import TrustedClient
    from core.sandbox.zygote import ZygoteClient

_CHUNK = 1 << 16


class HostGone(Exception):
    """The host end of the control channel closed in the middle of a run."""


class Supervision:
    """The supervision of a server's runs (harness.Server holds the zygote client, the wake-up pipe
    and the control channel these methods use)."""

    # What these methods use of harness.Server and split_runs.SplitRuns (declared, not set, here).
    ctl_in: int
    wake_r: int
    zygote: ZygoteClient
    child_status: int | None
    trusted: TrustedClient | None
    outcome: bytes | None
    trusted_status: int | None
    trusted_command: int | None

    if TYPE_CHECKING:

        def _stop_trusted(self) -> None: ...

    def _close_streams(self, streams: dict, caps: dict, outputs: set, stop: str | None) -> str | None:
        for fd in streams:
            if drain(fd, streams[fd], caps[fd]) and stop is None and fd in outputs:
                stop = "output_limit"
            os.close(fd)
        return stop

    def _supervise(
        self,
        streams: dict[int, bytearray],
        caps: dict[int, int],
        outputs: set[int],
        deadline: float,
        trusted=None,
    ) -> str | None:
        """Collect output until the run's process exits (split runs: until ``trusted``, our trusted
        process, answers or dies); "timeout" or "output_limit" if the run must be stopped."""
        poller = select.poll()
        for fd in (*streams, self.wake_r, self.ctl_in, self.zygote.fileno()):
            poller.register(fd, select.POLLIN)
        if trusted is not None:
            poller.register(trusted.fileno(), select.POLLIN)
        while (self.outcome if trusted is not None else self.child_status) is None:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return "timeout"
            for fd, _ in poller.poll(remaining * 1000):
                if fd == self.wake_r:
                    drain(self.wake_r, bytearray(), 0)
                    self._reap(block=False)
                    continue
                if fd == self.zygote.fileno():
                    self.zygote.event()
                    if trusted is None and self.zygote.exited is not None:
                        self.child_status = self.zygote.exited
                    continue
                if trusted is not None and fd == trusted.fileno():
                    self.outcome = trusted.receive()
                    continue
                if fd == self.ctl_in:  # the host never writes during a run: it closed the channel or died
                    raise HostGone
                chunk = os.read(fd, _CHUNK)
                if not chunk:
                    poller.unregister(fd)
                elif append_capped(streams[fd], chunk, caps[fd]) and fd in outputs:
                    return "output_limit"
        return None

    def _reap(self, block: bool) -> None:
        """Reap our own exited children (the trusted process of split runs)."""
        while True:
            try:
                pid, status = os.waitpid(-1, 0 if block else os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            if self.trusted is not None and pid == self.trusted.pid:
                self.trusted.status = status
            elif pid == self.trusted_command:
                self.trusted_status = status

    def _kill_all(self) -> None:
        """Kill and reap every process started by the run, however it detached itself: everything
        by the zygote, to which every orphan reparents; our trusted process where it did not answer
        (a timeout, an output limit) or will not serve again."""
        self._reap(block=False)
        status = self.zygote.end()
        if self.child_status is None:
            self.child_status = status
        python_split = self.trusted_command is None  # a split command's trusted process is not ours to keep
        if (
            python_split
            and self.trusted is not None
            and (not self.outcome or self.trusted.status is not None)
        ):
            self._stop_trusted()


def append_capped(buffer: bytearray, chunk: bytes, cap: int) -> bool:
    """Keep at most ``cap`` bytes in ``buffer``; True when ``chunk`` did not fit."""
    room = max(cap - len(buffer), 0)
    buffer += chunk[:room]
    return len(chunk) > room


def drain(fd: int, buffer: bytearray, cap: int) -> bool:
    """Read what is left without blocking; True when it overflowed ``cap``."""
    os.set_blocking(fd, False)
    overflow = False
    while True:
        try:
            chunk = os.read(fd, _CHUNK)
        except BlockingIOError:
            return overflow
        if not chunk:
            return overflow
        overflow = append_capped(buffer, chunk, cap) or overflow
