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
from typing import NoReturn

try:  # in the sandbox the harness loads these files from its own folder
    import trusted_server
    from report_channel import retires, split_verdict
    from run_process import PR_SET_PDEATHSIG, STOP_SIGNALS, close_fds_except, set_rlimits
    from scratch_folders import write_file
    from zygote import payload_fd
except ImportError:
    from core.sandbox import trusted_server
    from core.sandbox.report_channel import retires, split_verdict
    from core.sandbox.run_process import PR_SET_PDEATHSIG, STOP_SIGNALS, close_fds_except, set_rlimits
    from core.sandbox.scratch_folders import write_file
    from core.sandbox.zygote import payload_fd


class SplitRuns:
    """The split runs of a server (harness.Server), which holds the zygote client, the folders and
    the supervision loop these methods use."""

    trusted = None  # our trusted process (trusted_server.TrustedClient), started at the first split run
    outcome: bytes | None = None  # its answer for the current split run (b"": it died first)
    trusted_status: int | None = None  # its exit status, where it died in the current run

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
        run = {"work_dir": self.folders.work_dir, "modules": job.get("modules", [])}
        given = {"read": to_trusted[0], "write": to_candidate[1], "stdout": os.dup(out[1])}
        given |= {"stderr": os.dup(err[1]), "payload": payload_fd(texts)}
        if not trusted.send(run, given):
            self.outcome = b""  # it died since the last run: this run fails, the next gets a new one
        fds = {"stdin": stdin_fd, "stdout": out[1], "stderr": err[1], "read": to_candidate[0]}
        fds |= {"write": to_trusted[1], "payload": payload_fd({"program": job["program"]})}
        if self.folders.ruleset is not None:
            fds["ruleset"] = os.dup(self.folders.ruleset)
        self.child = self.zygote.fork({"kind": "candidate", "limits": limits}, fds)
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
        return result

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
        trusted, self.trusted = self.trusted, None
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
            self.native.prctl_set(PR_SET_PDEATHSIG, signal.SIGKILL)
            os.setsid()
            os.close(signal.set_wakeup_fd(-1))
            for sig in (signal.SIGCHLD, *STOP_SIGNALS):
                signal.signal(sig, signal.SIG_DFL)
            null = os.open(os.devnull, os.O_RDWR)
            for fd in (0, 1, 2):
                os.dup2(null, fd)
            close_fds_except({sock.fileno()})
            set_rlimits(limits, self.nproc_base, self.base_vm)
            os.chdir("/")
            self.confine.drop_capabilities()
            if self.filtered:  # like every run: no signal to the server or the zygote
                machine = os.uname().machine
                self.confine.install_filter(self.seccomp.protect(machine, (os.getppid(), self.pid)))
            trusted_server.serve(sock)
        except BaseException as exc:
            with contextlib.suppress(BaseException):
                os.write(2, f"sandbox harness (trusted side): {exc!r}\n".encode())
        os._exit(0)


def kill_quietly(pid: int, group: bool) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        (os.killpg if group else os.kill)(pid, signal.SIGKILL)
