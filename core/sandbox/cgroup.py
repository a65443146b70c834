"""Optional cgroup guard: pids, memory and CPU limits over one worker's whole process tree.

RLIMIT_NPROC does not bind root and RLIMIT_AS is per process, so a fork bomb or a swarm of
processes could exhaust the host's PIDs or memory before the deadline kills them (a Python
fork bomb reaches thousands of processes and gigabytes within a second). Where the host lets
us create cgroups (root with cgroup v1 controllers, or a cgroup v2 hierarchy where we may
enable the controller) every worker runs in a group of its own. Elsewhere ``Cgroup.create``
returns None and only the rlimits and the deadline apply; ``Sandbox.guards()`` says which.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import os
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

CONTROLLERS = ("pids", "memory", "cpu")
CPU_PERIOD_US = 100_000
_LIMIT_FILES = {
    ("pids", 1): "pids.max",
    ("pids", 2): "pids.max",
    ("memory", 1): "memory.limit_in_bytes",
    ("memory", 2): "memory.max",
}
_OOM_FILES = {1: "memory.oom_control", 2: "memory.events"}
_PREFIX = "editforge-"
_counter = itertools.count()
# Joins the cgroups named before "--", then becomes the command after it: the server and
# everything it forks are inside from their first instruction on.
_JOIN = 'while [ "$1" != -- ]; do echo $$ > "$1" || exit 125; shift; done; shift; exec "$@"'


@dataclass
class Cgroup:
    """One worker's cgroups: controller -> (directory, cgroup version)."""

    groups: dict[str, tuple[Path, int]]
    _written: dict[str, int] = field(default_factory=dict)
    _oom_fd: int | None = None  # the memory cgroup's OOM counter file, held open

    @classmethod
    def create(cls) -> Cgroup | None:
        """New, empty cgroups for every controller we may use here, or None if there is none."""
        name = f"{_PREFIX}{os.getpid()}-{next(_counter)}-{os.urandom(3).hex()}"
        groups = {}
        for controller, (parent, version) in _parents().items():
            path = parent / name
            try:
                path.mkdir()
            except OSError:
                continue
            groups[controller] = (path, version)
        return cls(groups) if groups else None

    def wrap(self, argv: list[str]) -> list[str]:
        """``argv`` prefixed so that the process joins these cgroups before it starts."""
        procs = sorted({str(path / "cgroup.procs") for path, _ in self.groups.values()})
        return ["/bin/sh", "-c", _JOIN, "editforge-cgroup", *procs, "--", *argv]

    def set_limits(self, max_processes: int, memory_bytes: int, cpus: float = 1.0) -> None:
        """Write the limits that changed since the last call."""
        quota = max(1000, round(cpus * CPU_PERIOD_US))  # the kernel's smallest quota is 1 ms
        for controller, value in (("pids", max_processes), ("memory", memory_bytes), ("cpu", quota)):
            if controller in self.groups and self._written.get(controller) != value:
                path, version = self.groups[controller]
                if controller == "cpu" and version == 2:
                    (path / "cpu.max").write_text(f"{value} {CPU_PERIOD_US}")
                elif controller == "cpu":
                    (path / "cpu.cfs_period_us").write_text(str(CPU_PERIOD_US))
                    (path / "cpu.cfs_quota_us").write_text(str(value))
                else:
                    (path / _LIMIT_FILES[controller, version]).write_text(str(value))
                self._written[controller] = value

    def oom_kills(self) -> int:
        """How many processes the kernel has OOM-killed in the memory cgroup so far (read at offset
        0 of a descriptor held open: it is read before every execution)."""
        if "memory" not in self.groups:
            return 0
        with contextlib.suppress(OSError, ValueError):
            if self._oom_fd is None:
                path, version = self.groups["memory"]
                self._oom_fd = os.open(path / _OOM_FILES[version], os.O_RDONLY | os.O_CLOEXEC)
            for line in os.pread(self._oom_fd, 4096, 0).decode().splitlines():
                key, _, value = line.partition(" ")
                if key == "oom_kill":
                    return int(value)
        return 0

    def kill_all(self, timeout_s: float = 5.0) -> None:
        """SIGKILL everything left in the groups (e.g. what escaped a dead local server)."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            pids = self.pids()
            if not pids:
                return
            for pid in pids:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            time.sleep(0.01)

    def pids(self) -> set[int]:
        found: set[int] = set()
        for path, _ in self.groups.values():
            with contextlib.suppress(OSError):
                found.update(int(pid) for pid in (path / "cgroup.procs").read_text().split())
        return found

    def remove(self) -> None:
        """Kill what is left and delete the groups (retrying while killed processes exit)."""
        self.kill_all()
        if self._oom_fd is not None:
            os.close(self._oom_fd)
            self._oom_fd = None
        for path, _ in self.groups.values():
            deadline = time.monotonic() + 5.0
            while path.exists():
                try:
                    path.rmdir()
                except OSError:
                    if time.monotonic() > deadline:
                        break
                    time.sleep(0.02)


def available() -> set[str]:
    """The controllers (of CONTROLLERS) whose cgroups we can create and join here."""
    return set(_parents())


@functools.cache
def _parents() -> dict[str, tuple[Path, int]]:
    """For each controller, the cgroup we live in (where our groups go) and its version."""
    ours = {}
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/cgroup").read_text().splitlines():
            _, controllers, path = line.split(":", 2)
            for controller in controllers.split(",") if controllers else [""]:
                ours[controller] = path
    parents = {}
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/mountinfo").read_text().splitlines():
            fields, _, tail = line.partition(" - ")
            root, mount = fields.split()[3:5]
            fstype, _, options = tail.split()[:3]
            for controller in CONTROLLERS:
                if controller in parents:
                    continue
                if fstype == "cgroup" and controller in options.split(",") and controller in ours:
                    version, path = 1, ours[controller]
                elif (
                    fstype == "cgroup2" and "" in ours and _v2_enable(Path(mount), root, ours[""], controller)
                ):
                    version, path = 2, ours[""]
                else:
                    continue
                relative = os.path.relpath(path, root) if path.startswith(root) else None
                if relative is not None and not relative.startswith(".."):
                    parents[controller] = ((Path(mount) / relative).resolve(), version)
    return {c: p for c, p in parents.items() if _usable(*p)}


def _v2_enable(mount: Path, root: str, path: str, controller: str) -> bool:
    """Whether ``controller`` is (or can be) enabled for children of our cgroup v2 group."""
    group = mount / os.path.relpath(path, root)
    try:
        if controller not in (group / "cgroup.controllers").read_text().split():
            return False  # not offered to this group (e.g. bound to a v1 hierarchy)
        if controller not in (group / "cgroup.subtree_control").read_text().split():
            (group / "cgroup.subtree_control").write_text(f"+{controller}")
    except OSError:
        return False
    return True


def _usable(parent: Path, version: int) -> bool:
    """Probe once: create a group, run a process inside it, remove it; sweep stale groups."""
    for stale in parent.glob(f"{_PREFIX}*"):
        owner = stale.name[len(_PREFIX) :].split("-")[0]
        if owner.isdigit() and not Path(f"/proc/{owner}").exists():
            with contextlib.suppress(OSError):
                stale.rmdir()
    probe = Cgroup({"probe": (parent / f"{_PREFIX}{os.getpid()}-probe-{os.urandom(3).hex()}", version)})
    try:
        probe.groups["probe"][0].mkdir()
        return subprocess.run(probe.wrap(["true"]), capture_output=True, timeout=30).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False
    finally:
        probe.remove()
