"""The local backend: the fork server runs as a plain subprocess of the host.

Weaker than bwrap, for machines without it. It does give each run a new session and
process group, rlimits, a fresh temporary work folder, a wall-clock deadline, capped output
and a subreaper server that kills every descendant, setsid() or not, at the end of a run;
network and SysV IPC namespaces when the OS allows (root, via unshare(2)); and the cgroup
guard where available. The host talks to its server over a socket pair, which cannot be
reopened through /proc, so a program cannot forge the server's reply. It does NOT give a
read-only file system (a program can write or delete anything the user can, including
outside its folder), a private /tmp or /proc, protection of the server (a program can kill
it and every other process of the user: the run then counts as killed, and descendants of a
killed server escape unless a cgroup catches them), or, for root without cgroups, any bound
on the number of processes before the deadline.
"""

from __future__ import annotations

import functools
import json
import logging
import os
import subprocess
import sys
import tempfile

from core.sandbox import native
from core.sandbox.bwrap import DEVICES, readable_paths
from core.sandbox.worker import HARNESS, Profile, ServerSpec, sandbox_env

logger = logging.getLogger(__name__)


class LocalLauncher:
    backend = "local"

    def __init__(self, python: str | None = None) -> None:
        self.python = python or sys.executable
        readable_paths(self.python)  # an interpreter that cannot run fails here, once
        if os.geteuid() == 0:
            confined = (
                "Landlock keeps Python runs' opens to the system and work folders, but "
                if native.landlock_abi()
                else ""
            )
            logger.warning(
                "the local sandbox backend runs untrusted programs as root (without capabilities) "
                f"and without a file-system namespace: {confined}they can read what root reads, "
                "change permissions of root's files and reach unix sockets; install bubblewrap and "
                "use backend='bwrap'"
            )

    def spec(self, profile: Profile, cpu: int | None = None) -> ServerSpec:
        root = tempfile.mkdtemp(prefix="editforge-sandbox-")
        work_dir = os.path.join(root, "work")
        config = {
            "mode": "subreaper",
            "work_dir": work_dir,
            "scratch_dirs": [root],
            "nproc_base": _user_processes(),
            "unshare_net": not profile.network,
            "unshare_ipc": True,
            "coverage": profile.coverage,
            "network": profile.network,
            "read": readable_paths(self.python),
            "write": [root, "/dev/shm", *DEVICES],
            "native": native.built(self.python),
            "cpu": cpu,
        }
        argv = [self.python, "-I", HARNESS, json.dumps(config)]
        return ServerSpec(argv, sandbox_env(home=work_dir, tmp=work_dir), host_dir=root)


@functools.cache
def can_unshare_network() -> bool:
    """Whether a process of ours may enter a new network namespace (root, or user namespaces)."""
    code = "import ctypes, os; os._exit(ctypes.CDLL(None).unshare(0x40000000) != 0)"
    return subprocess.run([sys.executable, "-I", "-c", code], capture_output=True).returncode == 0


def _user_processes() -> int:
    """Processes our user already has: RLIMIT_NPROC counts them too (it ignores root anyway)."""
    if os.geteuid() == 0:
        return 0
    uid = str(os.getuid())
    count = 0
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/status") as f:
                count += any(line.startswith("Uid:") and line.split()[1] == uid for line in f)
        except OSError:
            continue
    return count
