"""The bubblewrap backend: each worker's server runs as PID 1 of fresh namespaces.

What the sandbox gets: read-only views of the host's system folders (``SYSTEM_PATHS``) and of
the interpreter's own folders, and of the folders it is given for commands' toolchains
(``read_only``), nothing else of the host (no /root, /home, /run, /var, no project folders),
with secrets under /etc masked (``MASKED_PATHS``); a private size-limited
tmpfs at /tmp (the work folder is /tmp/work) and /dev/shm; a minimal read-only /dev (writes
there cannot reach the next run); its own /proc, PID, IPC,
UTS and cgroup namespaces, its own network namespace (unless ``limits.network``), no
capabilities, no further user namespaces (when bwrap may use one itself; root falls back
to running without), a new terminal session and a clean environment. The server is PID 1:
the kernel ignores the signals a program sends it, and ``kill(-1)`` from it removes every
process of a run, setsid() or not. bwrap dies with its parent thread
(``--die-with-parent``), and the namespace dies with PID 1.
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Sequence
from typing import cast

from core.sandbox import native
from core.sandbox.interpreter import interpreter_facts
from core.sandbox.worker import HARNESS, Profile, SandboxUnavailable, ServerSpec, sandbox_env

WORK_DIR = "/tmp/work"
KEEP_STASH = "/.editforge-keep"
# What compilers, interpreters and their libraries need; /etc for the dynamic linker, alternatives, certificates.
SYSTEM_PATHS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/opt", "/sys")
# What a Python run may open besides SYSTEM_PATHS and the interpreter (Landlock, see confine.py):
# the random devices for reading, these for writing, and /proc's global files, not a process's own.
DEVICES = ("/dev/null", "/dev/zero", "/dev/full")
RANDOM_DEVICES = ("/dev/random", "/dev/urandom")
PROC_GLOBAL = ("/proc/cpuinfo", "/proc/meminfo", "/proc/stat", "/proc/loadavg", "/proc/version", "/proc/sys")
# Readable by root on the host, needed by no test: an empty file or folder stands in their place.
MASKED_PATHS = (
    "/etc/shadow",
    "/etc/shadow-",
    "/etc/gshadow",
    "/etc/gshadow-",
    "/etc/sudoers",
    "/etc/sudoers.d",
    "/etc/ssh",
    "/etc/ssl/private",
    "/etc/security/opasswd",
)
INSTALL_HINT = "install it (Debian/Ubuntu: `apt-get install -y bubblewrap`) or use backend='local'"


def bwrap_binary() -> str | None:
    """``$EDITFORGE_BWRAP`` if set, else ``bwrap`` on PATH."""
    return os.environ.get("EDITFORGE_BWRAP") or shutil.which("bwrap")


def bwrap_problem() -> str | None:
    """Why bubblewrap cannot sandbox here, or None when it can (probed once per binary)."""
    return _probe(bwrap_binary())[0]


def bwrap_available() -> bool:
    return bwrap_problem() is None


def bwrap_argv(
    binary: str,
    profile: Profile,
    userns: bool = True,
    python: str | None = None,
    read_only: Sequence[str] = (),
) -> list[str]:
    """The bwrap options every server (and the availability probe) runs under.

    ``userns``: also enter a user namespace in which no further namespaces may be created
    (defence in depth; root may run without it where user namespaces are disabled).
    ``read_only``: host folders outside ``SYSTEM_PATHS`` that commands need (a compiler installed
    under ~/.rustup, prebuilt libraries), visible read-only at the same path.
    """
    argv = [binary]
    for path in SYSTEM_PATHS:
        if os.path.islink(path):  # merged /usr: /bin -> usr/bin
            argv += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path):
            argv += ["--ro-bind", path, path]
    for path in MASKED_PATHS:
        if os.path.isdir(path) and not os.path.islink(path):
            argv += ["--tmpfs", path, "--remount-ro", path]
        elif os.path.lexists(path):
            argv += ["--ro-bind", "/dev/null", path]
    argv += ["--proc", "/proc", "--remount-ro", "/proc", "--dev", "/dev"]  # /proc/sys is the host's
    # /tmp and /dev/shm: empty folders here; the server mounts a fresh tmpfs on each for every run
    argv += ["--dir", "/tmp", "--remount-ro", "/dev"]
    for path in interpreter_paths(python):  # the interpreter, its environment and the harness, read-only
        argv += ["--ro-bind", path, path]
    for path in sorted({p for p in read_only if os.path.isdir(p) and not _under(p, SYSTEM_PATHS)}, key=len):
        argv += ["--ro-bind", path, path]
    for stash, path in scratch_binds(python, read_only):  # bound again into each run's fresh /tmp
        argv += ["--ro-bind", path, stash]
    argv += ["--unshare-user", "--disable-userns"] if userns else []
    argv += ["--unshare-pid", "--as-pid-1", "--unshare-ipc"]
    argv += ["--unshare-uts", "--hostname", "sandbox", "--unshare-cgroup-try"]
    argv += [] if profile.network else ["--unshare-net"]
    # CAP_SYS_ADMIN for the server's per-run mounts only: its children drop every capability
    argv += [
        "--cap-drop",
        "ALL",
        "--cap-add",
        "CAP_SYS_ADMIN",
        "--die-with-parent",
        "--new-session",
        "--chdir",
        "/",
    ]
    # bwrap's root is a tmpfs of its own, which would outlive a run in the worker: read-only, so
    # that /tmp and /dev/shm (emptied after every run) are all a run can write
    argv += ["--remount-ro", "/"]
    return argv


def scratch_binds(python: str | None = None, read_only: Sequence[str] = ()) -> list[tuple[str, str]]:
    """(stash, path) for each read-only folder the sandbox needs under /tmp or /dev/shm (an
    interpreter in a temporary folder): bwrap binds it at the stash, outside the scratch folders, and
    the server binds it from there into each run's fresh tmpfs."""
    inside = [p for p in (*interpreter_paths(python), *read_only) if p.startswith(("/tmp/", "/dev/shm/"))]
    return [(f"{KEEP_STASH}/{i}", path) for i, path in enumerate(sorted(set(inside), key=len))]


def interpreter_paths(python: str | None = None) -> list[str]:
    """Host folders the sandbox needs outside ``SYSTEM_PATHS``: the interpreter, its environment
    (e.g. a virtualenv in a checkout), its site-packages and the harness. ``python``: another
    interpreter (a library version's virtualenv) instead of this one."""
    facts = interpreter_facts(python)
    needed = {
        facts.prefix,
        facts.base_prefix,
        os.path.dirname(os.path.realpath(facts.executable)),
        os.path.dirname(os.path.abspath(facts.executable)),
        os.path.dirname(HARNESS),
        os.path.dirname(native.built(python)),
        *(p for p in facts.path if p.endswith(("site-packages", "dist-packages"))),
    }
    paths = {os.path.realpath(p) for p in needed if p} | {p for p in needed if p}
    inside = [p for p in paths if os.path.isdir(p) and not _under(p, SYSTEM_PATHS)]
    # Bind shortest paths first so that nested ones stay visible.
    return sorted(set(inside), key=len)


def readable_paths(python: str | None = None) -> list[str]:
    """What a Python run may read (and execute) under Landlock, on either backend."""
    return [*SYSTEM_PATHS, *interpreter_paths(python), *RANDOM_DEVICES, *PROC_GLOBAL]


def _under(path: str, roots: tuple[str, ...]) -> bool:
    real_roots = {os.path.realpath(r) for r in roots} | set(roots)
    return any(path == r or path.startswith(r.rstrip("/") + "/") for r in real_roots)


class BwrapLauncher:
    backend = "bwrap"

    def __init__(self, python: str | None = None, read_only: Sequence[str] = ()) -> None:
        problem = bwrap_problem()
        if problem:
            raise SandboxUnavailable(f"backend='bwrap' is unavailable: {problem}; {INSTALL_HINT}")
        self._binary = cast(str, bwrap_binary())  # bwrap_problem() found none missing
        self._userns = _probe(self._binary)[1]
        self.python = python or sys.executable
        self.read_only = tuple(read_only)
        interpreter_paths(self.python)  # an interpreter that cannot run fails here, once

    def spec(self, profile: Profile, cpu: int | None = None) -> ServerSpec:
        config = {
            "mode": "init",
            "work_dir": WORK_DIR,
            "scratch_dirs": ["/tmp", "/dev/shm"],
            "keep_paths": [path for _, path in scratch_binds(self.python, self.read_only)],
            "fresh_mounts": {
                "size": profile.disk_mb << 20,
                "keep": scratch_binds(self.python, self.read_only),
            },
            "nproc_base": 2,
            "unshare_net": False,  # bwrap already did, unless the profile allows the network
            "coverage": profile.coverage,
            "network": profile.network,
            "read": readable_paths(self.python),
            "write": ["/tmp", "/dev/shm", *DEVICES],
            "native": native.built(self.python),
            "cpu": cpu,
        }
        bwrap = bwrap_argv(self._binary, profile, self._userns, self.python, self.read_only)
        argv = [*bwrap, "--", self.python, "-I", HARNESS]
        argv.append(json.dumps(config))
        return ServerSpec(argv, sandbox_env(home=WORK_DIR, tmp="/tmp"))


@functools.cache
def _probe(binary: str | None) -> tuple[str | None, bool]:
    """(why bwrap cannot run here or None, whether it runs with a user namespace)."""
    if binary is None:
        return "no `bwrap` on PATH (and EDITFORGE_BWRAP is not set)", False
    if not os.access(binary, os.X_OK):
        return f"{binary!r} is not an executable file", False
    problem = _try(binary, userns=True)
    if problem and os.geteuid() == 0 and _try(binary, userns=False) is None:
        return None, False
    return problem, True


def _try(binary: str, userns: bool) -> str | None:
    argv = [
        *bwrap_argv(binary, Profile(network=False, disk_mb=16), userns),
        "--",
        sys.executable,
        "-I",
        "-S",  # the interpreter starts in the namespaces (its site-packages: the server's own start)
        "-c",
        "",
    ]
    try:
        proc = subprocess.run(argv, capture_output=True, timeout=60)
    except (OSError, subprocess.SubprocessError) as exc:
        return f"{binary} failed to run: {exc}"
    if proc.returncode != 0:
        return f"{binary} cannot create the sandbox here: {proc.stderr.decode(errors='replace').strip()}"
    return None
