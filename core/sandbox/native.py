"""Build, cache and load ``_editforge_sys``, the C module through which the sandbox makes its
system calls (Landlock, seccomp, capabilities, prctl, keyrings, SysV IPC).

It replaces ctypes in the sandbox server: a loaded ``_ctypes`` is a raw-memory primitive any
program could reach (``object.__subclasses__()``), while this module only takes integers and
byte strings. It is compiled once per interpreter (the sandbox may run another Python than
this one: a library version's virtualenv) with that interpreter's headers and the system C
compiler, into ``$EDITFORGE_CACHE`` (default ``~/.cache/editforge``)/sandbox-native, and reused
while its source, the headers and the extension suffix stay the same.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.machinery
import importlib.util
import os
import shutil
import subprocess
import tempfile
import types
from pathlib import Path
from typing import cast

from core.sandbox.interpreter import interpreter_facts
from core.sandbox.worker import SandboxUnavailable

SOURCE = Path(__file__).with_name("_editforge_sys.c")
MODULE = "_editforge_sys"


def cache_dir(name: str = "sandbox-native") -> Path:
    """The cache folder ``name`` (compiled modules; the toolchains' prepared files): in
    ``$EDITFORGE_CACHE``, else ``~/.cache/editforge``, else (a home that cannot be written) a folder
    of this user's in the temporary directory."""
    root = os.environ.get("EDITFORGE_CACHE") or os.path.join(os.path.expanduser("~"), ".cache", "editforge")
    folder = Path(root) / name
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError:
        folder = Path(tempfile.gettempdir()) / f"editforge-{os.getuid()}" / name
        folder.mkdir(parents=True, exist_ok=True)
    return folder


@functools.cache
def load(python: str | None = None) -> types.ModuleType:
    """The compiled module, imported into this (host) process from its cached path."""
    return load_path(built(python))


@functools.cache
def built(python: str | None = None) -> str:
    """Path of the module compiled for ``python`` (default: this interpreter), building it on
    first use; SandboxUnavailable, with the fix, where it cannot be built."""
    facts = interpreter_facts(python)
    include, suffix = facts.include, facts.ext_suffix
    source = SOURCE.read_bytes()
    key = hashlib.sha256(source + include.encode() + suffix.encode()).hexdigest()[:16]
    target = cache_dir() / key / f"{MODULE}{suffix}"
    if target.exists():
        return str(target)
    compiler = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        raise SandboxUnavailable(_missing("no C compiler (cc) on PATH"))
    if not os.path.exists(os.path.join(include, "Python.h")):
        raise SandboxUnavailable(_missing(f"no Python headers in {include}"))
    target.parent.mkdir(parents=True, exist_ok=True)
    handle, partial = tempfile.mkstemp(dir=target.parent, suffix=suffix)
    os.close(handle)  # the compiler writes it; os.replace then publishes it whole
    argv = [compiler, "-shared", "-fPIC", "-O2", f"-I{include}", "-o", partial, str(SOURCE)]
    try:
        try:
            done = subprocess.run(argv, capture_output=True, text=True, timeout=300)
        except (OSError, subprocess.SubprocessError) as exc:
            raise SandboxUnavailable(_missing(f"{compiler} cannot run: {exc}")) from exc
        if done.returncode != 0:
            raise SandboxUnavailable(_missing(f"{' '.join(argv)} failed:\n{done.stderr.strip()}"))
        os.replace(partial, target)  # atomic: concurrent builders all end with one whole file
    finally:
        if os.path.exists(partial):
            os.unlink(partial)
    return str(target)


def landlock_abi() -> int:
    """The kernel's Landlock ABI version (0 where Landlock is missing or disabled)."""
    return load().landlock_abi()


def load_path(path: str) -> types.ModuleType:
    """Import the module from ``path`` without putting its folder on ``sys.path``."""
    loader = importlib.machinery.ExtensionFileLoader(MODULE, path)
    # never None: a spec for a path with an explicit loader
    spec = cast(
        importlib.machinery.ModuleSpec, importlib.util.spec_from_file_location(MODULE, path, loader=loader)
    )
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


def _missing(reason: str) -> str:
    return (
        f"the sandbox's system-call module cannot be built: {reason}. Install a C compiler and the "
        "interpreter's headers (Debian: apt install gcc python3-dev; scripts/setup.sh does it)."
    )
