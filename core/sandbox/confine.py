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
seccomp.py's filter (``install_filter``, which the server applies to itself once; every run, its
child, inherits it): no keyrings, no io_uring, sockets of allowed families only.

Standard library only, the system calls made through the ``_editforge_sys`` C module (native.py):
harness.py imports this file from its own folder.
"""

from __future__ import annotations

import os
from collections.abc import Iterable

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


class Confinement:
    """The confinement steps, made through ``native`` (the ``_editforge_sys`` module)."""

    def __init__(self, native) -> None:
        self.native = native

    def landlock_abi(self) -> int:
        """The kernel's Landlock ABI version, 0 where Landlock is missing or disabled."""
        return self.native.landlock_abi()

    def build_ruleset(self, read: Iterable[str], write: Iterable[str]) -> int | None:
        """A Landlock ruleset (its descriptor) allowing reads of ``read`` and everything in ``write``.

        Built once per server; each run applies it with ``restrict``. Paths that do not exist are
        skipped. None where the kernel has no Landlock.
        """
        abi = self.landlock_abi()
        if abi < 1:
            return None
        handled = (
            ABI_1
            | (REFER if abi >= 2 else 0)
            | (TRUNCATE if abi >= 3 else 0)
            | (IOCTL_DEV if abi >= 5 else 0)
        )
        scoped = SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL if abi >= 6 else 0
        try:
            ruleset = self.native.landlock_create_ruleset(handled, scoped)
        except OSError:
            return None
        for paths, rights in ((read, READ), (write, handled)):
            for path in paths:
                self._allow(ruleset, path, rights & handled)
        return ruleset

    def _allow(self, ruleset: int, path: str, rights: int) -> None:
        try:
            fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
        except OSError:
            return
        try:
            if not os.path.isdir(path):
                rights &= FILE_RIGHTS
            self.native.landlock_add_path(ruleset, fd, rights)
        finally:
            os.close(fd)

    def restrict(self, ruleset: int) -> None:
        """Confine this process, and all it will start, to the ruleset; irreversible."""
        self.native.landlock_restrict(ruleset)

    def install_filter(self, program: bytes) -> None:
        """Apply a seccomp filter (seccomp.py's bytes) to this process and all it starts; irreversible."""
        self.native.seccomp_install(program)

    def drop_capabilities(self) -> None:
        """Clear the effective, permitted and inheritable capabilities (root stays uid 0 without them)."""
        self.native.drop_capabilities()
