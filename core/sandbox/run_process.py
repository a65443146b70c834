"""What a forked run's process does before the program or command starts: the process a run is.

What it guarantees: every run's process starts a session of its own, dies with the zygote, has
exactly the descriptors its kind of run needs (stdio, and per kind the report, key, data or channel
pipes; nothing of the server's), its rlimits set hard (address space on top of what the preloaded
modules reserved, file size, no core files, no message queues, a process count), no capabilities,
and, for Python runs and split candidates, the Landlock ruleset of this run's folders. The seccomp
filter it inherits from the server. Standard library only.
"""

from __future__ import annotations

import _signal  # signal.signal without its enum conversions, which touch dozens of the zygote's pages
import builtins
import fcntl
import os
import resource
import signal
from typing import NoReturn

try:  # in the sandbox the harness loads these files from its own folder
    import split_candidate
    from python_runner import flush_stdio, main_module, run_python
    from report_channel import channel_writer
    from zygote import read_payload
except ImportError:
    from core.sandbox import split_candidate
    from core.sandbox.python_runner import flush_stdio, main_module, run_python
    from core.sandbox.report_channel import channel_writer
    from core.sandbox.zygote import read_payload

PR_SET_PDEATHSIG = 1
STOP_SIGNALS = (signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2)
# The same as plain ints: each page a forked run's process writes costs it a copy-on-write fault.
_DEFAULT_SIGNALS = tuple(int(sig) for sig in (signal.SIGCHLD, *STOP_SIGNALS))
_SIGINT = int(signal.SIGINT)


def become_run(server, job: dict, fds: dict[str, int]) -> NoReturn:
    """Become a run's process, in a fork of the zygote (``fds``: the descriptors the server sent,
    by name); never returns."""
    try:
        server.native.prctl_set(PR_SET_PDEATHSIG, signal.SIGKILL)  # dies with the zygote
        if os.getppid() != server.pid:  # the zygote died before the line above
            os._exit(70)
        os.setsid()
        for sig in _DEFAULT_SIGNALS:  # what a fresh interpreter starts with
            _signal.signal(sig, _signal.SIG_DFL)
        _signal.signal(_SIGINT, _signal.default_int_handler)
        os.dup2(fds["stdin"], 0)
        os.dup2(fds["stdout"], 1)
        os.dup2(fds["stderr"], 2)
        if "payload" in fds:  # the run's own texts, read by this process alone
            job.update(read_payload(fds.pop("payload")))
        ruleset = fds.get("ruleset")
        if job["kind"] == "candidate" or job.get("split"):  # split runs: the trusted side's pipes only
            keep = {fd for fd in (fds["read"], fds["write"], ruleset) if fd is not None}
        else:
            report_fd, key_fd, data_fd = fds["report"], fds["key"], fds["data"]
            channel_fd = fds["channel"] if job.get("channel") else None
            keep = {fd for fd in (report_fd, key_fd, data_fd, channel_fd, ruleset) if fd is not None}
        close_fds_except(keep)
        set_rlimits(job["limits"], server.nproc_base, server.base_vm)
        os.chdir(server.folders.work_dir)
        server.confine.drop_capabilities()  # no borrowing the server's descriptors, no ptrace, no mounts
        if job.get("protect") and server.filtered:  # the trusted processes of this moment, out of reach
            server.confine.install_filter(server.seccomp.protect(os.uname().machine, tuple(job["protect"])))
        if (job["kind"] in ("python", "candidate") or job.get("split")) and ruleset is not None:
            # no /proc/self/mem, only the allowed folders; a split candidate cannot ptrace, read the
            # memory or borrow the descriptors of the trusted process, which is outside its domain
            server.confine.restrict(ruleset)
            os.close(ruleset)
        main_path = os.path.join(server.folders.work_dir, "main.py")
        if job["kind"] == "candidate":
            main_module(main_path)
            split_candidate.serve(
                fds["read"], fds["write"], job.pop("program"), main_path, bool(job.get("probes"))
            )
            flush_stdio()
            os._exit(0)
        if job["kind"] == "python":
            collector = server.coverage if job.get("coverage") else None
            writable = tuple(
                os.path.realpath(d).rstrip("/") + "/"
                for d in (*server.folders.folders, server.folders.work_dir)
            )
            if channel_fd is not None:  # the wrapper program takes it (and so removes it) first
                builtins.__editforge_report__ = channel_writer(  # type: ignore[attr-defined]
                    channel_fd, job["channel_token"].encode()
                )
            guard_forks = server.native.guard_forks
            run_python(job, main_path, collector, key_fd, report_fd, data_fd, writable, guard_forks)
        if job.get("split"):  # a split command's candidate: the channel at 3 (in) and 4 (out)
            place_descriptors({3: fds["read"], 4: fds["write"]})
        elif job.get("run_token"):  # the tests read the token from 3 and write it back to 4
            place_descriptors({3: key_fd, 4: report_fd})
        exec_command(job["argv"])
    except BaseException as exc:  # the harness failed in the child: never return to the zygote's loop
        os.write(2, f"sandbox harness: {exc!r}\n".encode())
    os._exit(70)


def exec_command(argv: list[str]) -> NoReturn:
    for sig in (signal.SIGPIPE, signal.SIGXFSZ):  # Python ignores these; other programs expect defaults
        signal.signal(sig, signal.SIG_DFL)
    try:
        os.execvp(argv[0], argv)
    except OSError as exc:
        os.write(2, f"cannot execute {argv[0]!r}: {exc}\n".encode())
    os._exit(127)


def address_space() -> int:
    """Bytes of virtual memory this process has mapped (what RLIMIT_AS counts)."""
    with open("/proc/self/statm") as f:
        return os.sysconf("SC_PAGE_SIZE") * int(f.read().split()[0])


def set_rlimits(limits: dict, nproc_base: int, base_vm: int) -> None:
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


def place_descriptors(fds: dict[int, int]) -> None:
    """Each descriptor of ``fds`` at its number, inherited across exec (copied high first, since one
    may sit where another goes; the originals stay close-on-exec)."""
    copies = {number: fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 10) for number, fd in fds.items()}
    for number, fd in copies.items():
        os.dup2(fd, number)
        os.close(fd)


def close_fds_except(keep: set[int]) -> None:
    """Close every descriptor from 3 up but ``keep`` (never ``closerange(low, high)`` with high < low:
    CPython's close_range then closes everything from ``low``)."""
    low = 3
    for fd in sorted(fd for fd in keep if fd >= 3):
        os.closerange(low, fd)
        low = fd + 1
    os.closerange(low, os.sysconf("SC_OPEN_MAX"))
