"""The Sandbox interface and its fork-server implementation for both backends."""

from __future__ import annotations

import itertools
import os
import weakref
from collections.abc import Iterator, Mapping, Sequence
from typing import Protocol

from core.sandbox import cgroup
from core.sandbox.bwrap import BwrapLauncher, bwrap_available
from core.sandbox.limits import SandboxLimits
from core.sandbox.local import LocalLauncher, can_unshare_network
from core.sandbox.native import landlock_abi
from core.sandbox.pool import WorkerPool
from core.sandbox.result import ExecutionResult
from core.sandbox.seccomp import supported as seccomp_supported
from core.sandbox.worker import Launcher, Profile, Worker

BACKENDS = ("auto", "bwrap", "local")


class Sandbox(Protocol):
    """Runs untrusted programs; see ForkServerSandbox for the semantics and guarantees."""

    backend: str
    strict: bool

    def run(
        self,
        program: str,
        tests: str = "",
        *,
        language: str = "python",
        stdin: str | None = None,
        limits: SandboxLimits | None = None,
        coverage: bool = False,
        candidate_file: str | None = None,
        unverified: bool = False,
        channel: bool = False,
        split: bool = False,
        helpers: str = "",
        modules: Sequence[str] = (),
    ) -> ExecutionResult: ...

    def run_many(
        self,
        jobs: Sequence[tuple[str, str]],
        *,
        workers: int | None = None,
        limits: SandboxLimits | None = None,
        coverage: bool | Sequence[bool] = False,
        candidate_file: str | None = None,
        unverified: bool | Sequence[bool] = False,
        channel: bool = False,
        split: bool | Sequence[bool] = False,
        helpers: str | Sequence[str] = "",
        modules: Sequence[Sequence[str]] | None = None,
    ) -> list[ExecutionResult]: ...

    def run_command(
        self,
        argv: list[str],
        files: Mapping[str, str] | None = None,
        *,
        limits: SandboxLimits | None = None,
        pass_marker: str | None = None,
        stdin: str | None = None,
        run_token: bool = False,
    ) -> ExecutionResult: ...

    def run_split_command(
        self,
        argv: list[str],
        files: Mapping[str, str],
        trusted_argv: list[str],
        trusted_input: str,
        *,
        limits: SandboxLimits | None = None,
        stdin: str | None = None,
    ) -> ExecutionResult: ...

    def split_commands(self) -> bool: ...

    def close(self) -> None: ...


class ForkServerSandbox:
    """Executes untrusted programs in per-worker fork servers (bwrap or local backend).

    ``run`` executes ``program`` then ``tests`` in one fresh interpreter process (the
    HumanEval/CanItEdit convention: plain asserts or ``check(candidate)`` calls after the
    program). It passes only if execution reached the end of ``tests`` and the harness then
    reported the run's private nonce: exit code 0 alone never passes. With ``coverage=True`` a
    passing result carries the line coverage of main.py (program + "\n" + tests) as coverage.py's
    analysis reports it (``ExecutionResult.coverage``): a split run measures it in the verdict run
    itself (the program's lines from probes in its process, the tests' traced in the trusted one:
    line_probes.py; ``helpers`` run on the trusted side, so a program's copy of one is not
    measured), a run in process under coverage.py's tracer. ``run_command`` runs
    any command line (compiled languages, shell scripts) in the same isolation; it passes on
    exit code 0, and, if asked, ``pass_marker`` in stdout and the run token written back;
    ``run_split_command`` runs a command's tests in a trusted command of their own.

    Protects against (both backends): hangs and long C calls (parent-enforced wall clock),
    memory and file-size bombs (rlimits; cgroups where available), unbounded output (capped
    while reading), stray processes (killed at the end of every run, even after setsid()),
    stdin reads (EOF), exit-code and printed-marker tricks, the interpreter's introspection
    routes to the nonce or around the tests (gc object lists, tracing hooks, /proc descriptors
    and memory; see harness.py and run_process.py), leaked host environment variables, and a forged reply from
    the server (host and server talk over a socket pair, which /proc cannot reopen). bwrap adds: no
    host file writes, only the system folders readable (no /root, /home, /etc/shadow), a
    read-only /dev, no network, processes invisible to the host, an unkillable server, SysV
    IPC removed after every run. What neither protects is listed in docs/sandbox.md, notably
    code with a raw memory primitive (ctypes) and kernel exploits.

    Runs go to ``workers`` servers (default: one per CPU) started at construction; use it as
    a context manager or call ``close()``. ``pin_cpus``: see `worker_cpus`.
    """

    def __init__(
        self,
        launcher: Launcher,
        limits: SandboxLimits | None = None,
        workers: int | None = None,
        strict: bool = True,
        measured_split: bool = False,
        pin_cpus: bool = True,
    ) -> None:
        self.backend = launcher.backend
        self.python: str | None = getattr(launcher, "python", None)  # the interpreter Python runs use
        self.strict = strict
        self.limits = limits or SandboxLimits()
        self._cgroups = tuple(sorted(cgroup.available()))
        use_cgroup = bool(self._cgroups)
        workers = workers or os.cpu_count() or 1
        warm = Profile.of(self.limits, {"split": True, "coverage": measured_split})
        cpus: Iterator[int | None] = worker_cpus(workers) if pin_cpus else itertools.repeat(None)
        self._pool = WorkerPool(lambda: Worker(launcher, use_cgroup, next(cpus)), workers, warm)
        self._finalizer = weakref.finalize(self, self._pool.close)

    def run(
        self,
        program: str,
        tests: str = "",
        *,
        language: str = "python",
        stdin: str | None = None,
        limits: SandboxLimits | None = None,
        coverage: bool = False,
        candidate_file: str | None = None,
        unverified: bool = False,
        channel: bool = False,
        split: bool = False,
        helpers: str = "",
        modules: Sequence[str] = (),
    ) -> ExecutionResult:
        """Run ``program`` followed by ``tests`` in one interpreter; see the class docstring.

        ``split=True``: the tests run in a trusted process of their own that runs no candidate code,
        and reach the program's functions and objects through a plain-data protocol (docs/sandbox.md);
        ``helpers`` is benchmark text the tests call (HumanEvalFix's ``poly``), run on the trusted
        side instead of taken from the program; ``modules``: top-level modules the benchmark's own
        text imports, which the trusted side imports itself when the program names them (besides the
        standard library's). The result's ``mode`` says which way it ran.

        ``candidate_file``: the file name under which the untrusted code is compiled, when the
        program is a trusted wrapper that compiles the candidate itself (None: the program is the
        candidate); the audit hook refuses frame and code access to that code. ``unverified``:
        the declared unverified mode (modules with raw memory access may be imported; a pass is
        ``passed_unverified``), for problems that need numpy or ctypes. ``channel``: a wrapper
        program reports records through a pipe of its own (it takes the writer with
        ``builtins.__dict__.pop("__editforge_report__")`` before the candidate runs); they come back
        in ``ExecutionResult.channel``."""
        if language != "python":
            raise ValueError(
                f"run() executes python; for {language!r} build a command line and use run_command()"
            )
        job = _python_job(
            program, tests, stdin, coverage, candidate_file, unverified or not self.strict, channel
        )
        if split:
            job.update(split=True, helpers=helpers, modules=list(modules))
        return self._pool.submit(job, limits or self.limits).result()

    def run_many(
        self,
        jobs: Sequence[tuple[str, str]],
        *,
        workers: int | None = None,
        limits: SandboxLimits | None = None,
        coverage: bool | Sequence[bool] = False,
        candidate_file: str | None = None,
        unverified: bool | Sequence[bool] = False,
        channel: bool = False,
        split: bool | Sequence[bool] = False,
        helpers: str | Sequence[str] = "",
        modules: Sequence[Sequence[str]] | None = None,
    ) -> list[ExecutionResult]:
        """Run (program, tests) pairs in parallel, at most ``workers`` at a time; results in job order.
        ``coverage``, ``unverified``, ``split`` and ``helpers``: one value for all jobs, or one per
        job; ``modules``: one list per job (see ``run``)."""
        concurrency = workers or self._pool.size
        measured = _per_job(coverage, len(jobs), "coverage")
        flags = _per_job(unverified, len(jobs), "unverified")
        splits = _per_job(split, len(jobs), "split")
        texts = (
            [helpers] * len(jobs)
            if isinstance(helpers, str)
            else _per_job(list(helpers), len(jobs), "helpers")
        )
        names = [list(m) for m in modules] if modules is not None else [[] for _ in jobs]
        if len(names) != len(jobs):
            raise ValueError(f"{len(names)} modules values for {len(jobs)} jobs")
        messages = []
        for (program, tests), measure, flag, split_run, helper, imported in zip(
            jobs, measured, flags, splits, texts, names, strict=True
        ):
            job = _python_job(program, tests, None, measure, candidate_file, flag or not self.strict, channel)
            if split_run:
                job.update(split=True, helpers=helper, modules=imported)
            messages.append(job)
        return self._pool.map(messages, limits or self.limits, concurrency)

    def run_command(
        self,
        argv: list[str],
        files: Mapping[str, str] | None = None,
        *,
        limits: SandboxLimits | None = None,
        pass_marker: str | None = None,
        stdin: str | None = None,
        run_token: bool = False,
    ) -> ExecutionResult:
        """Write ``files`` into the work folder, run ``argv`` there; pass = exit 0 (+ marker in stdout).

        ``run_token``: the run also passes only if it writes back, on descriptor 4, the random token
        it can read from descriptor 3 (a pipe the server writes once and closes). A test program
        does that after its last test, so an exit with code 0 before the tests end (an exit call,
        an exit hook, a signal or panic handler that exits) fails. The program shares its process
        with its tests, so code written against this protocol can still forge the token
        (docs/sandbox.md); keep descriptors 3 and 4 from steps that run no tests (``3<&- 4>&-``)."""
        if not argv:
            raise ValueError("run_command() needs a non-empty argv")
        _check_names(files or {})
        job = {
            "kind": "command",
            "argv": list(argv),
            "files": dict(files or {}),
            "stdin": stdin,
            "pass_marker": pass_marker,
            "run_token": run_token,
        }
        return self._pool.submit(job, limits or self.limits).result()

    def run_split_command(
        self,
        argv: list[str],
        files: Mapping[str, str],
        trusted_argv: list[str],
        trusted_input: str,
        *,
        limits: SandboxLimits | None = None,
        stdin: str | None = None,
    ) -> ExecutionResult:
        """Run a command's tests apart from its program (JavaScript's split runs, docs/sandbox.md).

        ``argv`` (the candidate) runs in the work folder with ``files``, reading requests on
        descriptor 3 and answering on 4; ``trusted_argv`` runs from ``/`` with ``trusted_input`` on its
        stdin (never on a disk the candidate sees), the other ends of that channel on 3 and 4, and
        writes its outcome, one JSON object ``{"passed", "tests_passed", "tests_total", "delegated",
        "error"}``, to descriptor 5, which the candidate never holds. The verdict is that outcome
        alone. The candidate runs under Landlock, so it can neither read nor signal the trusted
        process; where this kernel has no Landlock the result is an error (``split_commands()``)."""
        if not argv or not trusted_argv:
            raise ValueError("run_split_command() needs the candidate's and the trusted side's command lines")
        _check_names(files)
        job = {
            "kind": "command",
            "split": True,
            "argv": list(argv),
            "files": dict(files),
            "trusted_argv": list(trusted_argv),
            "trusted_input": trusted_input,
            "stdin": stdin,
        }
        return self._pool.submit(job, limits or self.limits).result()

    @staticmethod
    def split_commands() -> bool:
        """Whether commands can run split here (the candidate's confinement needs Landlock)."""
        return landlock_abi() >= 1

    def guards(self) -> dict[str, str]:
        """What this sandbox enforces here, by concern (for logs, reports and tests)."""
        bwrap = self.backend == "bwrap"
        if "pids" in self._cgroups:
            processes = "cgroup pids.max per worker"
        elif os.geteuid() != 0:
            processes = "RLIMIT_NPROC"
        else:
            processes = "none before the deadline (root ignores RLIMIT_NPROC; no usable pids cgroup)"
        memory = "RLIMIT_AS per process"
        if "memory" in self._cgroups:
            memory += " + memory cgroup per worker"
        cpu = f"cgroup cpu quota of {self.limits.cpus:g} CPU per worker" if "cpu" in self._cgroups else "none"
        if self.limits.network:
            network = "allowed (limits.network)"
        elif bwrap or can_unshare_network():
            network = "network namespace"
        else:
            network = "NOT isolated (cannot create a network namespace here)"
        if bwrap:
            cleanup, files = (
                "PID namespace, the zygote is PID 1 and kills every process of a run",
                "system folders read-only (no /root, /home, /etc/shadow), read-only /dev, "
                "fresh tmpfs /tmp and /dev/shm for every run (noexec for Python runs)",
            )
        else:
            cleanup, files = (
                "the zygote, a subreaper, kills every process of a run",
                "no namespace: commands write wherever the user can (Python runs: see confinement)",
            )
        abi = landlock_abi()
        confinement = f"Landlock ABI {abi}: Python runs open only system, interpreter and scratch folders"
        syscalls = (
            "seccomp: no keyrings, no io_uring; sockets AF_UNIX, and AF_INET/AF_INET6 inside a private "
            "network namespace" + (" (+ netlink: limits.network)" if self.limits.network else "")
            if seccomp_supported(os.uname().machine)
            else "none (no seccomp filter for this machine's architecture)"
        )
        return {
            "processes": processes,
            "memory": memory,
            "cpu": cpu,
            "network": network,
            "syscalls": syscalls,
            "cleanup": cleanup,
            "filesystem": files,
            "confinement": confinement
            if abi
            else "none (no Landlock in this kernel): audit-hook path checks only",
        }

    def close(self) -> None:
        """Stop every server; queued runs are cancelled, runs in flight finish first."""
        self._finalizer()

    def __enter__(self) -> ForkServerSandbox:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def make_sandbox(
    backend: str = "auto",
    limits: SandboxLimits | None = None,
    workers: int | None = None,
    python: str | None = None,
    strict: bool = True,
    read_only: Sequence[str] = (),
    measured_split: bool = False,
    pin_cpus: bool = True,
) -> Sandbox:
    """``"auto"``: bwrap where it works (probed once), else local; ``"bwrap"`` raises SandboxUnavailable
    with the reason and the fix when it cannot run here. ``python``: the interpreter Python runs
    use (e.g. a virtualenv with another version of a library installed); its environment is
    readable inside the sandbox, nothing else changes. ``strict=False`` runs every Python job in
    the declared unverified mode (see ``ForkServerSandbox.run``). ``read_only``: host folders that
    commands need besides the system folders (a toolchain under ~/.rustup, prebuilt libraries),
    which bwrap shows read-only; the local backend shows the whole host anyway. ``measured_split``:
    most runs will be split runs measured for coverage, so the servers start ready for them.
    ``pin_cpus``: see `worker_cpus`."""
    if backend not in BACKENDS:
        raise ValueError(f"unknown sandbox backend {backend!r}; choose one of {BACKENDS}")
    if backend == "auto":
        backend = "bwrap" if bwrap_available() else "local"
    launcher = BwrapLauncher(python, read_only) if backend == "bwrap" else LocalLauncher(python)
    return ForkServerSandbox(launcher, limits, workers, strict, measured_split, pin_cpus)


def worker_cpus(workers: int) -> Iterator[int | None]:
    """The CPU of each worker in turn, round robin over the CPUs this process may use, where the
    pool has at least one worker per CPU; None (any CPU) for a smaller pool.

    A split run is a conversation: each of the tests' requests wakes the candidate's process and
    each answer wakes the trusted one, about 22 round trips per HumanEvalFix problem. A request
    took 66 microseconds when the two processes sat on different CPUs of a 2-CPU VM (waking a
    process on another CPU takes an inter-processor interrupt), 21 on one CPU. Pinning a worker's server, and so every process of its runs, to one
    CPU keeps each conversation on one CPU (docs/sandbox.md, Performance). A smaller pool is left
    unpinned: several processes with small pools (one per training rank) would all pin to the
    first CPUs and leave the rest idle; a pool of one worker per CPU spreads evenly whatever
    other pools do."""
    cpus = sorted(os.sched_getaffinity(0))
    if workers < len(cpus):
        return itertools.repeat(None)
    return itertools.cycle(cpus)


def _check_names(files: Mapping[str, str]) -> None:
    for name in files:
        parts = name.replace("\\", "/").split("/")
        if not name or name.startswith("/") or ".." in parts:
            raise ValueError(f"file name {name!r} must be a relative path inside the work folder")


def _per_job(value, count: int, name: str) -> list:
    values = [value] * count if isinstance(value, bool) else list(value)
    if len(values) != count:
        raise ValueError(f"{len(values)} {name} values for {count} jobs")
    return values


def _python_job(
    program: str,
    tests: str,
    stdin: str | None,
    coverage: bool,
    candidate_file: str | None = None,
    unverified: bool = False,
    channel: bool = False,
) -> dict:
    return {
        "unverified": unverified,
        "channel": channel,
        "kind": "python",
        "program": program,
        "tests": tests,
        "stdin": stdin,
        "coverage": coverage,
        "candidate_file": candidate_file,
    }
