"""In-sandbox fork server: runs untrusted programs one at a time, each in a process of its own.

The host starts it as ``python -I harness.py CONFIG_JSON`` (inside bubblewrap, or directly for
the local backend) and talks to it over fds 0/1 (host_protocol.py): one job in, one result out.
The interpreter starts and imports common modules once per worker; each execution then costs a
fork instead of an interpreter start.

What this module guarantees: it splits itself in two before any job (the zygote, zygote.py, forks
every run's process from a memory that never held a job; this process serves the host), and per
run it collects the run's output up to its cap until the run ends or its wall-clock deadline
passes, then has every process of the run killed and reaped, and the scratch folders made new
(scratch_folders.py), before it answers. The server is not dumpable and ignores every signal but
SIGKILL; a seccomp filter keeps runs from signalling it or the zygote. Its jobs' parts are modules
of one job each, all standard library only, loaded from this folder (this file runs apart from
the editforge package):

- host_protocol.py: the framing of the host channel;
- run_process.py: what a run's process is (descriptors, rlimits, capabilities, Landlock);
- python_runner.py: a Python run in process (the nonce, the audit hook of code_guard.py);
- coverage_run.py: coverage.py's measurement of a passing program;
- line_probes.py: the lines a split run executed, for the same analysis;
- report_channel.py: reading a verdict from what a run wrote (report pipe, run token, outcome);
- scratch_folders.py: the run's folders, renewed after every run;
- split_runs.py (with trusted_server.py, split_trusted.py, split_candidate.py, plain.py): split runs.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import gc
import importlib
import json
import os
import shutil
import signal
import socket
import struct
import sys
import time
import types
from typing import TYPE_CHECKING, cast

if TYPE_CHECKING:  # annotations only: nothing more is imported in the sandbox
    from core.sandbox.zygote import ZygoteClient


@contextlib.contextmanager
def _siblings():
    """Import the stdlib-only modules next to this file (it runs as ``python -I``, outside the
    package); the folder leaves sys.path again, so that programs cannot import them by accident."""
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path.insert(0, here)
    try:
        yield
    finally:
        sys.path.remove(here)


with _siblings():  # before the fork: no per-run import
    import confine
    import plain  # noqa: F401  (loaded for the split modules)
    import seccomp
    import split_candidate  # noqa: F401
    import split_trusted  # noqa: F401
    import trusted_server  # noqa: F401
    import zygote as zygote_module
    from coverage_run import parse_coverage, prepared_coverage
    from host_protocol import read_message, write_message
    from line_probes import prepared_probes
    from report_channel import DATA_CAP, REPORT_CAP, records, verdict
    from run_process import PR_SET_PDEATHSIG, STOP_SIGNALS, address_space, become_run
    from scratch_folders import ScratchFolders, inside, succeeds, write_file
    from split_runs import SplitRuns
    from supervision import HostGone, Supervision

PR_SET_CHILD_SUBREAPER = 36
CLONE_NEWNET, CLONE_NEWIPC = 0x40000000, 0x08000000
SIOCGIFFLAGS, SIOCSIFFLAGS, IFF_UP = 0x8913, 0x8914, 0x1
# Stdlib modules most generated programs import; the server imports them once. random
# reseeds itself in every forked child (its own at-fork hook), the rest hold no per-process state.
PRELOAD = (
    "bisect collections copy dataclasses datetime decimal fractions functools hashlib heapq itertools json "
    "math operator random re string typing"
)
# Optional, so that a bare interpreter can still serve. Never numpy (or anything that loads a raw
# memory primitive): a preloaded module is reachable from every program without an import.
# (coverage.py and slipcover are loaded by the servers that measure coverage.)
OPTIONAL_PRELOAD = ("statistics",)


class Server(SplitRuns, Supervision):
    """Runs jobs for one host worker; ``mode`` is "init" (PID 1 under bwrap) or "subreaper"."""

    def __init__(self, config: dict, ctl_in: int, ctl_out: int) -> None:
        self.ctl_in, self.ctl_out = ctl_in, ctl_out
        self.mode = config["mode"]
        if self.mode == "init" and os.getpid() != 1:  # the zygote must be the namespace's reaper of orphans
            raise RuntimeError("init mode needs a fresh PID namespace with this server as PID 1")
        self.nproc_base = config["nproc_base"]
        if config.get("cpu") is not None:  # the trusted and candidate processes talk on one CPU
            with contextlib.suppress(OSError):  # a CPU gone offline: run anywhere
                os.sched_setaffinity(0, {config["cpu"]})
        self.native = _load_native(config["native"])
        self.pid = os.getpid()  # the zygote's, once start() has split this process in two
        self.child = 0
        self.child_status: int | None = None
        self.zygote: ZygoteClient = None  # type: ignore[assignment]  # start() sets it before any job
        # bwrap made the network namespace (unless the network is allowed); a local server makes its own
        private_network = self.mode == "init" and not config.get("network")
        if config["unshare_net"] and succeeds(self.native.unshare, CLONE_NEWNET):
            _loopback_up()
            private_network = True
        # SysV IPC objects outlive their creator: a namespace of our own lets us remove them after each run.
        self.own_ipc = self.mode == "init" or (
            config.get("unshare_ipc") and succeeds(self.native.unshare, CLONE_NEWIPC)
        )
        self.native.set_undumpable()  # children may not ptrace us or read our /proc/*/mem (nor runs, theirs)
        if self.mode == "subreaper":
            self.native.prctl_set(PR_SET_CHILD_SUBREAPER, 1)
        for sig in (signal.SIGINT, *STOP_SIGNALS):
            signal.signal(sig, signal.SIG_IGN)  # only the host stops us, with SIGKILL
        self.wake_r, wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        signal.set_wakeup_fd(wake_w)
        signal.signal(signal.SIGCHLD, lambda signum, frame: None)
        for name in PRELOAD.split():
            importlib.import_module(name)
        for name in OPTIONAL_PRELOAD:
            with contextlib.suppress(ImportError):
                importlib.import_module(name)
        # what this server measures: "tracer", in-process runs under coverage.py; "probes", split runs'
        # executed lines (line_probes.py: slipcover only; coverage.py's analysis of them is the host's);
        # neither is loaded where nothing is measured
        self.coverage = prepared_coverage(config["work_dir"]) if config.get("coverage") == "tracer" else None
        if config.get("coverage") == "probes":
            prepared_probes()
        self.confine = confine.Confinement(self.native)
        self.folders = ScratchFolders(config, self.native, self.confine)
        self.folders.start()  # builds the Landlock ruleset on this run's folders
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
        self.base_vm = address_space()

    def start(self) -> None:
        """Split in two before any job arrives: this process becomes the zygote (zygote.py), which
        forks every process that runs a program; its child becomes the server, which serves the host."""
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
        if self.filtered:  # no run signals the server, the zygote or what started them, nor everyone at once
            self.confine.install_filter(self.seccomp.protect(machine, (pid, self.pid, os.getppid())))
        self.confine.drop_capabilities()  # the zygote only forks: the server alone keeps CAP_SYS_ADMIN
        zygote = zygote_module.Zygote(pid, zygote_end, functools.partial(become_run, self), self.native)
        os.close(signal.set_wakeup_fd(-1))  # its loop reads SIGCHLD from a signalfd
        os.close(self.wake_r)
        zygote.loop()

    def serve(self) -> None:
        """Answer jobs until the host closes the channel (or dies), then kill what is left."""
        write_message(self.ctl_out, {"ready": True})
        try:
            while (job := read_message(self.ctl_in)) is not None:
                try:
                    result = self.execute(job)
                except HostGone:
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
                for path in self.folders.folders:
                    shutil.rmtree(path, ignore_errors=True)

    def execute(self, job: dict) -> dict:
        if job.get("split"):
            return self._execute_split(job) if job["kind"] == "python" else self._execute_split_command(job)
        limits = job["limits"]
        stdin_fd = self.folders.stdin(job.pop("stdin", None))  # the zygote gets none of the run's texts
        texts = {}
        if job["kind"] == "python":  # the tests stay off the disk, except where coverage reads them
            self.folders.no_exec()
            text = job["program"] + "\n" + job["tests"] if job.get("coverage") else job["program"]
            write_file(os.path.join(self.folders.work_dir, "main.py"), text)
            texts = {"program": job.pop("program"), "tests": job.pop("tests")}
        else:
            for name, text in job.pop("files").items():
                write_file(inside(self.folders.work_dir, name), text)
        pipes = {name: os.pipe() for name in ("stdout", "stderr", "report", "key", "data", "channel")}
        channel_token = os.urandom(16).hex().encode()  # the child's writer holds it
        job["channel_token"] = channel_token.decode()
        fds = {name: (r if name == "key" else w) for name, (r, w) in pipes.items()}
        fds["stdin"] = stdin_fd
        if texts:
            fds["payload"] = zygote_module.payload_fd(texts)
        if self.folders.ruleset is not None:
            fds["ruleset"] = os.dup(self.folders.ruleset)
        start = time.monotonic()
        job["protect"] = self.trusted_pids()
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
            pipes["report"][0]: REPORT_CAP,
            pipes["data"][0]: DATA_CAP,
            pipes["channel"][0]: DATA_CAP,
        }
        outputs = {pipes["stdout"][0], pipes["stderr"][0]}  # past their cap the run stops
        stop = self._supervise(streams, caps, outputs, start + limits["timeout_s"])
        duration = time.monotonic() - start
        self._kill_all()
        stop = self._close_streams(streams, caps, outputs, stop)
        out, err, report, data, channel = (bytes(streams[pipes[name][0]]) for name in names)
        status, exit_code, detail = verdict(job, stop, self.child_status, nonce, report, out)
        result = self._result(status, exit_code, out, err, duration, detail)
        if job["kind"] == "python":
            result["mode"] = "in_process"
        if job.get("coverage") and status in ("passed", "passed_unverified"):
            result["coverage"] = parse_coverage(data)
        if job.get("channel"):
            result["channel"] = records(channel, channel_token)
        return result

    def _result(self, status: str, exit_code, out: bytes, err: bytes, duration: float, detail: str) -> dict:
        """The reply for a finished run, after the scratch folders were renewed for the next one."""
        restart = False
        try:
            self.folders.after_run(self.own_ipc, self.filtered)
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
            "fresh_scratch": bool(self.folders.fresh),
        }


def _load_native(path: str) -> types.ModuleType:
    """The ``_editforge_sys`` module the host compiled (core/sandbox/native.py), from its path."""
    import importlib.machinery
    import importlib.util

    loader = importlib.machinery.ExtensionFileLoader("_editforge_sys", path)
    # never None: a spec for a path with an explicit loader
    spec = importlib.util.spec_from_file_location("_editforge_sys", path, loader=loader)
    module = importlib.util.module_from_spec(cast(importlib.machinery.ModuleSpec, spec))
    loader.exec_module(module)
    return module


def _loopback_up() -> None:
    """Bring up ``lo`` in our new network namespace, as bwrap does: localhost works, nothing else."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        ifreq = fcntl.ioctl(sock, SIOCGIFFLAGS, struct.pack("16sH22x", b"lo", 0))
        flags = struct.unpack("16sH22x", ifreq)[1]
        fcntl.ioctl(sock, SIOCSIFFLAGS, struct.pack("16sH22x", b"lo", flags | IFF_UP))


def main() -> None:
    ctl_in, ctl_out = os.dup(0), os.dup(1)
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 0)  # stray reads or prints in the server must not touch the protocol
    os.dup2(null, 1)
    os.close(null)
    Server(json.loads(sys.argv[1]), ctl_in, ctl_out).start()


if __name__ == "__main__":
    main()
