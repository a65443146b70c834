"""Split runs: the tests in a trusted process that runs no program code, the program in a
candidate process, plain data between them (docs/sandbox.md, "Split runs").

What it guarantees: the verdict is the trusted process's outcome alone, read on a socket that only
the server and that process hold; the candidate is forked by the zygote like every run (its own
session, rlimits, Landlock, seccomp, no capabilities) and holds only its two channel pipes and its
stdio. Python's trusted process (trusted_server.py) is not dumpable and outlives runs: it is
replaced where a run left state it cannot put back, timed out, hit a limit or crashed, and when
the run's limits differ. Standard library only.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import time
from typing import TYPE_CHECKING, NoReturn, cast

try:  # in the sandbox the harness loads these files from its own folder
    import trusted_server
    from line_probes import split_lines
    from report_channel import retires, split_verdict
    from run_process import (
        PR_SET_PDEATHSIG,
        STOP_SIGNALS,
        close_fds_except,
        exec_command,
        place_descriptors,
        set_rlimits,
    )
    from scratch_folders import inside, write_file
    from zygote import payload_fd
except ImportError:
    from core.sandbox import trusted_server
    from core.sandbox.line_probes import split_lines
    from core.sandbox.report_channel import retires, split_verdict
    from core.sandbox.run_process import (
        PR_SET_PDEATHSIG,
        STOP_SIGNALS,
        close_fds_except,
        exec_command,
        place_descriptors,
        set_rlimits,
    )
    from core.sandbox.scratch_folders import inside, write_file
    from core.sandbox.zygote import payload_fd

if TYPE_CHECKING:  # annotations only: nothing more is imported in the sandbox
    import types

    from core.sandbox.confine import Confinement
    from core.sandbox.scratch_folders import ScratchFolders
    from core.sandbox.trusted_server import TrustedClient
    from core.sandbox.zygote import ZygoteClient


class SplitRuns:
    """The split runs of a server (harness.Server), which holds the zygote client, the folders and
    the supervision loop these methods use."""

    trusted: TrustedClient | None = (
        None  # our trusted process (trusted_server.TrustedClient), started at the first split run
    )
    outcome: bytes | None = None  # its answer for the current split run (b"": it died first)
    trusted_status: int | None = None  # its exit status, where it died in the current run
    trusted_command: int | None = None  # a split command's trusted process, while it runs

    # What these methods use of harness.Server and supervision.Supervision (declared, not set, here).
    pid: int
    zygote: ZygoteClient
    child: int
    child_status: int | None
    folders: ScratchFolders
    native: types.ModuleType
    confine: Confinement
    seccomp: types.ModuleType
    filtered: bool
    nproc_base: int
    base_vm: int

    if TYPE_CHECKING:

        def _supervise(
            self,
            streams: dict[int, bytearray],
            caps: dict[int, int],
            outputs: set[int],
            deadline: float,
            trusted=None,
        ) -> str | None: ...

        def _close_streams(self, streams: dict, caps: dict, outputs: set, stop: str | None) -> str | None: ...

        def _kill_all(self) -> None: ...

        def _result(
            self, status: str, exit_code, out: bytes, err: bytes, duration: float, detail: str
        ) -> dict: ...

    def _execute_split(self, job: dict) -> dict:
        """A split run: the tests in our trusted process, which runs no candidate code
        (trusted_server.py), the program in a process the zygote forks (split_candidate.py), plain
        data between them."""
        limits = job["limits"]
        stdin_fd = self.folders.stdin(job.pop("stdin", None))  # the zygote gets none of the run's texts
        write_file(
            os.path.join(self.folders.work_dir, "main.py"), job["program"]
        )  # as in process: tracebacks
        self.folders.no_exec()
        out, err, to_candidate, to_trusted = (os.pipe() for _ in range(4))
        start = time.monotonic()
        self.outcome, self.child_status, self.trusted_status = None, None, None
        trusted = self._trusted(limits)
        texts = {"tests": job["tests"], "helpers": job.get("helpers", "")}
        measure = bool(job.get("coverage"))  # the lines that ran, for ExcessCode (line_probes.py)
        run = {"work_dir": self.folders.work_dir, "modules": job.get("modules", []), "coverage": measure}

        def given() -> dict[str, int]:  # the trusted process's descriptors, closed once sent
            fds = {"read": os.dup(to_trusted[0]), "write": os.dup(to_candidate[1]), "stdout": os.dup(out[1])}
            return fds | {"stderr": os.dup(err[1]), "payload": payload_fd(texts)}

        sent = trusted.send(run, given())
        if not sent:  # it died since the last run: a fresh one takes this run, which owes it nothing
            self._stop_trusted()
            trusted = self._trusted(limits)
            sent = trusted.send(run, given())
        os.close(to_trusted[0])
        os.close(to_candidate[1])
        if not sent:
            self.outcome = b""
        fds = {"stdin": stdin_fd, "stdout": out[1], "stderr": err[1], "read": to_candidate[0]}
        fds |= {"write": to_trusted[1], "payload": payload_fd({"program": job["program"]})}
        if self.folders.ruleset is not None:
            fds["ruleset"] = os.dup(self.folders.ruleset)
        candidate = {"kind": "candidate", "limits": limits, "probes": measure, "protect": self.trusted_pids()}
        self.child = self.zygote.fork(candidate, fds)
        streams = {out[0]: bytearray(), err[0]: bytearray()}
        caps = {out[0]: limits["max_output_bytes"], err[0]: limits["max_output_bytes"]}
        outputs = {out[0], err[0]}
        stop = None
        if self.outcome is None:
            stop = self._supervise(streams, caps, outputs, start + limits["timeout_s"], trusted)
        duration = time.monotonic() - start
        self._kill_all()
        if self.trusted is not None and retires(self.outcome):
            self._stop_trusted()  # it exits (state it could not put back...): the next run gets a new one
        stop = self._close_streams(streams, caps, outputs, stop)
        stdout, stderr = (bytes(streams[fd[0]]) for fd in (out, err))
        status, exit_code, detail, counts = split_verdict(job, stop, self.outcome or b"", self.trusted_status)
        result = self._result(status, exit_code, stdout, stderr, duration, detail)
        result.update(counts, mode="split")
        if measure and status == "passed":
            result["coverage"] = split_lines(job["program"], self.outcome)  # the host analyses them
        return result

    def trusted_pids(self) -> list[int]:
        """The trusted processes alive now, which a run's process must not signal, limit or slow
        (seccomp.protect: the zygote's own filter knows only the server and itself)."""
        pids = [self.trusted.pid] if self.trusted is not None else []
        return pids + ([self.trusted_command] if self.trusted_command is not None else [])

    def _trusted(self, limits: dict):
        """Our trusted process, started afresh where there is none or the run's limits differ."""
        if self.trusted is not None and self.trusted.limits != limits:
            self._stop_trusted()
        if self.trusted is None:
            server_end, trusted_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
            pid = os.fork()
            if pid == 0:
                server_end.close()
                self._trusted_process(limits, trusted_end)
            trusted_end.close()
            self.trusted = trusted_server.TrustedClient(pid, server_end, limits)
        return self.trusted

    def _stop_trusted(self) -> None:
        """Kill and reap our trusted process (mid-run, or one that exited to be replaced)."""
        # its callers call it only while there is one
        trusted, self.trusted = cast("TrustedClient", self.trusted), None
        trusted.close()
        if trusted.status is None:
            kill_quietly(trusted.pid, group=True)
            kill_quietly(trusted.pid, group=False)
            with contextlib.suppress(ChildProcessError):
                trusted.status = os.waitpid(trusted.pid, 0)[1]
        self.trusted_status = trusted.status

    def _trusted_process(self, limits: dict, sock: socket.socket) -> NoReturn:
        """Become the trusted process of split runs (never returns): the tests of run after run, no
        candidate code; it exits where a run left state it cannot put back (trusted_server.py)."""
        try:
            null = os.open(os.devnull, os.O_RDWR)
            self._become_trusted(limits, {0: null, 1: null, 2: null}, keep={sock.fileno()})
            trusted_server.serve(sock)
        except BaseException as exc:
            with contextlib.suppress(BaseException):
                os.write(2, f"sandbox harness (trusted side): {exc!r}\n".encode())
        os._exit(0)

    def _become_trusted(self, limits: dict, fds: dict[int, int], keep: frozenset | set = frozenset()) -> None:
        """What both kinds of trusted process are, in the server's fork: a session of their own, dead
        with the server, ``fds`` at their numbers and nothing else but ``keep``, the run's rlimits,
        no capabilities, and, like every run, no signal to the server or the zygote."""
        self.native.prctl_set(PR_SET_PDEATHSIG, signal.SIGKILL)
        os.setsid()
        os.close(signal.set_wakeup_fd(-1))
        for sig in (signal.SIGCHLD, *STOP_SIGNALS):
            signal.signal(sig, signal.SIG_DFL)
        place_descriptors(fds)
        close_fds_except(set(fds) | set(keep))
        set_rlimits(limits, self.nproc_base, self.base_vm)
        os.chdir("/")
        self.confine.drop_capabilities()
        if self.filtered:
            machine = os.uname().machine
            self.confine.install_filter(self.seccomp.protect(machine, (os.getppid(), self.pid)))

    def _execute_split_command(self, job: dict) -> dict:
        """A split command (JavaScript's tests): the trusted command, which the server forks and which
        runs no candidate code, and the candidate command, which the zygote forks confined by Landlock
        (so it cannot ptrace, read or borrow anything of the trusted process, outside its domain);
        the verdict is the JSON outcome the trusted command writes to its descriptor 5."""
        limits = job["limits"]
        if self.folders.ruleset is None:
            detail = "split commands need Landlock (the candidate could reach the trusted process)"
            return self._result("error", None, b"", b"", 0.0, detail)
        stdin_fd = self.folders.stdin(job.pop("stdin", None))
        for name, text in job.pop("files").items():
            write_file(inside(self.folders.work_dir, name), text)
        out, err, to_candidate, to_trusted, outcome = (os.pipe() for _ in range(5))
        start = time.monotonic()
        self.outcome, self.child_status, self.trusted_status = None, None, None
        trusted_fds = {0: _memfd(job.pop("trusted_input")), 1: out[1], 2: err[1]}
        trusted_fds |= {3: to_trusted[0], 4: to_candidate[1], 5: outcome[1]}
        pid = os.fork()
        if pid == 0:
            self._command_trusted_process(job["trusted_argv"], limits, trusted_fds)
        self.trusted_command = pid
        for fd in (trusted_fds[0], to_trusted[0], to_candidate[1], outcome[1]):
            os.close(fd)
        fds = {"stdin": stdin_fd, "stdout": out[1], "stderr": err[1], "read": to_candidate[0]}
        fds["write"] = to_trusted[1]
        fds["ruleset"] = os.dup(self.folders.ruleset)
        run = {"kind": "command", "split": True, "argv": job["argv"], "limits": limits}
        self.child = self.zygote.fork(run | {"protect": self.trusted_pids()}, fds)
        streams = {out[0]: bytearray(), err[0]: bytearray()}
        caps = {out[0]: limits["max_output_bytes"], err[0]: limits["max_output_bytes"]}
        stop = self._supervise(
            streams, caps, {out[0], err[0]}, start + limits["timeout_s"], OutcomePipe(outcome[0])
        )
        duration = time.monotonic() - start
        os.close(outcome[0])
        self._kill_all()
        kill_quietly(pid, group=True)
        kill_quietly(pid, group=False)
        with contextlib.suppress(ChildProcessError):
            self.trusted_status = os.waitpid(pid, 0)[1]
        self.trusted_command = None
        stop = self._close_streams(streams, caps, {out[0], err[0]}, stop)
        stdout, stderr = (bytes(streams[fd[0]]) for fd in (out, err))
        status, exit_code, detail, counts = split_verdict(job, stop, self.outcome or b"", self.trusted_status)
        result = self._result(status, exit_code, stdout, stderr, duration, detail)
        result.update(counts, mode="split")
        return result

    def _command_trusted_process(self, argv: list[str], limits: dict, fds: dict[int, int]) -> NoReturn:
        """Become a split command's trusted side (never returns): ``fds`` at their numbers, the run's
        rlimits, no capabilities, the seccomp filter of every run, then ``argv``."""
        try:
            self._become_trusted(limits, fds)
            exec_command(argv)
        except BaseException as exc:
            with contextlib.suppress(BaseException):
                os.write(2, f"sandbox harness (trusted side): {exc!r}\n".encode())
        os._exit(70)


def kill_quietly(pid: int, group: bool) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        (os.killpg if group else os.kill)(pid, signal.SIGKILL)


def _memfd(text: str) -> int:
    """A descriptor to read ``text`` from (the trusted command's stdin), never on any disk."""
    fd = os.memfd_create("editforge-trusted", os.MFD_CLOEXEC)
    data = memoryview(text.encode("utf-8", errors="surrogatepass"))
    while data:
        data = data[os.write(fd, data) :]
    os.lseek(fd, 0, os.SEEK_SET)
    return fd


class OutcomePipe:
    """The trusted command's descriptor 5, read as the supervision loop reads our trusted process:
    ``receive`` answers None until the end of file, then everything written (b"": it ended without
    an outcome); more than 64 KiB is no outcome."""

    CAP = 1 << 16

    def __init__(self, fd: int) -> None:
        self.fd, self.data = fd, bytearray()

    def fileno(self) -> int:
        return self.fd

    def receive(self) -> bytes | None:
        chunk = os.read(self.fd, self.CAP)
        if chunk:
            self.data += chunk[: self.CAP + 1 - len(self.data)]
            return None
        return bytes(self.data) if len(self.data) <= self.CAP else b"!"
