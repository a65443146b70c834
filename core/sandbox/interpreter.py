"""What the sandbox needs to know of the interpreter its Python runs use (this one, or another:
a library version's virtualenv), asked once per interpreter: its folders, for the file-system
binds and Landlock, and its headers and extension suffix, for the C module (native.py)."""

from __future__ import annotations

import functools
import json
import subprocess
import sys
import sysconfig
from dataclasses import dataclass

from core.sandbox.worker import SandboxUnavailable

_QUERY = (
    "import json, sys, sysconfig; print(json.dumps([sys.prefix, sys.base_prefix, sys.executable, sys.path, "
    "sysconfig.get_paths()['include'], sysconfig.get_config_var('EXT_SUFFIX')]))"
)


@dataclass(frozen=True)
class InterpreterFacts:
    prefix: str
    base_prefix: str
    executable: str
    path: tuple[str, ...]
    include: str  # where Python.h is
    ext_suffix: str  # e.g. .cpython-311-x86_64-linux-gnu.so


@functools.cache
def interpreter_facts(python: str | None = None) -> InterpreterFacts:
    """The facts of ``python`` (default: this interpreter); SandboxUnavailable if it cannot run."""
    if python is None or python == sys.executable:
        include, suffix = sysconfig.get_paths()["include"], sysconfig.get_config_var("EXT_SUFFIX")
        return InterpreterFacts(sys.prefix, sys.base_prefix, sys.executable, tuple(sys.path), include, suffix)
    try:
        out = subprocess.run(
            [python, "-I", "-c", _QUERY], capture_output=True, text=True, timeout=60, check=True
        )
    except (OSError, subprocess.SubprocessError) as exc:
        raise SandboxUnavailable(f"interpreter {python!r} cannot run: {exc}") from exc
    prefix, base, executable, path, include, suffix = json.loads(out.stdout)
    return InterpreterFacts(prefix, base, executable, tuple(path), include, suffix)
