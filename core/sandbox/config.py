"""`sandbox.*`: the one sandbox config of every entry point, and the one way to start its sandbox.

Every tool that runs programs (`eval.run`, `eval.audit`, `eval.build_apiupdate`,
`eval.apiupdate_edit`, `data_pipeline.novel_api`, `eval.split_mode`) nests this dataclass as
`sandbox` and starts its pool with `open`, so a key such as `sandbox.workers` means the same
everywhere and no caller unpacks the fields by hand.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from core.sandbox.limits import SandboxLimits
from core.sandbox.sandbox import BACKENDS, Sandbox, make_sandbox


@dataclass
class SandboxConfig:
    backend: str = "auto"  # auto | bwrap | local
    # Strict mode (docs/sandbox.md): no module with raw memory access, except for problems whose own
    # code needs one (declared unverified, `passed_unverified`); false: every Python run unverified.
    strict: bool = True
    # Per program: 15 s as MultiPL-E's runner that CanItEdit executes with; every limit settable.
    limits: SandboxLimits = field(default_factory=lambda: SandboxLimits(timeout_s=15.0))
    coverage_timeout_s: float = 60.0  # eval: per coverage run, as CanItEdit's evaluator_overlay.py
    workers: int | None = None  # None: one per CPU
    max_code_bytes: int = 200_000  # eval: larger completions fail as too_large without running
    # Each worker's processes on one CPU, round robin, where there is a worker per CPU: a split
    # run's two processes then talk without waking another CPU (`worker_cpus`); false: any CPU.
    pin_cpus: bool = True

    def __post_init__(self) -> None:
        # ValueError: `to_validated` turns it into a one-line ConfigError for every entry point
        if self.backend not in BACKENDS:
            raise ValueError(f"sandbox.backend={self.backend!r}: choose one of {list(BACKENDS)}")
        if self.workers is not None and self.workers < 1:
            raise ValueError(
                f"sandbox.workers={self.workers}: give a positive number, or null for one per CPU"
            )
        if self.coverage_timeout_s <= 0:
            raise ValueError(f"sandbox.coverage_timeout_s={self.coverage_timeout_s}: must be positive")
        if self.max_code_bytes < 1:
            raise ValueError(f"sandbox.max_code_bytes={self.max_code_bytes}: must be positive")

    def open(
        self, python: str | None = None, read_only: Sequence[str] = (), measured_split: bool = False
    ) -> Sandbox:
        """The started sandbox these settings describe; what differs per caller is an argument:
        ``python`` (another interpreter), ``read_only`` (toolchain folders), ``measured_split``
        (see `make_sandbox`)."""
        return make_sandbox(
            self.backend,
            limits=self.limits,
            workers=self.workers,
            python=python,
            strict=self.strict,
            read_only=read_only,
            measured_split=measured_split,
            pin_cpus=self.pin_cpus,
        )
