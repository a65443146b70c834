"""Resource limits for one sandboxed execution."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any


@dataclass(frozen=True)
class SandboxLimits:
    """What one execution may use; every field is enforced by the parent, not by the program.

    ``memory_mb`` is the address-space limit (RLIMIT_AS) of every process of the run, on top of
    what the worker's preloaded interpreter already maps (numpy alone reserves ~120 MB), and,
    where the host lets us create a memory cgroup, also bounds the resident memory of the whole run.
    ``max_processes`` counts processes and threads: a cgroup ``pids.max`` where available, else
    RLIMIT_NPROC, which the kernel ignores for root (the PID namespace or subreaper still kills
    everything at the end). ``cpus`` is the CPU time per wall-clock second the run may use, a cgroup
    ``cpu.max`` quota where the host lets us create a cpu cgroup, so one run that spawns busy
    threads cannot slow its neighbours past their deadlines. ``disk_mb`` is the size of the bwrap sandbox's private ``/tmp``
    tmpfs, which holds the working directory; like ``network`` it is fixed when a worker
    starts, so a run that asks for other values gets a restarted worker.
    """

    timeout_s: float = 10.0  # wall-clock, enforced by the parent (SIGALRM can't interrupt a long C call)
    memory_mb: int = 2048  # RLIMIT_AS
    file_size_mb: int = 64  # RLIMIT_FSIZE
    max_output_bytes: int = 1_000_000  # per stream; a run that prints more is stopped ("output_limit")
    max_processes: int = 256  # best effort, see the class docstring
    cpus: float = 1.0  # CPU quota (cgroup cpu.max), where a cpu cgroup can be made
    network: bool = False
    disk_mb: int = 512  # bwrap only: size of the private /tmp (work directory included)

    def __post_init__(self) -> None:
        for name in (
            "timeout_s",
            "memory_mb",
            "file_size_mb",
            "max_output_bytes",
            "max_processes",
            "cpus",
            "disk_mb",
        ):
            if getattr(self, name) <= 0:
                raise ValueError(f"SandboxLimits.{name} must be positive, got {getattr(self, name)!r}")

    @classmethod
    def from_mapping(cls, values: Mapping[str, Any]) -> SandboxLimits:
        """Build limits from a config section; an unknown key is an error, not silently ignored."""
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(values) - known)
        if unknown:
            raise ValueError(f"unknown sandbox limit(s) {unknown}; valid keys are {sorted(known)}")
        return cls(**dict(values))

    def to_dict(self) -> dict[str, Any]:
        """The fields as a new dict (every one a scalar: no deep copy, which ``asdict`` makes, is
        needed; this runs once per execution)."""
        return {f.name: getattr(self, f.name) for f in fields(self)}
