"""Host side of one worker: a fork server (see harness.py), restarted whenever it dies."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass, replace
from typing import IO, Protocol, cast

from core.sandbox.cgroup import Cgroup
from core.sandbox.host_protocol import read_message, write_message
from core.sandbox.limits import SandboxLimits
from core.sandbox.line_probes import is_line_list, measured_coverage
from core.sandbox.result import MODES, PASSING, STATUSES, ExecutionResult

HARNESS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "harness.py")
START_TIMEOUT_S = 60.0
# The server enforces each deadline itself; the host waits this much longer before it
# assumes the server is stuck (or stopped by the program) and kills the whole worker.
GRACE_S = 5.0
STOP_WAIT_S = 0.5  # how long a server may take to clean up and exit once its channel closes
# What the server and bwrap may use besides the program and the tmpfs folders (memory cgroup).
SERVER_MEMORY_MB = 128


class SandboxUnavailable(RuntimeError):
    """The requested backend cannot run here; the message says why and what to do."""


@dataclass(frozen=True)
class Profile:
    """Settings fixed for a server's lifetime; a job that needs others restarts the server."""

    network: bool
    disk_mb: int
    # What the server pre-imports to measure coverage: "tracer" (coverage.py's collector, for
    # in-process runs), "probes" (slipcover, for split runs: line_probes.py) or "" (nothing). Each
    # makes every fork slower, and a probe module must never be preloaded where a program is judged
    # in its own process, so only the jobs that measure get such a server.
    coverage: str = ""

    @classmethod
    def of(cls, limits: SandboxLimits, job: dict | None = None) -> Profile:
        job = job or {}
        coverage = ("probes" if job.get("split") else "tracer") if job.get("coverage") else ""
        return cls(limits.network, limits.disk_mb, coverage)

    def serves(self, wanted: Profile, job: dict) -> bool:
        """Whether a server started with this profile may run ``job`` (which wants ``wanted``): a
        probes server runs every split Python job (no program it runs is judged in its own process),
        so a benchmark whose problems run split, some measured and some not, keeps its servers."""
        if self == wanted:
            return True
        split_python = bool(job.get("split")) and job.get("kind") == "python"
        return split_python and self.coverage == "probes" and replace(wanted, coverage="probes") == self


@dataclass(frozen=True)
class ServerSpec:
    """How to start one server: its command line, environment and a host folder to delete after."""

    argv: list[str]
    env: dict[str, str]
    host_dir: str | None = None


class Launcher(Protocol):
    backend: str

    def spec(self, profile: Profile, cpu: int | None = None) -> ServerSpec: ...


def sandbox_env(home: str, tmp: str) -> dict[str, str]:
    """The whole environment a program sees: no host variables (API keys live there)."""
    return {
        "PATH": os.environ.get("PATH", "/usr/local/bin:/usr/bin:/bin"),
        "HOME": home,
        "TMPDIR": tmp,
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "PYTHONDONTWRITEBYTECODE": "1",
        # one thread per BLAS/OpenMP pool: parallel workers already fill the cores
        "OMP_NUM_THREADS": "1",
        "OPENBLAS_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
    }


class Worker:
    """Owns one server process and its cgroup; used by exactly one pool thread.

    The server must be started by a long-lived thread: bwrap's --die-with-parent fires when
    the *thread* that started it exits. A local server instead watches its channel: when the
    host closes it (or dies), the server kills what is left of its run and exits.
    """

    def __init__(self, launcher: Launcher, use_cgroup: bool, cpu: int | None = None) -> None:
        self._launcher = launcher
        self._use_cgroup = use_cgroup
        self._cpu = cpu  # the CPU its server and every process of its runs stay on (None: any)
        self._cgroup: Cgroup | None = None
        self._proc: subprocess.Popen | None = None
        self._channel: socket.socket | None = None
        self._spec: ServerSpec | None = None
        self._profile: Profile | None = None
        self._stderr: IO[bytes] | None = None

    def start(self, profile: Profile) -> None:
        """Start a server for ``profile`` and wait until it is ready; SandboxUnavailable if it fails."""
        self.stop()
        if self._use_cgroup and self._cgroup is None:
            self._cgroup = Cgroup.create()
        self._spec = self._launcher.spec(profile, self._cpu)
        self._profile = profile
        argv = self._cgroup.wrap(self._spec.argv) if self._cgroup else self._spec.argv
        self._stderr = tempfile.TemporaryFile()  # noqa: SIM115 (lives as long as the server; closed in stop())
        # A socket pair, not pipes: /proc/<pid>/fd cannot reopen a socket, so no program of the
        # same user can write a forged reply into our end (a pipe there opens for writing).
        self._channel, server_end = socket.socketpair()
        with server_end:
            self._proc = subprocess.Popen(
                argv,
                stdin=server_end.fileno(),
                stdout=server_end.fileno(),
                stderr=self._stderr,
                env=self._spec.env,
                start_new_session=True,  # its own process group: stop() kills it and nothing of ours
            )
        try:
            ready = read_message(self._channel.fileno(), time.monotonic() + START_TIMEOUT_S)
        except (OSError, EOFError, TimeoutError, ValueError) as exc:
            ready = {"error": repr(exc)}
        if not ready or not ready.get("ready"):
            reason = self._server_stderr() or (ready or {}).get("error", "it exited without a word")
            self.stop()
            raise SandboxUnavailable(f"the {self._launcher.backend} sandbox server did not start: {reason}")

    def execute(self, job: dict, limits: SandboxLimits) -> ExecutionResult:
        """Run one job (see harness.Server.execute) under ``limits``; never raises for the program's sake."""
        profile = Profile.of(limits, job)
        # a running server has its profile, channel and stderr file (start() sets them with _proc)
        served = cast(Profile, self._profile)
        if self._proc is None or self._proc.poll() is not None or not served.serves(profile, job):
            try:
                self.start(profile)
            except SandboxUnavailable as exc:
                return ExecutionResult.error(str(exc))
        if self._cgroup:
            disk = 2 * profile.disk_mb if self._launcher.backend == "bwrap" else 0
            memory_mb = limits.memory_mb + disk + SERVER_MEMORY_MB
            try:
                # + bwrap and the server
                self._cgroup.set_limits(limits.max_processes + 2, memory_mb << 20, limits.cpus)
            except OSError as exc:
                return ExecutionResult.error(f"could not set the worker's cgroup limits: {exc}")
        oom_before = self._cgroup.oom_kills() if self._cgroup else 0
        started = time.monotonic()
        channel = cast(socket.socket, self._channel)
        try:
            write_message(channel.fileno(), {**job, "limits": limits.to_dict()})
            # JSON escapes at most 6 bytes per captured byte; 2 streams; 1 MiB for the rest
            bound = 12 * limits.max_output_bytes + (1 << 20)
            reply = read_message(channel.fileno(), started + limits.timeout_s + GRACE_S, bound)
        except TimeoutError:
            self.stop()
            detail = "the sandbox server missed the deadline; its worker was killed and restarts"
            return ExecutionResult("timeout", False, None, "", "", time.monotonic() - started, detail)
        except (OSError, EOFError, ValueError):
            reply = None
        if reply is None:
            code = self.stop()
            detail = f"the sandbox server died mid-run (exit status {code}); the program may have killed it"
            result = ExecutionResult("killed", False, None, "", "", time.monotonic() - started, detail)
        else:
            result = _to_result(reply)
            if reply.get("restart"):
                self.stop()
            if result.coverage is not None and "executed" in result.coverage:
                result = _analysed(result, job)
        if result.status in ("killed", "failed") and self._cgroup and self._cgroup.oom_kills() > oom_before:
            detail = (
                f"OOM kill in the worker's memory cgroup ({limits.memory_mb} MB + overhead); {result.detail}"
            )
            result = replace(result, status="memory", detail=detail)
        return result

    def stop(self) -> int | None:
        """Stop the server and whatever is left of its runs; returns its exit status.

        Closing its channel first lets the server kill and reap its runs' processes itself
        (the local backend has no namespace that would); SIGKILL follows if it does not exit.
        """
        if self._proc is None:
            return None
        # start() sets the channel and the stderr file before _proc
        channel, stderr = cast(socket.socket, self._channel), cast(IO[bytes], self._stderr)
        if self._proc.poll() is None:
            with contextlib.suppress(OSError):
                channel.close()
            with contextlib.suppress(subprocess.TimeoutExpired):
                self._proc.wait(timeout=STOP_WAIT_S)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self._proc.pid, signal.SIGKILL)
        code = self._proc.wait()
        for stream in (channel, stderr):
            with contextlib.suppress(OSError):
                stream.close()
        if self._cgroup:
            self._cgroup.kill_all()
        if self._spec and self._spec.host_dir:
            _remove_tree(self._spec.host_dir)
        self._proc = self._spec = self._stderr = self._channel = None
        return code

    def close(self) -> None:
        self.stop()
        if self._cgroup:
            self._cgroup.remove()
            self._cgroup = None

    def _server_stderr(self) -> str:
        stderr = cast(IO[bytes], self._stderr)  # start() opened it
        stderr.seek(0)
        return stderr.read()[-2000:].decode("utf-8", errors="replace").strip()


def _remove_tree(path: str) -> None:
    """Delete a local server's folder, however deep a program nested it (rm needs no recursion limit)."""
    try:
        shutil.rmtree(path, ignore_errors=True)
    except RecursionError:
        subprocess.run(["rm", "-rf", "--", path], check=False)


def _to_result(reply: dict) -> ExecutionResult:
    """Check the server's reply field by field: it comes from inside the sandbox."""
    try:
        status, exit_code = reply["status"], reply.get("exit_code")
        ok = (
            status in STATUSES
            and (exit_code is None or isinstance(exit_code, int))
            and all(isinstance(reply.get(k, ""), str) for k in ("stdout", "stderr", "detail", "channel"))
            and isinstance(reply.get("duration_s", 0.0), (int, float))
        )
    except (KeyError, TypeError):
        ok = False
    coverage = reply.get("coverage")
    if coverage is not None and not _is_coverage(coverage):
        ok = False
    counts = {k: reply.get(k) for k in ("tests_passed", "tests_total", "delegated_checks")}
    if not all(v is None or type(v) is int for v in counts.values()) or reply.get("mode") not in MODES:
        ok = False
    if not ok:
        return ExecutionResult.error(f"malformed reply from the sandbox server: {str(reply)[:200]}")
    return ExecutionResult(
        status,
        status in PASSING,
        exit_code,
        reply.get("stdout", ""),
        reply.get("stderr", ""),
        float(reply.get("duration_s", 0.0)),
        reply.get("detail", ""),
        coverage,
        reply.get("channel", ""),
        mode=reply.get("mode"),
        fresh_scratch=bool(reply.get("fresh_scratch", False)),
        **counts,
    )


def _analysed(result: ExecutionResult, job: dict) -> ExecutionResult:
    """A measured split Python run's executed lines as coverage.py's analysis, from the job's texts;
    executed lines sent for any other job are a malformed reply."""
    if not (job.get("kind") == "python" and job.get("split") and job.get("coverage")):
        return ExecutionResult.error("malformed reply from the sandbox server: lines for a run not measured")
    executed = cast(list, cast(dict, result.coverage)["executed"])  # a list of line numbers (_to_result)
    return replace(result, coverage=measured_coverage(job["program"], job["tests"], executed))


def _is_coverage(value: object) -> bool:
    if not isinstance(value, dict):
        return False
    if set(value) == {"error"}:
        return isinstance(value["error"], str)
    if set(value) == {"executed"}:  # a split run's lines, analysed here (line_probes.measured_coverage)
        return is_line_list(value["executed"])
    return set(value) == {"statements", "excluded", "missing"} and all(
        isinstance(lines, list) and all(type(n) is int for n in lines) for lines in value.values()
    )
