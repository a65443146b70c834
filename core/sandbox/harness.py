"""In-sandbox fork server: runs untrusted programs one at a time, each in a forked child.

The host starts it as ``python -I harness.py CONFIG_JSON`` (inside bubblewrap, or directly for
the local backend) and talks to it over fds 0/1 with length-prefixed JSON: one job in, one
result out. The interpreter starts and imports common modules once per worker; each
execution then costs a fork instead of an interpreter start. Standard library only: this
file runs apart from the editforge package (which imports its message framing).

Per job the server forks a child that starts a new session, gets fresh stdin/stdout/stderr,
closes every other descriptor except its two harness pipes, sets rlimits and runs the job.
The server reads the child's output (capped) until the child exits or the wall-clock
deadline passes, then kills every other process it can see (``kill(-1)`` as PID 1 of the
sandbox's PID namespace; as a subreaper, all of its descendants) and reaps them, so nothing
outlives the run. Finally it empties the scratch folders for the next job.

A python run passes only when the child reports a random nonce that the server wrote into
a private pipe after the fork. The child reads it (and closes that pipe) before the program
starts and keeps it only inside a C-level call chain (``deque(map(call, (exec, write)))``):
the write runs right after ``exec`` returns, with no Python frame in between, and no Python
frame, local or global ever holds the nonce. A PEP 578 audit hook (code_guard.py), installed before the
program and irremovable, closes the routes that remain in pure Python: the garbage
collector's object lists (``gc.get_objects``/``get_referrers``/``get_referents``), tracing
and profiling hooks (which could skip test lines), and opening another process's
descriptors or memory under /proc. Source-encoding declarations are ignored (the text is
compiled as str). What this cannot stop (code with a raw memory primitive such as ctypes)
is listed in docs/sandbox.md.
"""

from __future__ import annotations

import builtins
import collections
import contextlib
import fcntl
import functools
import gc
import importlib
import json
import operator
import os
import resource
import select
import shutil
import signal
import socket
import struct
import sys
import time
import types
from typing import NoReturn

_HEADER = struct.Struct(">I")
_CHUNK = 1 << 16
_REPORT_CAP = 4096  # the report pipe carries one short record; anything beyond is junk
_DATA_CAP = 1 << 20  # the data pipe carries the coverage of one program
PR_SET_PDEATHSIG, PR_SET_CHILD_SUBREAPER = 1, 36
CLONE_NEWNET, CLONE_NEWIPC, CLONE_NEWNS = 0x40000000, 0x08000000, 0x00020000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_REMOUNT, MS_BIND, MS_REC, MNT_DETACH = (
    1,
    2,
    4,
    8,
    32,
    4096,
    16384,
    2,
)
KEY_SPEC_USER_KEYRING, KEY_SPEC_USER_SESSION_KEYRING = -4, -5
SIOCGIFFLAGS, SIOCSIFFLAGS, IFF_UP = 0x8913, 0x8914, 0x1
_STOP_SIGNALS = (signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2)
# Stdlib modules most generated programs import; the server imports them once. random
# reseeds itself in every forked child (its own at-fork hook), the rest hold no per-process state.
PRELOAD = (
    "bisect collections copy dataclasses datetime decimal fractions functools hashlib heapq itertools json "
    "math operator random re string typing"
)
# Optional, so that a bare interpreter can still serve. Never numpy (or anything that loads a raw
# memory primitive): a preloaded module is reachable from every program without an import.
# (coverage.py is loaded by coverage servers.)
OPTIONAL_PRELOAD = ("statistics",)
# CanItEdit's benchmark/.coveragerc adds this to coverage.py's default exclusion ("pragma: no cover").
COVERAGE_EXCLUDE = r"@(abc\.)?abstractmethod"


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


class _HostGone(Exception):
    """The host end of the control channel closed in the middle of a run."""


class Server:
    """Runs jobs for one host worker; ``mode`` is "init" (PID 1 under bwrap) or "subreaper"."""

    def __init__(self, config: dict, ctl_in: int, ctl_out: int) -> None:
        self.ctl_in, self.ctl_out = ctl_in, ctl_out
        self.mode = config["mode"]
        if self.mode == "init" and os.getpid() != 1:  # the zygote must be the namespace's reaper of orphans
            raise RuntimeError("init mode needs a fresh PID namespace with this server as PID 1")
        self.work_dir = config["work_dir"]
        self.scratch = {path: os.stat(path).st_mode & 0o7777 for path in config["scratch_dirs"]}
        self.keep = frozenset(config.get("keep_paths", ()))
        self.nproc_base = config["nproc_base"]
        self.native = _load_native(config["native"])
        self.pid = os.getpid()  # the zygote's, once start() has split this process in two
        self.child = 0
        self.child_status: int | None = None
        self.zygote = None
        self.trusted = None  # split runs: our trusted process (trusted_server.py), started at the first
        self.outcome: bytes | None = None  # its answer for the current split run (b"": it died first)
        self.trusted_status: int | None = None  # its exit status, where it died in the current run
        # bwrap: /tmp and /dev/shm are tmpfs mounts of our own, replaced after every run (see _renew_scratch)
        self.fresh = config.get("fresh_mounts")
        self.mounted = False
        self.paths = (config.get("read", ()), config.get("write", ()))
        # bwrap made the network namespace (unless the network is allowed); a local server makes its own
        private_network = self.mode == "init" and not config.get("network")
        if config["unshare_net"] and _succeeds(self.native.unshare, CLONE_NEWNET):
            _loopback_up()
            private_network = True
        # SysV IPC objects outlive their creator: a namespace of our own lets us remove them after each run.
        self.own_ipc = self.mode == "init" or (
            config.get("unshare_ipc") and _succeeds(self.native.unshare, CLONE_NEWIPC)
        )
        self.native.set_undumpable()  # children may not ptrace us or read our /proc/*/mem (nor runs, theirs)
        if self.mode == "subreaper":
            self.native.prctl_set(PR_SET_CHILD_SUBREAPER, 1)
        for sig in (signal.SIGINT, *_STOP_SIGNALS):
            signal.signal(sig, signal.SIG_IGN)  # only the host stops us, with SIGKILL
        self.wake_r, wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        signal.set_wakeup_fd(wake_w)
        signal.signal(signal.SIGCHLD, lambda signum, frame: None)
        for name in PRELOAD.split():
            importlib.import_module(name)
        for name in OPTIONAL_PRELOAD:
            with contextlib.suppress(ImportError):
                importlib.import_module(name)
        self.coverage = _prepared_coverage(self.work_dir) if config.get("coverage") else None
        self.confine = _import_sibling("confine").Confinement(self.native)
        if self.fresh:  # a mount namespace of our own, so that our tmpfs mounts can be replaced
            self.native.unshare(CLONE_NEWNS)
        self.ruleset = None
        self._renew_scratch()  # builds the Landlock ruleset on this run's folders
        for name in (
            "plain",
            "split_trusted",
            "split_candidate",
            "zygote",
            "trusted_server",
        ):  # before the fork: no per-run import
            sys.modules.setdefault(name, _import_sibling(name))
        seccomp = _import_sibling("seccomp")
        self.seccomp = seccomp
        machine = os.uname().machine
        families = seccomp.socket_families(bool(config.get("network")), private_network)
        # The filter goes on the server itself, once: every run is its child and inherits it (the
        # server needs none of what it refuses after this point).
        self.filtered = seccomp.supported(machine)
        if self.filtered:
            self.confine.install_filter(seccomp.program(machine, families))
        gc.freeze()  # keeps the children's garbage collector off the shared pages (fewer copy-on-write faults)
        # RLIMIT_AS counts what the preloaded modules reserved: memory_mb is on top of it.
        self.base_vm = _address_space()

    def start(self) -> None:
        """Split in two before any job arrives: this process becomes the zygote (zygote.py), which
        forks every process that runs a program; its child becomes the server, which serves the host."""
        zygote_module = sys.modules["zygote"]
        zygote_end, server_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        pid = os.fork()
        if pid == 0:
            zygote_end.close()
            self.native.prctl_set(PR_SET_PDEATHSIG, signal.SIGKILL)  # the zygote's orphans die with it
            if os.getppid() != self.pid:
                os._exit(70)
            self.zygote = zygote_module.ZygoteClient(server_end)
            self.wake_r, wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
            os.close(signal.set_wakeup_fd(wake_w))
            try:
                self.serve()
            finally:
                os._exit(0)
        server_end.close()
        os.close(self.ctl_in)
        os.close(self.ctl_out)
        machine = os.uname().machine
        if self.filtered:  # no run signals the server or the zygote, nor everyone at once
            self.confine.install_filter(self.seccomp.protect(machine, (pid, self.pid)))
        self.confine.drop_capabilities()  # the zygote only forks: the server alone keeps CAP_SYS_ADMIN
        zygote = zygote_module.Zygote(pid, zygote_end, self._child)
        os.close(self.wake_r)
        zygote.loop()

    def serve(self) -> None:
        """Answer jobs until the host closes the channel (or dies), then kill what is left."""
        write_message(self.ctl_out, {"ready": True})
        try:
            while (job := read_message(self.ctl_in)) is not None:
                try:
                    result = self.execute(job)
                except _HostGone:
                    return
                except Exception as exc:  # a server bug or an unwipeable folder: report it, start afresh
                    self._kill_all()
                    message = {"status": "error", "detail": f"sandbox server: {exc!r}", "restart": True}
                    write_message(self.ctl_out, message)
                    return
                write_message(self.ctl_out, result)
                if result.get("restart"):
                    return
        finally:  # the zygote kills what is left when we exit
            with contextlib.suppress(Exception):
                self._kill_all()
            if self.mode == "subreaper":  # host folders; bwrap's tmpfs folders vanish with the namespace
                for path in self.scratch:
                    shutil.rmtree(path, ignore_errors=True)

    def execute(self, job: dict) -> dict:
        if job.get("split"):
            return self._execute_split(job)
        limits = job["limits"]
        stdin_fd = self._stdin(job.pop("stdin", None))  # the zygote gets none of the run's texts
        texts = {}
        if job["kind"] == "python":  # the tests stay off the disk, except where coverage reads them
            self._no_exec()
            text = job["program"] + "\n" + job["tests"] if job.get("coverage") else job["program"]
            _write_file(os.path.join(self.work_dir, "main.py"), text)
            texts = {"program": job.pop("program"), "tests": job.pop("tests")}
        else:
            for name, text in job.pop("files").items():
                _write_file(_inside(self.work_dir, name), text)
        pipes = {name: os.pipe() for name in ("stdout", "stderr", "report", "key", "data", "channel")}
        channel_token = os.urandom(16).hex().encode()  # the child's writer holds it
        job["channel_token"] = channel_token.decode()
        fds = {name: (r if name == "key" else w) for name, (r, w) in pipes.items()}
        fds["stdin"] = stdin_fd
        if texts:
            fds["payload"] = sys.modules["zygote"].payload_fd(texts)
        if self.ruleset is not None:
            fds["ruleset"] = os.dup(self.ruleset)
        start = time.monotonic()
        self.child = self.zygote.fork(job, fds)  # the zygote's child: no job before this one in its memory
        self.child_status = None
        nonce = os.urandom(16).hex().encode()
        if job["kind"] == "python" or job.get("run_token"):
            with contextlib.suppress(OSError):  # a dead child closed its end: it cannot pass anyway
                os.write(pipes["key"][1], nonce)
        os.close(pipes["key"][1])
        names = ("stdout", "stderr", "report", "data", "channel")
        streams = {pipes[name][0]: bytearray() for name in names}
        caps = {
            pipes["stdout"][0]: limits["max_output_bytes"],
            pipes["stderr"][0]: limits["max_output_bytes"],
            pipes["report"][0]: _REPORT_CAP,
            pipes["data"][0]: _DATA_CAP,
            pipes["channel"][0]: _DATA_CAP,
        }
        outputs = {pipes["stdout"][0], pipes["stderr"][0]}  # past their cap the run stops
        stop = self._supervise(streams, caps, outputs, start + limits["timeout_s"])
        duration = time.monotonic() - start
        self._kill_all()
        stop = self._close_streams(streams, caps, outputs, stop)
        out, err, report, data, channel = (bytes(streams[pipes[name][0]]) for name in names)
        status, exit_code, detail = self._verdict(job, stop, nonce, report, out)
        result = self._result(status, exit_code, out, err, duration, detail)
        if job["kind"] == "python":
            result["mode"] = "in_process"
        if job.get("coverage") and status in ("passed", "passed_unverified"):
            result["coverage"] = _parse_coverage(data)
        if job.get("channel"):
            result["channel"] = _records(channel, channel_token)
        return result

    def _execute_split(self, job: dict) -> dict:
        """A split run: the tests in our trusted process, which runs no candidate code
        (trusted_server.py), the program in a process the zygote forks (split_candidate.py), plain
        data between them."""
        limits = job["limits"]
        stdin_fd = self._stdin(job.pop("stdin", None))  # the zygote gets none of the run's texts
        _write_file(os.path.join(self.work_dir, "main.py"), job["program"])  # as in process: tracebacks
        self._no_exec()
        out, err, to_candidate, to_trusted = (os.pipe() for _ in range(4))
        payload = sys.modules["zygote"].payload_fd
        start = time.monotonic()
        self.outcome, self.child_status, self.trusted_status = None, None, None
        trusted = self._trusted(limits)
        texts = {"tests": job["tests"], "helpers": job.get("helpers", "")}
        run = {"work_dir": self.work_dir, "modules": job.get("modules", [])}
        given = {"read": to_trusted[0], "write": to_candidate[1], "stdout": os.dup(out[1])}
        given |= {"stderr": os.dup(err[1]), "payload": payload(texts)}
        if not trusted.send(run, given):
            self.outcome = b""  # it died since the last run: this run fails, the next gets a new one
        fds = {"stdin": stdin_fd, "stdout": out[1], "stderr": err[1], "read": to_candidate[0]}
        fds |= {"write": to_trusted[1], "payload": payload({"program": job["program"]})}
        if self.ruleset is not None:
            fds["ruleset"] = os.dup(self.ruleset)
        self.child = self.zygote.fork({"kind": "candidate", "limits": limits}, fds)
        streams = {out[0]: bytearray(), err[0]: bytearray()}
        caps = {out[0]: limits["max_output_bytes"], err[0]: limits["max_output_bytes"]}
        outputs = {out[0], err[0]}
        stop = None
        if self.outcome is None:
            stop = self._supervise(streams, caps, outputs, start + limits["timeout_s"], trusted)
        duration = time.monotonic() - start
        self._kill_all()
        if self.trusted is not None and _retires(self.outcome):
            self._stop_trusted()  # it exits (state it could not put back...): the next run gets a new one
        stop = self._close_streams(streams, caps, outputs, stop)
        stdout, stderr = (bytes(streams[fd[0]]) for fd in (out, err))
        status, exit_code, detail, counts = self._split_verdict(job, stop, self.outcome or b"")
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
            self.trusted = sys.modules["trusted_server"].TrustedClient(pid, server_end, limits)
        return self.trusted

    def _stop_trusted(self) -> None:
        """Kill and reap our trusted process (mid-run, or one that exited to be replaced)."""
        trusted, self.trusted = self.trusted, None
        trusted.close()
        if trusted.status is None:
            _kill_quietly(trusted.pid, group=True)
            _kill_quietly(trusted.pid, group=False)
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
            for sig in (signal.SIGCHLD, *_STOP_SIGNALS):
                signal.signal(sig, signal.SIG_DFL)
            null = os.open(os.devnull, os.O_RDWR)
            for fd in (0, 1, 2):
                os.dup2(null, fd)
            _close_fds_except({sock.fileno()})
            _set_rlimits(limits, self.nproc_base, self.base_vm)
            os.chdir("/")
            self.confine.drop_capabilities()
            if self.filtered:  # like every run: no signal to the server or the zygote
                machine = os.uname().machine
                self.confine.install_filter(self.seccomp.protect(machine, (os.getppid(), self.pid)))
            sys.modules["trusted_server"].serve(sock)
        except BaseException as exc:
            with contextlib.suppress(BaseException):
                os.write(2, f"sandbox harness (trusted side): {exc!r}\n".encode())
        os._exit(0)

    def _close_streams(self, streams: dict, caps: dict, outputs: set, stop: str | None) -> str | None:
        for fd in streams:
            if _drain(fd, streams[fd], caps[fd]) and stop is None and fd in outputs:
                stop = "output_limit"
            os.close(fd)
        return stop

    def _result(self, status: str, exit_code, out: bytes, err: bytes, duration: float, detail: str) -> dict:
        """The reply for a finished run, after the scratch folders were renewed for the next one."""
        restart = False
        try:
            self._renew_scratch()
            if self.own_ipc and self.native.ipc_in_use():
                _remove_sysv_ipc(self.native)
            if not self.filtered:  # with the filter, no run can add a key
                _clear_keyrings(self.native)
        except OSError as exc:  # e.g. a folder the run made undeletable: a fresh worker is cheaper
            restart, detail = True, f"{detail} (scratch cleanup failed: {exc}; worker restarts)".strip()
        return {
            "status": status,
            "exit_code": exit_code,
            "stdout": out.decode("utf-8", errors="replace"),
            "stderr": err.decode("utf-8", errors="replace"),
            "duration_s": duration,
            "detail": detail,
            "restart": restart,
            "fresh_scratch": bool(self.fresh),
        }

    def _stdin(self, text: str | None) -> int:
        """A descriptor for the child's stdin: /dev/null (immediate EOF) or an unlinked file."""
        if text is None:
            return os.open(os.devnull, os.O_RDONLY)
        path = os.path.join(next(iter(self.scratch)), ".stdin")
        _write_file(path, text)
        fd = os.open(path, os.O_RDONLY)
        os.unlink(path)
        return fd

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
                    _drain(self.wake_r, bytearray(), 0)
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
                    raise _HostGone
                chunk = os.read(fd, _CHUNK)
                if not chunk:
                    poller.unregister(fd)
                elif _append(streams[fd], chunk, caps[fd]) and fd in outputs:
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

    def _kill_all(self) -> None:
        """Kill and reap every process started by the run, however it detached itself: everything
        by the zygote, to which every orphan reparents; our trusted process where it did not answer
        (a timeout, an output limit) or will not serve again."""
        self._reap(block=False)
        status = self.zygote.end()
        if self.child_status is None:
            self.child_status = status
        if self.trusted is not None and (not self.outcome or self.trusted.status is not None):
            self._stop_trusted()

    def _verdict(self, job: dict, stop: str | None, nonce: bytes, report: bytes, out: bytes) -> tuple:
        """(status, exit code, detail) of a finished run."""
        limits = job["limits"]
        if stop == "timeout":
            return stop, None, f"wall-clock limit of {limits['timeout_s']:g}s exceeded; all processes killed"
        if stop == "output_limit":
            return stop, None, f"a stream exceeded {limits['max_output_bytes']} bytes; the run was stopped"
        code = os.waitstatus_to_exitcode(self.child_status)
        if code < 0:
            return "killed", code, f"killed by {signal.Signals(-code).name}"
        if job["kind"] != "python":
            marker, token = job.get("pass_marker"), job.get("run_token")
            if code == 0 and (marker is None or marker.encode() in out) and (not token or report == nonce):
                return "passed", 0, ""
            if code != 0:
                return "failed", code, f"exited with code {code}"
            if marker is not None and marker.encode() not in out:
                return "failed", code, f"exited with code 0; pass marker {marker!r} not in stdout"
            if not report:
                return (
                    "failed",
                    code,
                    "exited with code 0 without the run token (the tests did not reach their end)",
                )
            return "failed", code, "exited with code 0 but the run token was altered"
        if report == nonce and code == 0:
            if job.get("unverified"):  # raw memory was within reach: the nonce proves less
                return "passed_unverified", 0, "passed in the declared unverified mode (raw memory allowed)"
            return "passed", 0, ""
        if not report:
            return "failed", code, f"exited with code {code} before the tests finished (no pass sentinel)"
        if not report.startswith(b"!"):
            return (
                "failed",
                code,
                "the pass sentinel was altered (the program wrote to the harness's channel)",
            )
        kind, _, message = report[1:].decode("utf-8", errors="replace").partition(":")
        message = message.strip()
        if kind == "MemoryError":
            return "memory", code, f"MemoryError under the {limits['memory_mb']} MB limit"
        if kind == "SystemExit":
            return "failed", code, f"SystemExit({message}) before the tests finished"
        return "failed", code, f"{kind}: {message}" if message else kind

    def _split_verdict(self, job: dict, stop: str | None, outcome: bytes) -> tuple:
        """(status, exit code, detail, counts) of a split run, from the trusted side's report alone."""
        limits = job["limits"]
        counts: dict = {"tests_passed": None, "tests_total": None, "delegated_checks": None}
        if stop == "timeout":
            return (
                stop,
                None,
                f"wall-clock limit of {limits['timeout_s']:g}s exceeded; all processes killed",
                counts,
            )
        if stop == "output_limit":
            return (
                stop,
                None,
                f"a stream exceeded {limits['max_output_bytes']} bytes; the run was stopped",
                counts,
            )
        died = self.trusted_status if not outcome else None
        code = os.waitstatus_to_exitcode(died) if died is not None else 0 if outcome else None
        try:
            report = json.loads(outcome)
            passed, kind = report["passed"], report.get("kind")
            counts = {
                "tests_passed": report["tests_passed"],
                "tests_total": report["tests_total"],
                "delegated_checks": report["delegated"],
            }
            if type(passed) is not bool or not all(type(v) is int for v in counts.values()):
                raise TypeError("a malformed report")
        except Exception:  # RecursionError too: whatever the report holds, it is no pass
            how = (
                f"killed by {signal.Signals(-code).name}" if code is not None and code < 0 else f"exit {code}"
            )
            return "failed", code, f"the trusted test process ended without a report ({how})", counts
        if passed is True:
            return "passed", 0, "", counts
        error = " ".join(str(report.get("error", "")).split())[:500]  # one line, whatever the program wrote
        if kind == "memory":
            return "memory", code, f"MemoryError under the {limits['memory_mb']} MB limit", counts
        return "failed", code, error or "the tests failed", counts

    def _no_exec(self) -> None:
        """Python runs may not map a file of the scratch folders as code (a C extension the program
        compiled would run under strict mode unchecked); the next run's new mounts allow it again."""
        if self.fresh:
            flags = MS_REMOUNT | MS_NOSUID | MS_NODEV | MS_NOEXEC
            for path in self.scratch:
                self.native.mount(None, path, None, flags, f"size={self.fresh['size']},mode=1777")

    def _renew_scratch(self) -> None:
        """Make /tmp and /dev/shm new for the next run. bwrap: unmount them and mount fresh tmpfs
        folders, so that nothing a run wrote survives it, not even names, times, modes or extended
        attributes of the folders themselves; the read-only binds that sat inside come back from their
        stash, and the Landlock ruleset is rebuilt on the new folders. Local backend: empty them."""
        if not self.fresh:
            self._empty_scratch()
            if self.ruleset is None:
                self.ruleset = self.confine.build_ruleset(*self.paths)
            return
        options = f"size={self.fresh['size']},mode=1777"
        for path in self.scratch:
            if self.mounted:
                self.native.umount2(path, MNT_DETACH)
            self.native.mount("tmpfs", path, "tmpfs", MS_NOSUID | MS_NODEV, options)
        self.mounted = True
        for stash, target in self.fresh["keep"]:
            os.makedirs(target, exist_ok=True)
            self.native.mount(stash, target, None, MS_BIND | MS_REC, None)
            flags = MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV
            self.native.mount(None, target, None, flags, None)
        os.makedirs(self.work_dir, exist_ok=True)
        if self.ruleset is not None:
            os.close(self.ruleset)
        self.ruleset = self.confine.build_ruleset(*self.paths)

    def _empty_scratch(self) -> None:
        for path, mode in self.scratch.items():
            os.chmod(path, mode)
            for name in os.listxattr(path):  # a run's extended attributes would reach the next one
                os.removexattr(path, name)
            _empty_dir(path, self.keep)
        os.makedirs(self.work_dir, exist_ok=True)

    def _child(self, job: dict, fds: dict[str, int]) -> NoReturn:
        """Become a run's process, in a fork of the zygote (``fds``: the descriptors the server sent,
        by name); never returns."""
        try:
            self.native.prctl_set(PR_SET_PDEATHSIG, signal.SIGKILL)  # dies with the zygote
            if os.getppid() != self.pid:  # the zygote died before the line above
                os._exit(70)
            os.setsid()
            for sig in (signal.SIGCHLD, *_STOP_SIGNALS):  # what a fresh interpreter starts with
                signal.signal(sig, signal.SIG_DFL)
            signal.signal(signal.SIGINT, signal.default_int_handler)
            os.dup2(fds["stdin"], 0)
            os.dup2(fds["stdout"], 1)
            os.dup2(fds["stderr"], 2)
            if "payload" in fds:  # the run's own texts, read by this process alone
                job.update(sys.modules["zygote"].read_payload(fds.pop("payload")))
            ruleset = fds.get("ruleset")
            if job["kind"] == "candidate":
                keep = {fds["read"], fds["write"], ruleset} - {None}
            else:
                report_fd, key_fd, data_fd = fds["report"], fds["key"], fds["data"]
                channel_fd = fds["channel"] if job.get("channel") else None
                keep = {report_fd, key_fd, data_fd, channel_fd, ruleset} - {None}
            _close_fds_except(keep)
            _set_rlimits(job["limits"], self.nproc_base, self.base_vm)
            os.chdir(self.work_dir)
            self.confine.drop_capabilities()  # no borrowing the server's descriptors, no ptrace, no mounts
            if job["kind"] in ("python", "candidate") and ruleset is not None:
                self.confine.restrict(ruleset)  # python runs: no /proc/self/mem, only the allowed folders
                os.close(ruleset)
            main_path = os.path.join(self.work_dir, "main.py")
            if job["kind"] == "candidate":
                _main_module(main_path)
                sys.modules["split_candidate"].serve(fds["read"], fds["write"], job.pop("program"), main_path)
                _flush_stdio()
                os._exit(0)
            if job["kind"] == "python":
                collector = self.coverage if job.get("coverage") else None
                writable = tuple(
                    os.path.realpath(d).rstrip("/") + "/" for d in (*self.scratch, self.work_dir)
                )
                if channel_fd is not None:  # the wrapper program takes it (and so removes it) first
                    builtins.__editforge_report__ = _channel_writer(channel_fd, job["channel_token"].encode())
                guard_forks = self.native.guard_forks
                _run_python(job, main_path, collector, key_fd, report_fd, data_fd, writable, guard_forks)
            if job.get("run_token"):
                _token_descriptors(key_fd, report_fd)
            _exec_command(job["argv"])
        except BaseException as exc:  # the harness failed in the child: never return to the zygote's loop
            os.write(2, f"sandbox harness: {exc!r}\n".encode())
        os._exit(70)


def _retires(outcome: bytes | None) -> bool:
    """Whether the trusted process said, in its outcome, that it exits after this run."""
    try:
        report = json.loads(outcome or b"null")
    except ValueError:
        return False
    return type(report) is dict and "retire" in report


def _run_python(
    job: dict,
    main_path: str,
    collector,
    key_fd: int,
    report_fd: int,
    data_fd: int,
    writable: tuple[str, ...],
    guard_forks,
) -> NoReturn:
    """Run the job's program as ``__main__``, then its tests in the same namespace; report the nonce
    only if both ran to the end.

    The texts are compiled as str, so a source-encoding declaration is a comment. The tests are
    compiled apart, under the file name ``<tests>`` that is on no disk, and their text is popped
    from the job inside the very expression that compiles it: no frame's locals hold it or its
    code, which the audit hook guards (code_guard.py), so a wrong program cannot read the
    expected values. The nonce is read and its pipe closed before the program starts; from then
    on it, like the tests' code, lives only in the arguments of ``functools.partial`` objects
    that C code calls one after the other. ``guard_forks`` (the native module's, armed once) zeroes
    it and closes the report pipe in every fork of the program, from inside fork() itself.

    A wrapper program (``candidate_file`` set: it compiles the candidate itself) does not get the
    tests either: it takes ``__editforge_tests__`` out of the builtins and calls it with a function
    to run once the tests end (with the exception that ended them, or None); it gets back the
    namespace the tests will run in, which it fills with what they may see.
    """
    exit_ = os._exit  # bound now: the program may replace os._exit
    module = _main_module(main_path)
    if collector is not None:
        _run_measured(job, main_path, module, collector, key_fd, report_fd, data_fd, writable, guard_forks)
    try:
        program = compile(job.pop("program"), main_path, "exec", dont_inherit=True, optimize=0)
    except BaseException as exc:
        exit_(_fail(exc, report_fd))
    strict = not job.get("unverified")
    install_guard(DENIED_EVENTS, PRIVATE_PROC, job.get("candidate_file") or main_path, writable, strict)
    namespace, finish = module.__dict__, []
    if job.get("candidate_file"):
        namespace = {}
        builtins.__editforge_tests__ = functools.partial(_register_wrapper, namespace, finish)
    try:
        collections.deque(
            map(
                operator.call,
                (
                    functools.partial(exec, program, module.__dict__),
                    functools.partial(
                        exec,
                        compile(job.pop("tests"), TESTS_FILE, "exec", dont_inherit=True, optimize=0),
                        namespace,
                    ),
                    functools.partial(_finish, finish, None),
                    functools.partial(os.write, report_fd, _take_nonce(key_fd, report_fd, guard_forks)),
                ),
            ),
            0,
        )
    except BaseException as exc:  # everything the program raises, SystemExit included, is a failure
        with contextlib.suppress(BaseException):
            _finish(finish, exc)
        exit_(_fail(exc, report_fd))
    _flush_stdio()
    exit_(0)  # skips atexit hooks and waiting for non-daemon threads: the verdict is already final


def _run_measured(
    job: dict,
    main_path: str,
    module: types.ModuleType,
    collector,
    key_fd: int,
    report_fd: int,
    data_fd: int,
    writable: tuple[str, ...],
    guard_forks,
) -> NoReturn:
    """A coverage run: program and tests as one file (main.py), as CanItEdit measures them. Its
    sample was judged by a verdict run before; this run's pass only decides whether coverage counts."""
    exit_ = os._exit
    source = job.pop("program") + "\n" + job.pop("tests")
    try:
        code = compile(source, main_path, "exec", dont_inherit=True, optimize=0)
    except BaseException as exc:
        exit_(_fail(exc, report_fd))
    collector.start()
    candidate_file, strict = job.get("candidate_file") or main_path, not job.get("unverified")
    install_guard(DENIED_EVENTS - _TRACING_EVENTS, PRIVATE_PROC, candidate_file, writable, strict)
    try:
        collections.deque(
            map(
                operator.call,
                (
                    functools.partial(exec, code, module.__dict__),
                    functools.partial(os.write, report_fd, _take_nonce(key_fd, report_fd, guard_forks)),
                ),
            ),
            0,
        )
    except BaseException as exc:
        exit_(_fail(exc, report_fd))
    _send_coverage(collector, source, main_path, data_fd)
    _flush_stdio()
    exit_(0)


def _main_module(main_path: str) -> types.ModuleType:
    module = types.ModuleType("__main__")
    module.__dict__.update(__file__=main_path, __builtins__=builtins, __cached__=None)
    sys.modules["__main__"] = module
    sys.argv = [main_path]
    sys.path.insert(0, os.path.dirname(main_path))
    return module


def _register_wrapper(namespace: dict, finish: list, after=None) -> dict:
    """``__editforge_tests__`` of a wrapper program: keep ``after`` for when the tests end and hand
    out the namespace they will run in."""
    if after is not None:
        finish.append(after)
    return namespace


def _finish(finish: list, exc: BaseException | None) -> None:
    """Call the wrapper's end-of-tests function once (it may raise: the run then fails)."""
    while finish:
        finish.pop()(exc)


def _channel_writer(fd: int, token: bytes):
    """The function a trusted wrapper program reports through (``Sandbox.run(channel=True)``): one
    record per call, a line on a pipe of its own, never stdout. The server keeps only lines that
    carry this run's token, which is in no program text; the program can still reach the writer
    itself through the wrapper's closures (docs/sandbox.md)."""
    prefix, write = token + b" ", os.write

    def report(record: str) -> None:
        view = memoryview(prefix + record.replace("\n", " ").encode("utf-8", "replace") + b"\n")
        while view:
            view = view[write(fd, view) :]

    return report


def _records(channel: bytes, token: bytes) -> str:
    """The lines of the channel that carry ``token``, without it (anything else was not the writer's)."""
    prefix = token + b" "
    lines = [line[len(prefix) :] for line in channel.split(b"\n") if line.startswith(prefix)]
    return b"\n".join(lines).decode("utf-8", errors="replace")


def _take_nonce(key_fd: int, report_fd: int, guard_forks) -> bytearray:
    """The nonce, in a buffer that every fork of the program zeroes, and the report pipe, which
    every fork closes: a forked copy of the run that passes cannot hand the nonce to the run itself
    (which would then pass whatever it did). The guard is C's (pthread_atfork, run inside fork()),
    not Python's at-fork hooks: those a program can make fail (a MemoryError while the interpreter
    copies its hook list) and then read through ``sys.unraisablehook``."""
    nonce = bytearray(os.read(key_fd, 64))
    os.close(key_fd)
    guard_forks(nonce, report_fd)
    return nonce


def _import_sibling(name: str) -> types.ModuleType:
    """A stdlib-only module next to this file (this file runs as a script, outside the package);
    the folder leaves sys.path again, so that programs cannot import our modules by accident."""
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path.insert(0, here)
    try:
        return importlib.import_module(name)
    finally:
        sys.path.remove(here)


# The audit hook of in-process runs, a module of its own (code_guard.py).
_code_guard = _import_sibling("code_guard")
install_guard, DENIED_EVENTS, PRIVATE_PROC = (
    _code_guard.install_guard,
    _code_guard.DENIED_EVENTS,
    _code_guard.PRIVATE_PROC,
)
TESTS_FILE, _TRACING_EVENTS = _code_guard.TESTS_FILE, _code_guard.TRACING_EVENTS


def _prepared_coverage(work_dir: str):
    """A coverage.py collector configured as CanItEdit's .coveragerc, started and stopped once
    here, and a parse with its exclusions, so that set-up and the parser's regular expressions
    are ready before the fork instead of costing every run."""
    import coverage
    from coverage.misc import join_regex
    from coverage.parser import PythonParser

    collector = coverage.Coverage(data_file=None, config_file=False)
    collector.exclude(COVERAGE_EXCLUDE)
    collector.start()
    collector.stop()
    collector.editforge_exclude = join_regex(collector.get_exclude_list())
    PythonParser(
        text="@abc.abstractmethod\ndef f():\n    pass\n", exclude=collector.editforge_exclude
    ).parse_source()
    return collector


def _send_coverage(collector, source: str, main_path: str, data_fd: int) -> None:
    """Stop measuring and send main.py's statements, exclusions and missed lines as JSON.

    The same analysis as coverage.py's report (``coverage.results.analysis_from_file_reporter``):
    statements and exclusions from its parser, executed lines mapped to their statements.
    """
    from coverage.parser import PythonParser

    collector.stop()
    # parsed under another name: main.py is reserved to trusted code (see code_guard.py)
    parser = PythonParser(text=source, filename="<measured>", exclude=collector.editforge_exclude)
    parser.parse_source()
    statements = parser.statements
    executed = parser.translate_lines(_executed_lines(collector, main_path)) & statements
    lines = {"statements": statements, "excluded": parser.excluded, "missing": statements - executed}
    data = json.dumps({key: sorted(value) for key, value in lines.items()}).encode()
    view = memoryview(data)
    while view:
        view = view[os.write(data_fd, view) :]


def _executed_lines(collector, main_path: str) -> set[int]:
    """Lines the tracer recorded in main.py: read from the tracer's own table where this
    coverage.py version has it (the public route first copies everything into SQLite, ~3 ms)."""
    traced = getattr(getattr(collector, "_collector", None), "data", None)
    lines = traced.get(os.path.realpath(main_path)) if isinstance(traced, dict) else None
    if lines is None:
        lines = collector.get_data().lines(main_path) or ()
    return {n for n in lines if type(n) is int}


def _fail(exc: BaseException, report_fd: int) -> int:
    """Report ``exc`` (before the traceback, which may fail after a MemoryError); the exit code."""

    def report(failure: bytes) -> None:
        with contextlib.suppress(OSError):
            os.write(report_fd, b"!" + failure[: _REPORT_CAP - 1])

    if isinstance(exc, SystemExit):
        report(f"SystemExit:{exc.code!r}".encode(errors="replace"))
        code = exc.code
        if code is None:
            code = 0
        elif not isinstance(code, int):
            print(code, file=sys.stderr)
            code = 1
    else:
        try:
            message = str(exc)
        except Exception:
            message = "<unprintable>"
        report(f"{type(exc).__name__}:{message}".encode(errors="replace"))
        code = 1
        # tb_next skips the harness's own frame; the interpreter's C printer reads no frame
        # attribute through Python, so the guarded tests' frames print too
        with contextlib.suppress(BaseException):
            shown = exc.with_traceback(exc.__traceback__.tb_next)  # the printer reads the exception's own
            sys.__excepthook__(type(shown), shown, shown.__traceback__)
    _flush_stdio()
    return code & 0xFF


def _token_descriptors(key_fd: int, report_fd: int) -> None:
    """The run token's pipes at the descriptors a command's tests use: read it from 3, write it to 4
    (inherited across exec; moved high first, since either may sit at 3 or 4 now)."""
    key, report = (
        fcntl.fcntl(key_fd, fcntl.F_DUPFD_CLOEXEC, 10),
        fcntl.fcntl(report_fd, fcntl.F_DUPFD_CLOEXEC, 10),
    )
    os.dup2(key, 3)
    os.dup2(report, 4)
    os.close(key)
    os.close(report)


def _exec_command(argv: list[str]) -> NoReturn:
    for sig in (signal.SIGPIPE, signal.SIGXFSZ):  # Python ignores these; other programs expect defaults
        signal.signal(sig, signal.SIG_DFL)
    try:
        os.execvp(argv[0], argv)
    except OSError as exc:
        os.write(2, f"cannot execute {argv[0]!r}: {exc}\n".encode())
    os._exit(127)


def _flush_stdio() -> None:
    for stream in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
        with contextlib.suppress(Exception):
            stream.flush()


def _address_space() -> int:
    """Bytes of virtual memory this process has mapped (what RLIMIT_AS counts)."""
    with open("/proc/self/statm") as f:
        return os.sysconf("SC_PAGE_SIZE") * int(f.read().split()[0])


def _set_rlimits(limits: dict, nproc_base: int, base_vm: int) -> None:
    mb = 1 << 20
    for res, value in (
        (resource.RLIMIT_AS, limits["memory_mb"] * mb + base_vm),
        (resource.RLIMIT_FSIZE, limits["file_size_mb"] * mb),
        (resource.RLIMIT_CORE, 0),
        (resource.RLIMIT_MSGQUEUE, 0),  # POSIX message queues would outlive the run
        (resource.RLIMIT_NPROC, nproc_base + limits["max_processes"]),
    ):
        hard = resource.getrlimit(res)[1]
        value = value if hard == resource.RLIM_INFINITY else min(value, hard)
        resource.setrlimit(res, (value, value))  # hard too: the program cannot raise it back


def _close_fds_except(keep: set[int]) -> None:
    low = 3
    for fd in sorted(keep):
        os.closerange(low, fd)
        low = fd + 1
    os.closerange(low, os.sysconf("SC_OPEN_MAX"))


def _append(buffer: bytearray, chunk: bytes, cap: int) -> bool:
    """Keep at most ``cap`` bytes in ``buffer``; True when ``chunk`` did not fit."""
    room = max(cap - len(buffer), 0)
    buffer += chunk[:room]
    return len(chunk) > room


def _drain(fd: int, buffer: bytearray, cap: int) -> bool:
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
        overflow = _append(buffer, chunk, cap) or overflow


def _parse_coverage(data: bytes) -> dict:
    """The coverage a run sent (line numbers of main.py), or why there is none."""
    try:
        measured = json.loads(data)
        lines = {key: measured[key] for key in ("statements", "excluded", "missing")}
    except (ValueError, TypeError, KeyError, RecursionError):  # RecursionError: "[[[[..."
        lines = {}
    if lines and all(isinstance(v, list) and all(type(n) is int for n in v) for v in lines.values()):
        return lines
    return {"error": "the run passed but sent no readable coverage"}


def _clear_keyrings(native: types.ModuleType) -> None:
    """Empty the user and user-session keyrings, which outlive the run that filled them."""
    for keyring in (KEY_SPEC_USER_KEYRING, KEY_SPEC_USER_SESSION_KEYRING):
        _succeeds(native.keyring_clear, keyring)


def _remove_sysv_ipc(native: types.ModuleType) -> None:
    """Remove every SysV shared-memory segment, semaphore set and message queue in our namespace."""
    for kind in ("shm", "sem", "msg"):
        try:
            with open(f"/proc/sysvipc/{kind}") as f:
                ids = [int(line.split()[1]) for line in f.readlines()[1:] if line.strip()]
        except (OSError, ValueError, IndexError):
            continue
        for ipc_id in ids:
            _succeeds(native.ipc_remove, kind, ipc_id)


def _succeeds(call, *args) -> bool:
    """Whether a system call of the native module succeeded (False where it raised OSError)."""
    try:
        call(*args)
    except OSError:
        return False
    return True


def _load_native(path: str) -> types.ModuleType:
    """The ``_editforge_sys`` module the host compiled (core/sandbox/native.py), from its path."""
    import importlib.machinery
    import importlib.util

    loader = importlib.machinery.ExtensionFileLoader("_editforge_sys", path)
    module = importlib.util.module_from_spec(
        importlib.util.spec_from_file_location("_editforge_sys", path, loader=loader)
    )
    loader.exec_module(module)
    return module


def _loopback_up() -> None:
    """Bring up ``lo`` in our new network namespace, as bwrap does: localhost works, nothing else."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        ifreq = fcntl.ioctl(sock, SIOCGIFFLAGS, struct.pack("16sH22x", b"lo", 0))
        flags = struct.unpack("16sH22x", ifreq)[1]
        fcntl.ioctl(sock, SIOCSIFFLAGS, struct.pack("16sH22x", b"lo", flags | IFF_UP))


def _kill_quietly(pid: int, group: bool) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        (os.killpg if group else os.kill)(pid, signal.SIGKILL)


def _inside(root: str, name: str) -> str:
    path = os.path.normpath(os.path.join(root, name))
    if os.path.isabs(name) or not path.startswith(root + os.sep):
        raise ValueError(f"file name {name!r} leaves the work folder")
    return path


def _write_file(path: str, text: str) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8", errors="surrogatepass") as f:
        f.write(text)


def _empty_dir(path: str, keep: frozenset[str] = frozenset()) -> None:
    """Delete everything inside ``path``, including folders the program made unreadable or nested
    thousands deep (iteratively: no recursion limit), except the read-only binds in ``keep``
    (and the folders that lead to them)."""
    pending, emptied = [path], []
    while pending:
        folder = pending.pop()
        emptied.append(folder)
        with os.scandir(folder) as entries:
            for entry in list(entries):
                if entry.path in keep:
                    continue
                if entry.is_dir(follow_symlinks=False):
                    os.chmod(entry.path, 0o700)
                    pending.append(entry.path)
                else:
                    os.unlink(entry.path)
    for folder in reversed(emptied[1:]):  # deepest first
        if not any(k.startswith(folder + "/") for k in keep):
            os.rmdir(folder)


def main() -> None:
    ctl_in, ctl_out = os.dup(0), os.dup(1)
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 0)  # stray reads or prints in the server must not touch the protocol
    os.dup2(null, 1)
    os.close(null)
    Server(json.loads(sys.argv[1]), ctl_in, ctl_out).start()


if __name__ == "__main__":
    main()
