"""What Go and Rust programs need besides a compiler, prepared once per machine and shown to the sandbox.

HumanEvalPack's Go tests import testify and its Rust programs use the crates rand, regex and md5;
bigcode's harness fetches them from the network. Here they come from Debian's packages, and what
every run would otherwise rebuild (Go's compiled packages, the compiled crates) is built once per
toolchain version into ``$EDITFORGE_CACHE/toolchains`` (default ``~/.cache/editforge``), which the
sandbox shows read-only (`sandbox_paths`). Each language module says why it cannot run here
(`problem()`, None when it can) and builds what its runs share on first use (`toolchain()`).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

from core.errors import UserError
from core.sandbox.bwrap import SYSTEM_PATHS
from core.sandbox.native import cache_dir


class ToolchainError(UserError, RuntimeError):
    """A toolchain could not prepare what its runs need; the message says what failed and the fix."""


def cache_root() -> Path:
    return cache_dir("toolchains")


def digest(*parts: str | bytes) -> str:
    """A short key of what a prepared folder was built from (a change rebuilds it)."""
    h = hashlib.sha256()
    for part in parts:
        h.update(part.encode() if isinstance(part, str) else part)
        h.update(b"\0")
    return h.hexdigest()[:16]


def build_once(name: str, key: str, build: Callable[[Path], None]) -> Path:
    """The folder ``name-key`` in the cache, made by ``build`` (into a fresh folder, then renamed into
    place, so concurrent builders never see half a folder and the first one to finish wins)."""
    target = cache_root() / f"{name}-{key}"
    if target.is_dir():
        return target
    partial = Path(tempfile.mkdtemp(prefix=f".{name}-", dir=cache_root()))
    try:
        build(partial)
        try:
            partial.rename(target)
        except OSError:
            if not target.is_dir():
                raise
    finally:
        shutil.rmtree(partial, ignore_errors=True)
    return target


def run(argv: Sequence[str], what: str, env: dict[str, str] | None = None, cwd: Path | None = None) -> str:
    """stdout of a trusted preparation step; a ToolchainError with its output when it fails."""
    try:
        done = subprocess.run(list(argv), capture_output=True, text=True, env=env, cwd=cwd, timeout=900)
    except (OSError, subprocess.SubprocessError) as exc:
        raise ToolchainError(f"{what}: {' '.join(argv)} cannot run: {exc}") from exc
    if done.returncode != 0:
        raise ToolchainError(f"{what}: {' '.join(argv)} failed:\n{(done.stderr or done.stdout)[-3000:]}")
    return done.stdout


def ask(argv: Sequence[str], env: dict[str, str] | None = None) -> str | None:
    """A tool's one-line answer (``go env GOROOT``), or None when it cannot give one."""
    try:
        done = subprocess.run(list(argv), capture_output=True, text=True, env=env, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() or None if done.returncode == 0 else None


def outside_system(path: str) -> bool:
    """Whether the sandbox needs ``path`` bound to see it (bwrap shows only the system folders)."""
    real = os.path.realpath(path)
    return not any(real == root or real.startswith(root + "/") for root in SYSTEM_PATHS)


def sandbox_paths(languages: Iterable[str] | None = None) -> list[str]:
    """Host folders that Go and Rust runs read besides the system folders: the prepared cache, and
    a toolchain installed elsewhere (rustup's under ~/.rustup). ``languages``: those the sandbox
    will run (None: any); a toolchain none of them needs is not asked where it lives (`go env`
    and `rustc --print` take 50 ms before a Python-only evaluation could start)."""
    from eval.toolchains import go, rust

    wanted = None if languages is None else set(languages)
    paths = [str(cache_root())]
    for name, module in (("go", go), ("rust", rust)):
        home = module.home() if wanted is None or name in wanted else None
        if home is not None and outside_system(home):
            paths.append(home)
    return paths
