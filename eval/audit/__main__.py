"""`python -m eval.audit benchmark=NAME|FILE out=DIR`: audit a benchmark's own tests.

A `benchmark=` value that is an existing file is read as a CanItEdit-schema jsonl. The config is
validated and the toolchains checked before the sandbox starts; the checks are in `audit.py`.
"""

from __future__ import annotations

import json
import logging
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from core.config import register_schema
from core.entry import App, run_app
from core.errors import ConfigError
from core.sandbox.config import SandboxConfig
from eval.audit.classify import ClassifierConfig
from eval.audit.desiderata import Thresholds
from eval.benchmarks import get_kind, options_of, register_schemas

log = logging.getLogger("eval.audit")


@dataclass
class MutationConfig:
    enabled: bool = True
    per_region: int = 20  # mutants inside and outside the diff region, each
    timeout_factor: float = 10.0


@dataclass
class AuditConfig:
    benchmark: Any = field(
        default_factory=lambda: {"name": "canitedit"}
    )  # the kind's options, once validated
    out: str = "audits/benchmark"
    repeats: int = 3
    mutation: MutationConfig = field(default_factory=MutationConfig)
    scope: bool = True
    model_results: list[str] = field(default_factory=list)
    seed: int = 0
    sandbox: SandboxConfig = field(default_factory=SandboxConfig)
    # RQ1 labels: the deterministic rules, or with classifier.model a served model (see classify.py)
    classifier: ClassifierConfig = field(default_factory=ClassifierConfig)
    # report.md's D1-D6: our thresholds where the published audit states none (desiderata.py)
    desiderata: Thresholds = field(default_factory=Thresholds)

    def validate(self) -> None:
        self.benchmark = options_of(self.benchmark)
        if not get_kind(self.benchmark.name).runs_as_is:
            raise ConfigError(
                f"benchmark={self.benchmark.name} runs its programs inside its own wrapper and checks its "
                "references when it is built; the audit is for benchmarks whose programs run as they are"
            )
        if self.repeats < 1:
            raise ConfigError("repeats must be >= 1")
        if self.mutation.per_region < 1 or self.mutation.timeout_factor <= 0:
            raise ConfigError("mutation.per_region must be >= 1 and mutation.timeout_factor > 0")
        self.classifier.validate()
        self.desiderata.validate()


register_schema("audit_schema", AuditConfig)
register_schemas()  # the `benchmark` group extends each kind's options (benchmark/<kind>_options)


def preflight(cfg: AuditConfig) -> None:
    get_kind(cfg.benchmark.name).check(cfg.benchmark)
    for folder in cfg.model_results:
        if not (Path(folder) / "samples.jsonl").is_file():
            raise ConfigError(
                f"model_results: {folder} has no samples.jsonl; give folders written by python -m eval.run"
            )
    from eval.audit.unsolved import read_results

    read_results(list(cfg.model_results))  # a file that is not eval.run's stops now, not after the audit
    out = Path(cfg.out)
    if out.exists() and not out.is_dir():
        raise ConfigError(f"out={cfg.out} is a file; give a folder")
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise ConfigError(f"out={cfg.out} cannot be created: {err.strerror}") from err


def run(cfg: AuditConfig, resolved: dict[str, Any]) -> None:
    from eval.audit.audit import AuditOptions, run_audit
    from eval.audit.report import plot, render
    from eval.toolchains import sandbox_paths

    problems = get_kind(cfg.benchmark.name).load(cfg.benchmark)
    problems = problems[: cfg.benchmark.limit] if cfg.benchmark.limit else problems
    options = AuditOptions(
        repeats=cfg.repeats,
        mutation=cfg.mutation.enabled,
        mutants_per_region=cfg.mutation.per_region,
        timeout_factor=cfg.mutation.timeout_factor,
        scope=cfg.scope,
        model_results=list(cfg.model_results),
        seed=cfg.seed,
        classifier=cfg.classifier,
    )
    s = cfg.sandbox
    paths = sandbox_paths()  # Go's and Rust's prepared files, a toolchain outside the system folders
    with s.open(read_only=paths) as sandbox:
        audit = run_audit(
            cfg.benchmark.name, problems, sandbox, s.limits, options,
            lambda step: log.info("audit: %s", step), keep=Path(cfg.out) / "steps",
        )  # fmt: skip
    audit["config"] = resolved
    out = Path(cfg.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "audit.json").write_text(json.dumps(audit, indent=2) + "\n")
    report = render(audit, plot(audit, out), cfg.desiderata)
    (out / "report.md").write_text(report)
    print(report)


APP = App("audit", AuditConfig, run=run, preflight=preflight)


def main(argv: list[str]) -> None:
    """`benchmark=FILE` (an existing CanItEdit-schema file) becomes `benchmark=canitedit benchmark.path=FILE`."""
    args = []
    for arg in argv:
        key, _, value = arg.partition("=")
        if key == "benchmark" and value and Path(value).is_file():
            args += ["benchmark=canitedit", f"benchmark.path={value}"]
        elif key == "benchmark" and ("/" in value or value.endswith(".jsonl")):
            print(
                f"error: benchmark={value}: no such file (give a CanItEdit-schema .jsonl, or a name)",
                file=sys.stderr,
            )
            sys.exit(2)
        else:
            args.append(arg)
    run_app(APP, args)


if __name__ == "__main__":
    main(sys.argv[1:])
