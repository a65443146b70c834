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
a private pipe after the fork and that the child read (and closed) before the program
started: early exits, exit-code tricks and printed markers cannot produce it. Code in the
same interpreter can still find the nonce by introspection; see docs/sandbox.md.
"""

from __future__ import annotations

import builtins
import contextlib
import ctypes
import fcntl
import gc
import importlib
import json
import os
import resource
import select
import shutil
import signal
import socket
import struct
import sys
import time
import traceback
import types
from typing import NoReturn

_HEADER = struct.Struct(">I")
_CHUNK = 1 << 16
_REPORT_CAP = 4096  # the report pipe carries one short record; anything beyond is junk
PR_SET_PDEATHSIG, PR_SET_DUMPABLE, PR_SET_CHILD_SUBREAPER = 1, 4, 36
CLONE_NEWNET = 0x40000000
SIOCGIFFLAGS, SIOCSIFFLAGS, IFF_UP = 0x8913, 0x8914, 0x1
_STOP_SIGNALS = (signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2)
# Stdlib modules most generated programs import; the server imports them once. random
# reseeds itself in every forked child (its own at-fork hook), the rest hold no per-process state.
PRELOAD = (
    "bisect collections copy dataclasses datetime decimal fractions functools hashlib heapq itertools json "
    "math operator random re string typing"
)


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
        if self.mode == "init" and os.getpid() != 1:  # kill(-1) anywhere else would hit the whole host
            raise RuntimeError("init mode needs a fresh PID namespace with this server as PID 1")
        self.work_dir = config["work_dir"]
        self.scratch = {path: os.stat(path).st_mode & 0o7777 for path in config["scratch_dirs"]}
        self.keep = frozenset(config.get("keep_paths", ()))
        self.nproc_base = config["nproc_base"]
        self.libc = ctypes.CDLL(None, use_errno=True)
        self.pid = os.getpid()
        self.child = 0
        self.child_status: int | None = None
        if config["unshare_net"] and self.libc.unshare(CLONE_NEWNET) == 0:
            _loopback_up()
        self.libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)  # children may not ptrace us or read our /proc/*/mem
        if self.mode == "subreaper":
            self.libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
        for sig in (signal.SIGINT, *_STOP_SIGNALS):
            signal.signal(sig, signal.SIG_IGN)  # only the host stops us, with SIGKILL
        self.wake_r, wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        signal.set_wakeup_fd(wake_w)
        signal.signal(signal.SIGCHLD, lambda signum, frame: None)
        for name in PRELOAD.split():
            importlib.import_module(name)
        gc.freeze()  # keeps the children's garbage collector off the shared pages (fewer copy-on-write faults)
        self._empty_scratch()

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
        finally:  # no PR_SET_PDEATHSIG on us: dying at once would leave a local run's orphans behind
            self._kill_all()
            if self.mode == "subreaper":  # host folders; bwrap's tmpfs folders vanish with the namespace
                for path in self.scratch:
                    shutil.rmtree(path, ignore_errors=True)

    def execute(self, job: dict) -> dict:
        limits = job["limits"]
        stdin_fd = self._stdin(job.get("stdin"))
        if job["kind"] == "python":
            main_path = os.path.join(self.work_dir, "main.py")
            _write_file(main_path, job["program"] + "\n" + job["tests"])
        else:
            for name, text in job["files"].items():
                _write_file(_inside(self.work_dir, name), text)
        pipes = {name: os.pipe() for name in ("stdout", "stderr", "report", "key")}
        self.child, self.child_status = 0, None
        start = time.monotonic()
        pid = os.fork()
        if pid == 0:
            self._child(job, stdin_fd, pipes)
        self.child = pid
        os.close(stdin_fd)
        for name, (r, w) in pipes.items():
            os.close(r if name == "key" else w)
        nonce = os.urandom(16).hex().encode()
        if job["kind"] == "python":
            with contextlib.suppress(OSError):  # a dead child closed its end: it cannot pass anyway
                os.write(pipes["key"][1], nonce)
        os.close(pipes["key"][1])
        streams = {pipes[name][0]: bytearray() for name in ("stdout", "stderr", "report")}
        caps = {
            pipes["stdout"][0]: limits["max_output_bytes"],
            pipes["stderr"][0]: limits["max_output_bytes"],
        }
        stop = self._supervise(streams, caps, start + limits["timeout_s"])
        duration = time.monotonic() - start
        self._kill_all()
        for fd in streams:
            if _drain(fd, streams[fd], caps.get(fd)) and stop is None:
                stop = "output_limit"
            os.close(fd)
        out, err, report = (bytes(streams[pipes[name][0]]) for name in ("stdout", "stderr", "report"))
        status, exit_code, detail = self._verdict(job, stop, nonce, report, out)
        restart = False
        try:
            self._empty_scratch()
        except OSError as exc:  # e.g. a folder nested too deep to delete: a fresh worker is cheaper
            restart, detail = True, f"{detail} (scratch cleanup failed: {exc}; worker restarts)".strip()
        return {
            "status": status,
            "exit_code": exit_code,
            "stdout": out.decode("utf-8", errors="replace"),
            "stderr": err.decode("utf-8", errors="replace"),
            "duration_s": duration,
            "detail": detail,
            "restart": restart,
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

    def _supervise(self, streams: dict[int, bytearray], caps: dict[int, int], deadline: float) -> str | None:
        """Collect output until the child exits; "timeout" or "output_limit" if it must be stopped."""
        poller = select.poll()
        for fd in (*streams, self.wake_r, self.ctl_in):
            poller.register(fd, select.POLLIN)
        while self.child_status is None:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return "timeout"
            for fd, _ in poller.poll(remaining * 1000):
                if fd == self.wake_r:
                    _drain(self.wake_r, bytearray(), 0)
                    self._reap(block=False)
                    continue
                if fd == self.ctl_in:  # the host never writes during a run: it closed the channel or died
                    raise _HostGone
                chunk = os.read(fd, _CHUNK)
                if not chunk:
                    poller.unregister(fd)
                elif _append(streams[fd], chunk, caps.get(fd, _REPORT_CAP)) and fd in caps:
                    return "output_limit"
        return None

    def _reap(self, block: bool) -> None:
        """Reap exited children (and, as PID 1 or subreaper, adopted orphans)."""
        while True:
            try:
                pid, status = os.waitpid(-1, 0 if block else os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            if pid == self.child:
                self.child_status = status

    def _kill_all(self) -> None:
        """Kill and reap every process started by the run, however it detached itself."""
        if self.mode == "init":
            with contextlib.suppress(ProcessLookupError):  # as PID 1: all others in the namespace, fork-safe
                os.kill(-1, signal.SIGKILL)
            self._reap(block=True)
            return
        if self.child and self.child_status is None:  # unreaped, its pid (and group id) cannot be reused
            _kill_quietly(self.child, group=True)
        while True:  # orphans of killed processes reparent to us (subreaper), so this reaches them all
            for pid in _children():
                _kill_quietly(pid, group=False)
            try:
                pid, status = os.waitpid(-1, 0)
            except ChildProcessError:
                return
            if pid == self.child:
                self.child_status = status

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
            marker = job.get("pass_marker")
            if code == 0 and (marker is None or marker.encode() in out):
                return "passed", 0, ""
            missing = f"; pass marker {marker!r} not in stdout" if code == 0 else ""
            return "failed", code, f"exited with code {code}{missing}"
        if report == nonce and code == 0:
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

    def _empty_scratch(self) -> None:
        for path, mode in self.scratch.items():
            os.chmod(path, mode)
            _empty_dir(path, self.keep)
        os.makedirs(self.work_dir, exist_ok=True)

    def _child(self, job: dict, stdin_fd: int, pipes: dict[str, tuple[int, int]]) -> NoReturn:
        """Become the sandboxed process; never returns."""
        try:
            self.libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)  # dies with the server
            if os.getppid() != self.pid:  # the server died before the line above
                os._exit(70)
            os.setsid()
            signal.set_wakeup_fd(-1)
            for sig in (signal.SIGCHLD, *_STOP_SIGNALS):  # what a fresh interpreter starts with
                signal.signal(sig, signal.SIG_DFL)
            signal.signal(signal.SIGINT, signal.default_int_handler)
            os.dup2(stdin_fd, 0)
            os.dup2(pipes["stdout"][1], 1)
            os.dup2(pipes["stderr"][1], 2)
            report_fd, key_fd = pipes["report"][1], pipes["key"][0]
            _close_fds_except({report_fd, key_fd})
            _set_rlimits(job["limits"], self.nproc_base)
            os.chdir(self.work_dir)
            if job["kind"] == "python":
                _run_python(os.path.join(self.work_dir, "main.py"), key_fd, report_fd)
            _exec_command(job["argv"])
        except BaseException as exc:  # the harness failed in the child: never return to the server loop
            os.write(2, f"sandbox harness: {exc!r}\n".encode())
        os._exit(70)


def _run_python(main_path: str, key_fd: int, report_fd: int) -> NoReturn:
    """Run main.py (program + tests) as ``__main__``; report the nonce only if it ran to the end."""
    exit_ = os._exit  # bound now: the program may replace os._exit
    report = _reporter(report_fd, os.read(key_fd, 64))
    os.close(key_fd)
    module = types.ModuleType("__main__")
    module.__dict__.update(__file__=main_path, __builtins__=builtins, __cached__=None)
    sys.modules["__main__"] = module
    sys.argv = [main_path]
    sys.path.insert(0, os.path.dirname(main_path))
    try:
        with open(main_path, "rb") as f:
            code = compile(f.read(), main_path, "exec")
        exec(code, module.__dict__)
    except BaseException as exc:  # everything the program raises, SystemExit included, is a failure
        exit_(_fail(exc, report))
    _flush_stdio()
    report(None)
    exit_(0)  # skips atexit hooks and waiting for non-daemon threads: the verdict is already final


def _reporter(report_fd: int, nonce: bytes):
    """A function that writes the run's one record: the nonce (None) or a failure.

    Only the process the harness started may write it: a fork of the program that falls
    through to the end of the tests (or raises) must not speak for the run. The nonce lives
    only in this closure's cell.
    """
    write, getpid, owner = os.write, os.getpid, os.getpid()

    def report(failure: bytes | None) -> None:
        if getpid() == owner:
            with contextlib.suppress(OSError):
                write(report_fd, nonce if failure is None else b"!" + failure[: _REPORT_CAP - 1])

    return report


def _fail(exc: BaseException, report) -> int:
    """Report ``exc`` (before the traceback, which may fail after a MemoryError); the exit code."""
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
        with contextlib.suppress(BaseException):  # tb_next skips the harness's own frame
            traceback.print_exception(type(exc), exc, exc.__traceback__.tb_next)
    _flush_stdio()
    return code & 0xFF


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


def _set_rlimits(limits: dict, nproc_base: int) -> None:
    mb = 1 << 20
    for res, value in (
        (resource.RLIMIT_AS, limits["memory_mb"] * mb),
        (resource.RLIMIT_FSIZE, limits["file_size_mb"] * mb),
        (resource.RLIMIT_CORE, 0),
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


def _drain(fd: int, buffer: bytearray, cap: int | None) -> bool:
    """Read what is left without blocking; True when it overflowed ``cap`` (None: the report cap)."""
    os.set_blocking(fd, False)
    overflow = False
    while True:
        try:
            chunk = os.read(fd, _CHUNK)
        except BlockingIOError:
            return overflow
        if not chunk:
            return overflow
        overflow = _append(buffer, chunk, _REPORT_CAP if cap is None else cap) or overflow


def _loopback_up() -> None:
    """Bring up ``lo`` in our new network namespace, as bwrap does: localhost works, nothing else."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        ifreq = fcntl.ioctl(sock, SIOCGIFFLAGS, struct.pack("16sH22x", b"lo", 0))
        flags = struct.unpack("16sH22x", ifreq)[1]
        fcntl.ioctl(sock, SIOCSIFFLAGS, struct.pack("16sH22x", b"lo", flags | IFF_UP))


def _children() -> list[int]:
    """Our direct children (CONFIG_PROC_CHILDREN), falling back to a scan of /proc."""
    me = os.getpid()
    try:
        with open(f"/proc/{me}/task/{me}/children") as f:
            return [int(pid) for pid in f.read().split()]
    except FileNotFoundError:
        pass
    children = []
    for name in os.listdir("/proc"):
        try:
            with open(f"/proc/{name}/stat") as f:
                if name.isdigit() and int(f.read().rpartition(")")[2].split()[1]) == me:
                    children.append(int(name))
        except (OSError, ValueError, IndexError):
            continue
    return children


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
    """Delete everything inside ``path``, including folders the program made unreadable,
    except the read-only binds in ``keep`` (and the folders that lead to them)."""
    with os.scandir(path) as entries:
        for entry in list(entries):
            if entry.path in keep:
                continue
            if entry.is_dir(follow_symlinks=False):
                os.chmod(entry.path, 0o700)
                _empty_dir(entry.path, keep)
                if not any(k.startswith(entry.path + "/") for k in keep):
                    os.rmdir(entry.path)
            else:
                os.unlink(entry.path)


def main() -> None:
    ctl_in, ctl_out = os.dup(0), os.dup(1)
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 0)  # stray reads or prints in the server must not touch the protocol
    os.dup2(null, 1)
    os.close(null)
    Server(json.loads(sys.argv[1]), ctl_in, ctl_out).serve()


if __name__ == "__main__":
    main()
