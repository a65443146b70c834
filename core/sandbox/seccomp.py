"""A seccomp filter for each sandboxed run: no kernel keyrings, no io_uring, and sockets only of
the families a run may use (`socket_families`): never AF_VSOCK, AF_PACKET, AF_ALG, Bluetooth...

Namespaces do not cover everything: bubblewrap's leave the host's session keyring shared (a run
could read a host key, or plant one that outlives it, and the persistent keyring carries state
from one run to the next) and ``--unshare-net`` does not cover ``AF_VSOCK``, whose binds reach
the host. The filter makes those syscalls fail with EPERM, for the run and everything it starts
(a filter survives fork and execve and cannot be removed). io_uring is refused because its
operations (a socket op among them) are not seen by seccomp. A foreign syscall ABI (i386 or
x32 calls on x86-64) ends the process: the numbers below would not match it.

Standard library only: harness.py imports this file from its own folder. `program()` builds the
classic-BPF bytes; confine.py installs them.
"""

from __future__ import annotations

import errno
import struct

AF_UNIX, AF_INET, AF_INET6, AF_NETLINK = 1, 2, 10, 16
NETWORK_FAMILIES = (AF_UNIX, AF_INET, AF_INET6, AF_NETLINK)  # getaddrinfo asks netlink
AUDIT_ARCH = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}
X32_BIT = 0x40000000
SYSCALLS = {
    "x86_64": {
        "socket": 41,
        "socketpair": 53,
        "add_key": 248,
        "request_key": 249,
        "keyctl": 250,
        "io_uring_setup": 425,
        "io_uring_enter": 426,
        "io_uring_register": 427,
        "clone": 56,
        "unshare": 272,
        "clone3": 435,
        "kill": 62,
        "tkill": 200,
        "tgkill": 234,
        "rt_sigqueueinfo": 129,
        "rt_tgsigqueueinfo": 297,
        "pidfd_open": 434,
        "prlimit64": 302,
        "sched_setparam": 142,
        "sched_setscheduler": 144,
        "sched_setaffinity": 203,
        "sched_setattr": 314,
        "setpriority": 141,
        "ioprio_set": 251,
        "pidfd_send_signal": 424,
        "fcntl": 72,
        "ioctl": 16,
    },
    "aarch64": {
        "socket": 198,
        "socketpair": 199,
        "add_key": 217,
        "request_key": 218,
        "keyctl": 219,
        "io_uring_setup": 425,
        "io_uring_enter": 426,
        "io_uring_register": 427,
        "clone": 220,
        "unshare": 97,
        "clone3": 435,
        "kill": 129,
        "tkill": 130,
        "tgkill": 131,
        "rt_sigqueueinfo": 138,
        "rt_tgsigqueueinfo": 240,
        "pidfd_open": 434,
        "prlimit64": 261,
        "sched_setparam": 118,
        "sched_setscheduler": 119,
        "sched_setaffinity": 122,
        "sched_setattr": 274,
        "setpriority": 140,
        "ioprio_set": 30,
        "pidfd_send_signal": 424,
        "fcntl": 25,
        "ioctl": 29,
    },
}
DENIED = ("add_key", "request_key", "keyctl", "io_uring_setup", "io_uring_enter", "io_uring_register")
SOCKET_CALLS = ("socket", "socketpair")
NAMESPACE_CALLS = ("clone", "unshare")  # flags in the first argument
CLONE_NEWUSER = 0x10000000

# classic BPF and seccomp constants (linux/filter.h, linux/seccomp.h)
LD_ABS_W, JEQ_K, JGE_K, JSET_K, RET_K = 0x20, 0x15, 0x35, 0x45, 0x06
RET_ALLOW, RET_KILL_PROCESS, RET_ERRNO = 0x7FFF0000, 0x80000000, 0x00050000
NR_OFFSET, ARCH_OFFSET = 0, 4  # struct seccomp_data
ARG0_OFFSET, ARG1_OFFSET = 16, 24  # its first two arguments (little-endian: their low words)
_INSN = struct.Struct("=HBBI")


def socket_families(network: bool, private_network: bool) -> tuple[int, ...]:
    """What a run may open sockets of: unix sockets; the internet's too inside a network namespace
    of its own (only its loopback is there) or when the network is allowed (then netlink as well)."""
    if network:
        return NETWORK_FAMILIES
    return (AF_UNIX, AF_INET, AF_INET6) if private_network else (AF_UNIX,)


def supported(machine: str) -> bool:
    return machine in AUDIT_ARCH


def program(machine: str, families: tuple[int, ...] = (AF_UNIX,)) -> bytes:
    """The filter for `machine` (`os.uname().machine`) allowing sockets of `families` only.

    Also refused: a new user namespace (`clone`/`unshare` with CLONE_NEWUSER; bubblewrap already
    forbids them, the local backend relies on this), and `clone3`, whose flags sit in memory a
    filter cannot read: it answers ENOSYS, on which the C library falls back to `clone`."""
    calls = SYSCALLS[machine]
    code: list[tuple] = [  # ([label,] op, jump label if true, jump label if false, k); None: the next row
        (LD_ABS_W, None, None, ARCH_OFFSET),
        (JEQ_K, None, "kill", AUDIT_ARCH[machine]),
        (LD_ABS_W, None, None, NR_OFFSET),
    ]
    if machine == "x86_64":
        code.append((JGE_K, "kill", None, X32_BIT))
    code += [(JEQ_K, "deny", None, calls[name]) for name in DENIED]
    code.append((JEQ_K, "enosys", None, calls["clone3"]))
    code += [(JEQ_K, "flags", None, calls[name]) for name in NAMESPACE_CALLS]
    code += [(JEQ_K, "family", None, calls[name]) for name in SOCKET_CALLS]
    code += [
        (RET_K, None, None, RET_ALLOW),
        ("flags", LD_ABS_W, None, None, ARG0_OFFSET),
        (JSET_K, "deny", "allow", CLONE_NEWUSER),
        ("family", LD_ABS_W, None, None, ARG0_OFFSET),
    ]
    code += [(JEQ_K, "allow", None, family) for family in families]
    code += [  # every jump goes forward: the verdicts come last
        (RET_K, None, None, RET_ERRNO | errno.EPERM),
        ("allow", RET_K, None, None, RET_ALLOW),
        ("deny", RET_K, None, None, RET_ERRNO | errno.EPERM),
        ("enosys", RET_K, None, None, RET_ERRNO | errno.ENOSYS),
        ("kill", RET_K, None, None, RET_KILL_PROCESS),
    ]
    return _assemble(code)


# Calls whose first argument names a process (or, negative, a process group; -1: every process):
# signals, pidfds, resource limits and scheduling, which another process of the same user may change.
PID_CALLS = (
    "kill",
    "tkill",
    "tgkill",
    "rt_sigqueueinfo",
    "rt_tgsigqueueinfo",
    "pidfd_open",
    "prlimit64",
    "sched_setparam",
    "sched_setscheduler",
    "sched_setaffinity",
    "sched_setattr",
)
# Calls of (which, who): only the caller's own process or group (who = 0), never a whole user's
# processes (PRIO_USER, IOPRIO_WHO_USER), which reaches past every namespace to the host's.
WHO_CALLS = {"setpriority": 2, "ioprio_set": 3}  # the call -> its "every process of a user" value
# Signals no pid argument names: a pidfd (one opened from /proc/<pid> too) takes any signal, and a
# descriptor's owner gets the kernel's SIGIO (any signal, with F_SETSIG) on its I/O.
SIGNAL_BY_DESCRIPTOR = "pidfd_send_signal"
OWNER_COMMANDS = {"fcntl": (8, 15), "ioctl": (0x8901, 0x8902)}  # F_SETOWN(_EX); FIOSETOWN, SIOCSPGRP


def protect(machine: str, pids: tuple[int, ...]) -> bytes:
    """A filter that refuses (EPERM) signals, pidfds, rlimit and scheduling changes aimed at
    ``pids`` (the sandbox's own server and trusted processes), at their process groups, and at
    every process at once (``kill(-1)``); priority changes of anything but the caller's own
    process or group; and signals sent without a pid (``pidfd_send_signal``, a descriptor's owner
    set for SIGIO), for the process that installs it and all it starts. Stacked on ``program``'s."""
    calls = SYSCALLS[machine]
    named = [p for p in pids if p > 0]  # 0 is the caller itself (a parent outside our namespace reads 0)
    targets = {-1, *named, *(-p for p in named)}
    code: list[tuple] = [(LD_ABS_W, None, None, NR_OFFSET)]
    code += [(JEQ_K, "pid", None, calls[name]) for name in PID_CALLS]
    code += [(JEQ_K, name, None, calls[name]) for name in WHO_CALLS]
    code.append((JEQ_K, "deny", None, calls[SIGNAL_BY_DESCRIPTOR]))
    code += [(JEQ_K, name, None, calls[name]) for name in OWNER_COMMANDS]
    code += [(RET_K, None, None, RET_ALLOW), ("pid", LD_ABS_W, None, None, ARG0_OFFSET)]
    code += [(JEQ_K, "deny", None, target & 0xFFFFFFFF) for target in sorted(targets)]
    code.append((RET_K, None, None, RET_ALLOW))
    for name, every in WHO_CALLS.items():
        code += [
            (name, LD_ABS_W, None, None, ARG1_OFFSET),
            (JEQ_K, None, "deny", 0),
            (LD_ABS_W, None, None, ARG0_OFFSET),
            (JEQ_K, "deny", None, every),
            (RET_K, None, None, RET_ALLOW),
        ]
    for name, commands in OWNER_COMMANDS.items():
        code.append((name, LD_ABS_W, None, None, ARG1_OFFSET))
        code += [(JEQ_K, "deny", None, command) for command in commands]
        code.append((RET_K, None, None, RET_ALLOW))
    code.append(("deny", RET_K, None, None, RET_ERRNO | errno.EPERM))
    return _assemble(code)


def _assemble(code: list[tuple]) -> bytes:
    """Classic BPF from (label?, op, jump-if-true, jump-if-false, k) rows: labels become offsets."""
    rows = [row if isinstance(row[0], str) else (None, *row) for row in code]
    where = {label: i for i, (label, *_) in enumerate(rows) if label}

    def offset(i: int, label: str | None) -> int:
        jump = 0 if label is None else where[label] - i - 1
        if not 0 <= jump <= 255:
            raise ValueError(f"row {i}: a classic BPF jump goes 0-255 rows forward, not {jump}")
        return jump

    return b"".join(
        _INSN.pack(op, offset(i, jt), offset(i, jf), k) for i, (_, op, jt, jf, k) in enumerate(rows)
    )
