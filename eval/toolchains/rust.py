"""Rust for HumanEvalFix: `rustc --test` on each program against rand, regex and md5 built once.

bigcode's harness builds each program with `cargo check` and `cargo test` in one cargo project whose
Cargo.toml asks for `rand = "0.4"`, `regex = "1"` and `md5 = "0.7.0"` (edition 2021), fetched from
crates.io. Offline, the crates come from Debian's packages (librust-rand-dev, librust-regex-dev,
librust-md5-dev) through cargo's directory source replacement of /usr/share/cargo/registry, built
once per toolchain into the cache; each run compiles its program with `rustc --test` against them
(cargo test's dev profile: no optimisation, debug assertions and overflow checks) and runs the tests.
Whichever rustc is on PATH is used (Debian's, or rustup's, whose toolchain folder the sandbox is
then shown).

Two departures, both forced by the packages: Debian has rand 0.8, whose `gen_range` takes a range
where 0.4's took two bounds, as HumanEvalPack's tests call it (Rust/32, Rust/50), so the crate the
programs see as `rand` is `eval/toolchains/rand`, rand 0.4's API over 0.8, with a seeded thread
generator (its lib.rs says why); and regex is built without its `perf` features (their crates are
not packaged with it): slower matching, the same matches.
"""

from __future__ import annotations

import functools
import json
import os
import re
import shlex
import shutil
import threading
from dataclasses import dataclass
from pathlib import Path

from eval.toolchains import ToolchainError, ask, build_once, digest, run

REGISTRY = "/usr/share/cargo/registry"
CRATES = {"rand": "rand-0.8.", "regex": "regex-1.", "md5": "md5-0.7."}  # the crate -> Debian's folder
INSTALL = "apt-get install rustc cargo librust-rand-dev librust-regex-dev librust-md5-dev"
RAND = Path(__file__).resolve().parent / "rand"  # rand 0.4's API over 0.8
HARNESS = """[package]
name = "harness"
version = "0.1.0"
edition = "2021"

[dependencies]
rand = { path = "../rand" }
regex = { version = "1", default-features = false, features = ["std", "unicode"] }
md5 = "0.7.0"
"""
CARGO_CONFIG = f"""[source.crates-io]
replace-with = "debian"

[source.debian]
directory = "{REGISTRY}"

[net]
offline = true
"""


@dataclass(frozen=True)
class Rust:
    rustc: str  # the compiler itself (not rustup's proxy, which needs a home the sandbox lacks)
    deps: str  # the compiled crates' folder
    externs: tuple[tuple[str, str], ...]  # (crate, its rlib)

    def compile(self, source: str, output: str, *flags: str) -> str:
        """The shell line that compiles ``source`` into the test binary ``output``."""
        argv = [self.rustc, "--edition", "2021", "--test", "-A", "warnings", *flags, "-o", output, source]
        argv += ["-L", f"dependency={self.deps}", *(f"--extern={name}={path}" for name, path in self.externs)]
        return shlex.join(argv)


def _rustc() -> str | None:
    return shutil.which("rustc")


def problem() -> str | None:
    """Why Rust programs cannot run here, or None."""
    if _rustc() is None or shutil.which("cargo") is None:
        return f"no rustc and cargo on PATH ({INSTALL})"
    folders = os.listdir(REGISTRY) if os.path.isdir(REGISTRY) else []
    missing = [name for name, prefix in CRATES.items() if not any(f.startswith(prefix) for f in folders)]
    if missing:
        return f"Debian's crates {missing} are not in {REGISTRY} ({INSTALL})"
    return None


@functools.cache
def home() -> str | None:
    """rustc's sysroot, the folder the sandbox must see to run it, or None without a working rustc."""
    rustc = _rustc()
    return None if rustc is None else ask([rustc, "--print", "sysroot"])


_lock = threading.Lock()


def toolchain() -> Rust:
    """The compiler and the compiled crates (built on first use; concurrent callers wait for them)."""
    with _lock:
        return _toolchain()


@functools.cache
def _toolchain() -> Rust:
    why = problem()
    if why is not None:
        raise ToolchainError(f"HumanEvalFix Rust cannot run here: {why}")
    sysroot = home()
    if sysroot is None:
        raise ToolchainError(f"HumanEvalFix Rust cannot run here: `rustc --print sysroot` fails ({INSTALL})")
    rustc = os.path.join(sysroot, "bin", "rustc")
    if not os.path.isfile(rustc):
        rustc = os.path.realpath(_rustc() or "rustc")
    cargo = os.path.join(sysroot, "bin", "cargo")
    if not os.path.isfile(cargo):
        cargo = shutil.which("cargo") or "cargo"
    version = run([rustc, "-vV"], "rustc -vV")
    sources = sorted(RAND.rglob("*.*"))
    key = digest(
        rustc,
        version,
        HARNESS,
        CARGO_CONFIG,
        *sorted(os.listdir(REGISTRY)),
        *(p.read_bytes() for p in sources),
    )
    folder = build_once("rust", key, lambda out: _build(out, rustc, cargo))
    built = json.loads((folder / "crates.json").read_text())
    externs = tuple((name, str(folder / built[name])) for name in CRATES)
    return Rust(rustc, str(folder / "target" / "debug" / "deps"), externs)


@functools.cache
def coverage_tools() -> tuple[str, str] | str:
    """(llvm-profdata, llvm-cov) of rustc's own LLVM version, which reading `-C instrument-coverage`'s
    profiles needs (rustup's llvm-tools, else Debian's llvm-<version>), or why coverage cannot be
    measured: those are missing, or rustc lacks the profiler runtime the instrumentation links."""
    rustc, sysroot = _rustc(), home()
    version = ask([rustc, "-vV"]) if rustc else None
    major = re.search(r"^LLVM version: (\d+)", version or "", re.M)
    if rustc is None or sysroot is None or major is None:
        return f"no working rustc ({INSTALL})"
    if not any(Path(sysroot, "lib", "rustlib").glob("*/lib/libprofiler_builtins-*.rlib")):
        return (
            f"rustc in {sysroot} was built without the profiler runtime that -C instrument-coverage "
            "needs (Debian's is; rustup's toolchains have it)"
        )
    found = []
    for tool in ("llvm-profdata", "llvm-cov"):
        candidates = [
            *sorted(Path(sysroot, "lib", "rustlib").glob(f"*/bin/{tool}")),
            shutil.which(f"{tool}-{major.group(1)}"),
            f"/usr/lib/llvm-{major.group(1)}/bin/{tool}",
        ]
        found.append(next((str(c) for c in candidates if c and os.access(c, os.X_OK)), None))
    if None in found:
        return (
            f"no llvm-profdata and llvm-cov of rustc's LLVM {major.group(1)} "
            f"(apt-get install llvm-{major.group(1)}, or rustup component add llvm-tools)"
        )
    return found[0], found[1]


def _build(out: Path, rustc: str, cargo: str) -> None:
    """Build the crates into ``out`` with cargo, offline; crates.json names each one's rlib."""
    shutil.copytree(RAND, out / "rand")
    (out / "harness" / "src").mkdir(parents=True)
    (out / "harness" / "Cargo.toml").write_text(HARNESS)
    (out / "harness" / "src" / "lib.rs").write_text("")
    (out / "cargo-home").mkdir()
    (out / "cargo-home" / "config.toml").write_text(CARGO_CONFIG)
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(out),
        "CARGO_HOME": str(out / "cargo-home"),
        "CARGO_TARGET_DIR": str(out / "target"),
        "RUSTC": rustc,
    }
    argv = [
        cargo,
        "build",
        "--offline",
        "--message-format=json",
        "--manifest-path",
        str(out / "harness" / "Cargo.toml"),
    ]
    messages = [
        json.loads(line)
        for line in run(argv, "building the Rust crates", env).splitlines()
        if line.startswith("{")
    ]
    rlibs: dict[str, str] = {}
    for m in messages:
        if m.get("reason") != "compiler-artifact" or m["target"]["name"] not in CRATES:
            continue
        ours = m["manifest_path"].startswith(str(out / "rand"))  # our rand, not the 0.8 under it
        if m["target"]["name"] != "rand" or ours:
            rlib = next(f for f in m["filenames"] if f.endswith(".rlib"))
            rlibs[m["target"]["name"]] = os.path.relpath(rlib, out)
    if set(rlibs) != set(CRATES):
        raise ToolchainError(f"building the Rust crates gave {sorted(rlibs)}, not {sorted(CRATES)}")
    (out / "crates.json").write_text(json.dumps(rlibs, indent=1) + "\n")
