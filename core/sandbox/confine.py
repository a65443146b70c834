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

import fcntl
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
HELD_FDS_FROM = 512  # where the system folders' descriptors are held (build_ruleset)


class Confinement:
    """The confinement steps, made through ``native`` (the ``_editforge_sys`` module)."""

    def __init__(self, native) -> None:
        self.native = native
        # path -> (O_PATH descriptor, is a folder) of the paths that are the same for every ruleset
        self._held: dict[str, tuple[int, bool]] = {}

    def landlock_abi(self) -> int:
        """The kernel's Landlock ABI version, 0 where Landlock is missing or disabled."""
        return self.native.landlock_abi()

    def build_ruleset(
        self, read: Iterable[str], write: Iterable[str], renewed: Iterable[str] = ()
    ) -> int | None:
        """A Landlock ruleset (its descriptor) allowing reads of ``read`` and everything in ``write``.

        Built once per server, or after each run where the scratch folders are new mounts; each
        run applies it with ``restrict``. Paths that do not exist are skipped. Paths at or under
        ``renewed`` (the folders mounted afresh after every run) are opened anew each time; the
        others (system folders, devices) are opened once and their ``O_PATH`` descriptors held
        (close-on-exec; every run's process closes them before its program starts). None where
        the kernel has no Landlock.
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
        roots = tuple(root.rstrip("/") for root in renewed)
        for paths, rights in ((read, READ), (write, handled)):
            for path in paths:
                self._allow(ruleset, path, rights & handled, roots)
        return ruleset

    def _allow(self, ruleset: int, path: str, rights: int, renewed: tuple[str, ...]) -> None:
        """Add ``path`` to the ruleset; its descriptor is held for the next rulesets unless it lies
        at or under one of the ``renewed`` folders (by its name or by where it leads)."""
        held = self._held.get(path)
        if held is None:
            try:
                fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
            except OSError:
                return
            held = fd, os.path.isdir(path)
            if _under(path, renewed) or _under(os.path.realpath(path), renewed):
                try:
                    self._add(ruleset, held, rights)
                finally:
                    os.close(fd)
                return
            self._held[path] = held = _out_of_the_way(fd), held[1]
        self._add(ruleset, held, rights)

    def _add(self, ruleset: int, held: tuple[int, bool], rights: int) -> None:
        fd, folder = held
        self.native.landlock_add_path(ruleset, fd, rights if folder else rights & FILE_RIGHTS)

    def restrict(self, ruleset: int) -> None:
        """Confine this process, and all it will start, to the ruleset; irreversible."""
        self.native.landlock_restrict(ruleset)

    def install_filter(self, program: bytes) -> None:
        """Apply a seccomp filter (seccomp.py's bytes) to this process and all it starts; irreversible."""
        self.native.seccomp_install(program)

    def drop_capabilities(self) -> None:
        """Clear the effective, permitted and inheritable capabilities (root stays uid 0 without them)."""
        self.native.drop_capabilities()


def _out_of_the_way(fd: int) -> int:
    """``fd`` moved to a high number (where the limit on descriptors allows), so that the ones a
    run receives take the low numbers they always had."""
    try:
        high = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, HELD_FDS_FROM)
    except OSError:
        return fd
    os.close(fd)
    return high


def _under(path: str, roots: tuple[str, ...]) -> bool:
    return any(path == root or path.startswith(root + "/") for root in roots)
