"""Wheels for a GPU node without a package index: what the trainer, its benchmark and the GPU tests
import that the node lacks, at this environment's versions.

    python scripts/offline_wheels.py --out .whl --python-version 3.12 --have node-packages.txt
    scripts/gpu_checks.sh --wheels .whl        # on the node: installs them, then runs the checks

Carried: the roots (the training stack, at this environment's exact versions, so that the node runs
what the tests here ran; liger-kernel at `LIGER_KERNEL`, or its version here where it is installed)
and every distribution they require, transitively, as this environment's metadata says (extras left
out, markers evaluated for the node's Python on x86-64 Linux), except the CUDA stack the node brings
(`NODE_STACK`) and what the node already has at a version every requirement accepts. ``--have``
takes the node's `pip list --format=freeze` (or `pip list`, or bare names, taken as acceptable).
Each wheel is printed with the reason it is carried, then the total size.
"""

from __future__ import annotations

import argparse
import importlib.metadata as md
import re
import subprocess
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

ROOTS = ("transformers", "trl", "datasets", "hydra-core", "accelerate", "peft", "liger-kernel")
LIGER_KERNEL = "0.8.5"  # the version docs/performance.md's figures were measured with
NODE_STACK = re.compile(r"^(torch|triton|nvidia-.*|cuda-.*)$")  # a GPU node's own; never carried
PLATFORMS = tuple(f"manylinux_2_{n}_x86_64" for n in (17, 24, 27, 28, 31, 34)) + (
    "manylinux2014_x86_64",
    "manylinux1_x86_64",
)


@dataclass
class Wanted:
    name: str  # canonical
    version: str | None  # this environment's; None where it is not installed here
    reason: str
    specifier: SpecifierSet = field(default_factory=SpecifierSet)  # what every requirer accepts


def parse_have(lines: Iterable[str]) -> dict[str, str | None]:
    """The node's packages from `pip list --format=freeze`, `pip list` or bare names: name -> version
    (None: a bare name, taken as acceptable to every requirement)."""
    have: dict[str, str | None] = {}
    for raw in lines:
        line = raw.split("#", 1)[0].strip()
        if not line or line.startswith(("Package", "---", "-e ")):
            continue
        if "==" in line:
            name, version = line.split("==", 1)
        elif " @ " in line:
            name, version = line.split(" @ ", 1)[0], None
        else:
            name, *rest = line.split()
            version = rest[0] if rest else None
        have[canonicalize_name(name.strip())] = version.strip() if version else None
    return have


def marker_env(python_version: str) -> dict[str, str]:
    """The environment the requirements' markers are evaluated in: the node's Python on x86-64 Linux."""
    return {
        "python_version": ".".join(python_version.split(".")[:2]),
        "python_full_version": python_version if python_version.count(".") == 2 else python_version + ".0",
        "implementation_name": "cpython",
        "platform_python_implementation": "CPython",
        "sys_platform": "linux",
        "platform_system": "Linux",
        "platform_machine": "x86_64",
        "os_name": "posix",
        "extra": "",
    }


def plan(
    roots: Iterable[str],
    python_version: str,
    have: dict[str, str | None],
    find: Callable[[str], md.Distribution | None],
    pins: dict[str, str],
) -> list[Wanted]:
    """The distributions to carry, roots first, each with why: the roots, then until nothing changes,
    every requirement of a carried distribution that the node does not meet. What the node meets is
    its business (its own requirements are not followed). ``find`` gives this environment's
    distribution of a name (None: not installed here); ``pins`` versions roots not installed here."""
    env = marker_env(python_version)

    def version(name: str) -> str | None:
        dist = find(name)
        return dist.version if dist is not None else pins.get(name)

    def meets(name: str, specifier: SpecifierSet) -> bool:
        if name not in have:
            return False
        found = have[name]
        try:
            return found is None or specifier.contains(Version(found), prereleases=True)
        except InvalidVersion:  # a version pip would not compare: carry ours
            return False

    wanted = {
        canonicalize_name(r): Wanted(canonicalize_name(r), version(canonicalize_name(r)), "a root")
        for r in roots
    }
    while True:
        required: dict[str, SpecifierSet] = {}
        for name in wanted:
            dist = find(name)
            for text in (dist.requires or []) if dist is not None else []:
                req = Requirement(text)
                if req.marker is None or req.marker.evaluate(env):
                    key = canonicalize_name(req.name)
                    required[key] = required.get(key, SpecifierSet()) & req.specifier
        for name, specifier in required.items():
            if name in wanted:
                wanted[name].specifier = specifier
        added = {
            name: specifier
            for name, specifier in required.items()
            if name not in wanted and not NODE_STACK.match(name) and not meets(name, specifier)
        }
        if not added:
            return list(wanted.values())
        for name, specifier in added.items():
            if name not in have:
                why = "missing on the node"
            elif str(specifier):
                why = f"the node's {have[name]} is not {specifier}"
            else:
                why = f"the node's version {have[name]!r} is not one pip compares"
            wanted[name] = Wanted(name, version(name), why, specifier)


def this_environment(name: str) -> md.Distribution | None:
    try:
        return md.distribution(name)
    except md.PackageNotFoundError:
        return None


def is_pure(name: str, find: Callable[[str], md.Distribution | None]) -> bool:
    """Whether this environment's copy of ``name`` came from a wheel for any Python 3 on any machine
    (`py3-none-any`), so that a wheel built here serves the node too (a distribution published as
    an sdist alone, like antlr4-python3-runtime 4.9.3, has no wheel to download)."""
    dist = find(name)
    text = dist.read_text("WHEEL") if dist is not None else None
    tags = [line.split(":", 1)[1].strip() for line in (text or "").splitlines() if line.startswith("Tag:")]
    return bool(tags) and all(
        t.split("-")[0] in ("py2", "py3", "py2.py3") and t.endswith("-none-any") for t in tags
    )


def pip_commands(wanted: list[Wanted], out: Path, python_version: str, pure: set[str]) -> list[list[str]]:
    """The pip commands that fetch these wheels, without dependencies (the plan names them all):
    pure-Python ones with `pip wheel` (it builds those that only have an sdist), the rest downloaded
    for the node's Python and x86-64 Linux."""
    pip = [sys.executable, "-m", "pip"]
    commands = []
    if pure_ones := [f"{w.name}=={w.version}" for w in wanted if w.name in pure]:
        commands.append([*pip, "wheel", "--no-deps", "-w", str(out), *pure_ones])
    if others := [f"{w.name}=={w.version}" for w in wanted if w.name not in pure]:
        command = [*pip, "download", "--no-deps", "--only-binary=:all:", "-d", str(out)]
        command += ["--python-version", python_version, "--implementation", "cp"]
        for platform in PLATFORMS:
            command += ["--platform", platform]
        commands.append(command + others)
    return commands


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", type=Path, default=Path(".whl"), help="where the wheels go (default .whl)")
    p.add_argument("--python-version", default="3.12", help="the node's Python (default 3.12)")
    p.add_argument("--have", type=Path, default=None, help="the node's `pip list --format=freeze`")
    p.add_argument("--root", action="append", default=[], help="another root to carry (repeatable)")
    p.add_argument("--dry-run", action="store_true", help="print the plan, download nothing")
    args = p.parse_args()
    if args.have is not None and not args.have.is_file():
        sys.exit(f"error: --have {args.have}: no such file (the node's `pip list --format=freeze`)")
    have = parse_have(args.have.read_text().splitlines()) if args.have else {}
    pins = {"liger-kernel": LIGER_KERNEL}
    wanted = plan([*ROOTS, *args.root], args.python_version, have, this_environment, pins)
    unknown = [w.name for w in wanted if w.version is None]
    if unknown:
        sys.exit(
            f"error: not installed here, so no version to carry: {', '.join(unknown)} (pip install them first)"
        )
    for w in wanted:
        print(f"{w.name}=={w.version}  ({w.reason})")
    if args.dry_run:
        return
    args.out.mkdir(parents=True, exist_ok=True)
    pure = {w.name for w in wanted if is_pure(w.name, this_environment)}
    for command in pip_commands(wanted, args.out, args.python_version, pure):
        if (done := subprocess.run(command)).returncode != 0:
            sys.exit(f"error: pip {command[3]} failed (exit {done.returncode}); the plan is above")
    files = sorted(args.out.glob("*.whl"))
    size = sum(f.stat().st_size for f in files)
    print(f"{len(files)} wheels in {args.out}, {size / 2**20:.1f} MiB")


if __name__ == "__main__":
    main()
