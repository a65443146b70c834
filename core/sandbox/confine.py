"""Kernel-enforced limits for one sandboxed run: Landlock file-access rules and no capabilities.

Path checks in Python (the harness's audit hook) can be sidestepped: ``os.open`` with a
``dir_fd``, a symlink flipped by a thread between the check and the open. Landlock (Linux
5.13+) makes the kernel itself refuse every open outside the allowed folders, whatever the
route, for the process and everything it starts. A Python run may then read and execute only
the system and interpreter folders, write only its scratch folders, use only a few devices
(no ioctl on others), open nothing under /proc but a few global files (not
``/proc/self/mem``, ``maps`` or ``fd``), and, from ABI 6, signal or reach abstract sockets of
no process outside its own run (the server included). Where the kernel lacks Landlock, ``build_ruleset`` returns None and the run goes on
without it (``ForkServerSandbox.guards()`` says so).

A run of a root server also drops every capability, so, like under bwrap, it cannot borrow the
server's descriptors (``pidfd_getfd``, ``/proc/<pid>/fd``) or ptrace it. Every run also gets
seccomp.py's filter (``install_filter``): no keyrings, no io_uring, sockets of allowed families only.

Standard library and ctypes only: harness.py imports this file from its own folder.
"""

from __future__ import annotations

import ctypes
import os
from collections.abc import Iterable

# Generic syscall numbers (the same on x86-64 and arm64 for these recent calls).
SYS_LANDLOCK_CREATE_RULESET, SYS_LANDLOCK_ADD_RULE, SYS_LANDLOCK_RESTRICT_SELF = 444, 445, 446
LANDLOCK_CREATE_RULESET_VERSION = 1
LANDLOCK_RULE_PATH_BENEATH = 1
PR_SET_NO_NEW_PRIVS, PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 38, 22, 2
LINUX_CAPABILITY_VERSION_3 = 0x20080522

EXECUTE, WRITE_FILE, READ_FILE, READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
REMOVE_DIR, REMOVE_FILE, MAKE_CHAR, MAKE_DIR = 1 << 4, 1 << 5, 1 << 6, 1 << 7
MAKE_REG, MAKE_SOCK, MAKE_FIFO, MAKE_BLOCK, MAKE_SYM = 1 << 8, 1 << 9, 1 << 10, 1 << 11, 1 << 12
REFER, TRUNCATE, IOCTL_DEV = 1 << 13, 1 << 14, 1 << 15  # ABI 2, 3 and 5
ABI_1 = (1 << 13) - 1
# the only rights a rule on a file may carry
FILE_RIGHTS = EXECUTE | WRITE_FILE | READ_FILE | TRUNCATE | IOCTL_DEV
# ABI 6: no signals to, and no abstract unix sockets of, processes outside the confined run
SCOPE_ABSTRACT_UNIX_SOCKET, SCOPE_SIGNAL = 1 << 0, 1 << 1
READ = EXECUTE | READ_FILE | READ_DIR

_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long


class _RulesetAttr(ctypes.Structure):
    _fields_ = [
        ("handled_access_fs", ctypes.c_uint64),
        ("handled_access_net", ctypes.c_uint64),  # ABI 4; left 0: the network is a namespace's job
        ("scoped", ctypes.c_uint64),  # ABI 6
    ]


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


class _PathBeneath(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


def landlock_abi() -> int:
    """The kernel's Landlock ABI version, 0 where Landlock is missing or disabled."""
    version = _libc.syscall(SYS_LANDLOCK_CREATE_RULESET, None, 0, LANDLOCK_CREATE_RULESET_VERSION)
    return max(int(version), 0)


def build_ruleset(read: Iterable[str], write: Iterable[str]) -> int | None:
    """A Landlock ruleset (its descriptor) allowing reads of ``read`` and everything in ``write``.

    Built once per server; each run applies it with ``restrict``. Paths that do not exist are
    skipped. None where the kernel has no Landlock.
    """
    abi = landlock_abi()
    if abi < 1:
        return None
    handled = (
        ABI_1 | (REFER if abi >= 2 else 0) | (TRUNCATE if abi >= 3 else 0) | (IOCTL_DEV if abi >= 5 else 0)
    )
    scoped = SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL if abi >= 6 else 0
    attr = _RulesetAttr(handled, 0, scoped)
    size = ctypes.sizeof(attr) if abi >= 6 else 8  # older kernels know only the first field
    ruleset = _libc.syscall(SYS_LANDLOCK_CREATE_RULESET, ctypes.byref(attr), size, 0)
    if ruleset < 0:
        return None
    for paths, rights in ((read, READ), (write, handled)):
        for path in paths:
            _allow(int(ruleset), path, rights & handled)
    return int(ruleset)


def _allow(ruleset: int, path: str, rights: int) -> None:
    try:
        fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    except OSError:
        return
    try:
        if not os.path.isdir(path):
            rights &= FILE_RIGHTS
        rule = _PathBeneath(rights, fd)
        if _libc.syscall(SYS_LANDLOCK_ADD_RULE, ruleset, LANDLOCK_RULE_PATH_BENEATH, ctypes.byref(rule), 0):
            raise OSError(ctypes.get_errno(), f"landlock_add_rule({path!r})")
    finally:
        os.close(fd)


def restrict(ruleset: int) -> None:
    """Confine this process, and all it will start, to the ruleset; irreversible."""
    if _libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0):
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS)")
    if _libc.syscall(SYS_LANDLOCK_RESTRICT_SELF, ruleset, 0):
        raise OSError(ctypes.get_errno(), "landlock_restrict_self")


def install_filter(program: bytes) -> None:
    """Apply a seccomp filter (seccomp.py's bytes) to this process and all it starts; irreversible."""
    buffer = ctypes.create_string_buffer(program, len(program))
    fprog = _SockFprog(len(program) // 8, ctypes.cast(buffer, ctypes.c_void_p))
    if _libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0):
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS)")
    if _libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(fprog), 0, 0):
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_SECCOMP)")


def drop_capabilities() -> None:
    """Clear the effective, permitted and inheritable capabilities (root stays uid 0 without them)."""
    header = (ctypes.c_uint32 * 2)(LINUX_CAPABILITY_VERSION_3, 0)
    data = (ctypes.c_uint32 * 6)()  # two {effective, permitted, inheritable} words, all zero
    if _libc.capset(header, data):
        raise OSError(ctypes.get_errno(), "capset")
