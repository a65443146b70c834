"""The trusted process of split runs: one per server, running run after run, never candidate code.

A fresh trusted process per split run (a fork of the server, its copy-on-write faults, its exit)
cost more CPU than most runs' tests. The tests are the benchmark's code, not the candidate's,
so one interpreter may run them for many runs, as long as nothing that one run's tests leave
behind reaches the next. This process therefore

- runs each run's tests in a new namespace against that run's own channel (``split_trusted.run``);
- puts back, after every run, the process-wide state that tests can change (``State``): the
  warnings filters and registry, the recursion limit, the decimal context, os.environ, umask,
  sys.path, argv, the standard streams and hooks, builtins, signal handlers and timers; and
  reseeds ``random`` from the system, as a forked process would have been;
- leaves the run's folders (its working folder becomes ``/``) and closes the run's descriptors;
- exits instead where it cannot put something back: a thread left running, an entry of
  ``sys.modules`` replaced or removed, a MemoryError, or after ``MAX_RUNS`` runs. The server then
  starts a fresh one for the next run; so it does after a timeout, a crash, or other limits.

Protocol: the server sends each run as one message on a ``SOCK_SEQPACKET`` socket, JSON with the
names of the descriptors that come with it by ``SCM_RIGHTS`` (the channel's two ends, the run's
stdout and stderr, a memfd with the texts); the answer is the outcome, one JSON record.
Standard library only; loaded by the harness inside the sandbox.
"""

from __future__ import annotations

import _signal  # signal's getsignal without its enum conversions: this runs after every run
import builtins
import contextlib
import decimal
import json
import os
import random
import resource
import signal
import socket
import sys
import warnings

try:  # in the sandbox the harness loads these files from its own folder
    import split_trusted
    from plain import Channel
    from zygote import read_payload
except ImportError:
    from core.sandbox import split_trusted
    from core.sandbox.plain import Channel
    from core.sandbox.zygote import read_payload

MAX_RUNS = 1000  # a fresh process now and then bounds what caches and fragmentation keep
MAX_FDS = 8
_MESSAGE = 1 << 16
_CODE_CACHE = 512  # compiled tests kept (a code object holds no state)
_SYS_OBJECTS = ("stdin", "stdout", "stderr", "displayhook", "excepthook", "breakpointhook", "unraisablehook")
_SYS_LISTS = ("path", "argv", "meta_path", "path_hooks")


class State:
    """The process-wide state tests can change, taken before the first run and put back after each."""

    def __init__(self) -> None:
        self.filters = list(warnings.filters)
        self.defaultaction = warnings.defaultaction  # type: ignore[attr-defined]  # not in typeshed
        self.showwarning = warnings.showwarning
        self.recursion = sys.getrecursionlimit()
        self.decimal = decimal.getcontext().copy()
        self.environ = dict(os.environ)
        self.umask = os.umask(0o022)
        os.umask(self.umask)
        self.objects = {name: getattr(sys, name) for name in _SYS_OBJECTS}
        self.lists = {name: list(getattr(sys, name)) for name in _SYS_LISTS}
        self.path_cache = dict(sys.path_importer_cache)
        self.builtins = dict(vars(builtins))
        self.process = _process_settings()
        self.modules = dict(sys.modules)
        self.signals = {sig: _signal.getsignal(sig) for sig in signal.valid_signals()}

    def restore(self) -> str | None:
        """Put it back; why not, where something cannot be (this process must then be replaced)."""
        threading = sys.modules.get("threading")
        if threading is not None and threading.active_count() > 1:
            return "a thread of the tests is still running"
        for name, module in self.modules.items():
            if sys.modules.get(name) is not module:
                return f"the tests replaced or removed the module {name!r}"
        if _process_settings() != self.process:  # lowered limits or priority cannot be raised back
            return "its resource limits, priority or CPUs were changed"
        signal.setitimer(signal.ITIMER_REAL, 0)
        for sig, handler in self.signals.items():
            if handler is not None and _signal.getsignal(sig) is not handler:
                signal.signal(sig, handler)
        # typeshed has warnings.filters as a Sequence, and no defaultaction or onceregistry
        warnings.filters[:] = self.filters  # type: ignore[index]
        warnings.defaultaction, warnings.showwarning = self.defaultaction, self.showwarning  # type: ignore[attr-defined]
        warnings.onceregistry.clear()  # type: ignore[attr-defined]
        warnings._filters_mutated()  # type: ignore[attr-defined]  # forget every module's registry
        sys.setrecursionlimit(self.recursion)
        decimal.setcontext(self.decimal.copy())
        if os.environ != self.environ:
            os.environ.clear()
            os.environ.update(self.environ)
        os.umask(self.umask)
        for name, value in self.objects.items():
            setattr(sys, name, value)
        for name, value in self.lists.items():
            getattr(sys, name)[:] = value
        if sys.path_importer_cache != self.path_cache:
            sys.path_importer_cache.clear()
            sys.path_importer_cache.update(self.path_cache)
        names = vars(builtins)
        if names != self.builtins:
            names.clear()
            names.update(self.builtins)
        random.seed()  # as in a forked process: random reseeds itself at fork
        numpy_random = sys.modules.get("numpy.random")
        if numpy_random is not None:  # as in a process that imports numpy afresh
            numpy_random.seed()
        return None


class _Compiled(dict):
    """(tests, helpers) texts -> their compiled code, the oldest dropped first."""

    def get_code(self, tests: str, helpers: str) -> tuple | None:
        key = (tests, helpers)
        if key not in self:
            try:
                code = split_trusted.compile_tests(tests, helpers)
            except Exception:  # let the run compile it again and report the error
                return None
            if len(self) >= _CODE_CACHE:
                self.pop(next(iter(self)))
            self[key] = code
        return self[key]


def _process_settings() -> tuple:
    """What the kernel holds for this process that the tests (or, without seccomp.protect, another
    process of the run's user) could change: every resource limit, the priority, the CPUs."""
    limits = tuple(resource.getrlimit(getattr(resource, n)) for n in dir(resource) if n.startswith("RLIMIT_"))
    return limits, os.getpriority(os.PRIO_PROCESS, 0), frozenset(os.sched_getaffinity(0))


def serve(sock: socket.socket) -> None:
    """Run the runs the server sends until it closes the socket, state put back after each.
    Return when this process must be replaced; the last outcome then says why (``retire``), so
    that the server starts a fresh process before the next run."""
    compiled = _Compiled()
    devnull = os.open(os.devnull, os.O_RDWR)
    state = State()
    for runs in range(1, MAX_RUNS + 1):
        try:
            data, fds, _, _ = socket.recv_fds(sock, _MESSAGE, MAX_FDS)
        except OSError:
            return
        if not data:
            return
        job = json.loads(data)
        outcome = _one_run(job, dict(zip(job["fds"], fds, strict=True)), compiled, devnull)
        why = "a MemoryError" if outcome.get("kind") == "memory" else outcome.pop("retire", None)
        try:
            why = why or state.restore()
        except BaseException as exc:  # noqa: BLE001 - whatever it is, this process is done
            why = f"the state could not be put back ({type(exc).__name__})"
        if not why and runs == MAX_RUNS:
            why = f"{MAX_RUNS} runs served"
        if why:
            outcome["retire"] = why
        sock.send(_message(outcome))
        if why:
            return


def _message(outcome: dict) -> bytes:
    """The outcome as one message the server reads whole: where it would not fit (a program's
    exception text is the program's to choose), the lines that ran go first (the run is left
    without coverage), then the error is cut."""
    data = json.dumps(outcome).encode()
    if len(data) > _MESSAGE and "lines" in outcome:
        outcome = {key: value for key, value in outcome.items() if key != "lines"}
        data = json.dumps(outcome).encode()
    if len(data) > _MESSAGE:
        outcome = {**outcome, "error": str(outcome.get("error", ""))[:2000]}
        data = json.dumps(outcome).encode()
    return data


def _one_run(job: dict, fds: dict[str, int], compiled: _Compiled, devnull: int) -> dict:
    """One run's tests, with the run's stdout and stderr as ours and its folder as ours meanwhile."""
    try:
        texts = read_payload(fds.pop("payload"))
        os.chdir(job["work_dir"])  # the run's new folder: the tests' files are the program's
        os.dup2(fds.pop("stdout"), 1)
        os.dup2(fds.pop("stderr"), 2)
        channel = Channel(fds.pop("read"), fds.pop("write"))
        tests, helpers = texts["tests"], texts.get("helpers", "")
        modules = frozenset(job.get("modules", ()))
        code = compiled.get_code(tests, helpers)
        return split_trusted.run(channel, tests, helpers, code, modules, bool(job.get("coverage")))
    except BaseException as exc:  # a fault of ours, not of the tests (run() reports theirs)
        with contextlib.suppress(BaseException):
            os.write(2, f"sandbox harness (trusted side): {exc!r}\n".encode())
        error = f"sandbox harness (trusted side): {exc!r}"
        return {
            "passed": False,
            "tests_passed": 0,
            "tests_total": 0,
            "delegated": 0,
            "error": error,
            "retire": error,
        }
    finally:
        with contextlib.suppress(BaseException):
            sys.stdout.flush()
            sys.stderr.flush()
        os.dup2(devnull, 1)  # nothing of a later write reaches this run's pipes
        os.dup2(devnull, 2)
        for fd in fds.values():
            with contextlib.suppress(OSError):
                os.close(fd)
        os.chdir("/")  # nothing of ours keeps the run's folder alive once it is unmounted


class TrustedClient:
    """The server's end: sends a run's descriptors and texts, receives its outcome."""

    def __init__(self, pid: int, sock: socket.socket, limits: dict) -> None:
        self.pid, self.sock, self.limits = pid, sock, limits
        self.status: int | None = None  # its exit status once reaped

    def fileno(self) -> int:
        return self.sock.fileno()

    def send(self, job: dict, fds: dict[str, int]) -> bool:
        """Send one run (the descriptors are closed here once sent); False if the process is gone."""
        names = list(fds)
        try:
            message = json.dumps({**job, "fds": names}).encode()
            socket.send_fds(self.sock, [message], [fds[n] for n in names])
            return True
        except OSError:
            return False
        finally:
            for fd in fds.values():
                os.close(fd)

    def receive(self) -> bytes:
        """The outcome of the run; b"" when the process died first or sent more than a message
        holds (`retires`: it is then replaced)."""
        try:
            data, _, flags, _ = self.sock.recvmsg(_MESSAGE)
        except OSError:
            return b""
        return b"" if flags & socket.MSG_TRUNC else data

    def close(self) -> None:
        self.sock.close()
