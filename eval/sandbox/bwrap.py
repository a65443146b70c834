"""The bubblewrap backend: each worker's server runs as PID 1 of fresh namespaces.

What the sandbox gets: a read-only view of the host's root, a private size-limited tmpfs at
/tmp (the work folder is /tmp/work) and /dev/shm, a minimal /dev, its own /proc, PID, IPC,
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

from eval.sandbox.worker import HARNESS, Profile, SandboxUnavailable, ServerSpec, sandbox_env

WORK_DIR = "/tmp/work"
INSTALL_HINT = "install it (Debian/Ubuntu: `apt-get install -y bubblewrap`) or use backend='local'"


def bwrap_binary() -> str | None:
    """``$EDITFORGE_BWRAP`` if set, else ``bwrap`` on PATH."""
    return os.environ.get("EDITFORGE_BWRAP") or shutil.which("bwrap")


def bwrap_problem() -> str | None:
    """Why bubblewrap cannot sandbox here, or None when it can (probed once per binary)."""
    return _probe(bwrap_binary())[0]


def bwrap_available() -> bool:
    return bwrap_problem() is None


def bwrap_argv(binary: str, profile: Profile, userns: bool = True) -> list[str]:
    """The bwrap options every server (and the availability probe) runs under.

    ``userns``: also enter a user namespace in which no further namespaces may be created
    (defence in depth; root may run without it where user namespaces are disabled).
    """
    size = str(profile.disk_mb << 20)
    argv = [binary, "--ro-bind", "/", "/", "--proc", "/proc", "--dev", "/dev"]
    argv += ["--perms", "1777", "--size", size, "--tmpfs", "/tmp", "--dir", WORK_DIR]
    argv += ["--perms", "1777", "--size", size, "--tmpfs", "/dev/shm"]
    for path in _hidden_host_paths():  # an interpreter or checkout under /tmp stays visible, read-only
        argv += ["--ro-bind", path, path]
    argv += ["--unshare-user", "--disable-userns"] if userns else []
    argv += ["--unshare-pid", "--as-pid-1", "--unshare-ipc"]
    argv += ["--unshare-uts", "--hostname", "sandbox", "--unshare-cgroup-try"]
    argv += [] if profile.network else ["--unshare-net"]
    argv += ["--cap-drop", "ALL", "--die-with-parent", "--new-session", "--chdir", WORK_DIR]
    return argv


def _hidden_host_paths() -> list[str]:
    """Host paths the sandbox needs (the interpreter, its environment, the harness) that the
    private /tmp and /dev/shm would otherwise hide, e.g. a virtualenv in a checkout under /tmp."""
    needed = {
        sys.prefix,
        sys.base_prefix,
        os.path.dirname(os.path.realpath(sys.executable)),
        os.path.dirname(os.path.abspath(sys.executable)),
        os.path.dirname(HARNESS),
    }
    hidden = [p for p in needed if p.startswith(("/tmp/", "/dev/shm/")) and os.path.exists(p)]
    # A parent bound first would be shadowed by nothing; bind shortest paths first so children nest.
    return sorted(set(hidden), key=len)


class BwrapLauncher:
    backend = "bwrap"

    def __init__(self) -> None:
        problem = bwrap_problem()
        if problem:
            raise SandboxUnavailable(f"backend='bwrap' is unavailable: {problem}; {INSTALL_HINT}")
        self._binary = bwrap_binary()
        self._userns = _probe(self._binary)[1]

    def spec(self, profile: Profile) -> ServerSpec:
        config = {
            "mode": "init",
            "work_dir": WORK_DIR,
            "scratch_dirs": ["/tmp", "/dev/shm"],
            "keep_paths": _hidden_host_paths(),
            "nproc_base": 2,
            "unshare_net": False,  # bwrap already did, unless the profile allows the network
        }
        argv = [*bwrap_argv(self._binary, profile, self._userns), "--", sys.executable, "-I", HARNESS]
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
