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
    },
}
DENIED = ("add_key", "request_key", "keyctl", "io_uring_setup", "io_uring_enter", "io_uring_register")
SOCKET_CALLS = ("socket", "socketpair")

# classic BPF and seccomp constants (linux/filter.h, linux/seccomp.h)
LD_ABS_W, JEQ_K, JGE_K, RET_K = 0x20, 0x15, 0x35, 0x06
RET_ALLOW, RET_KILL_PROCESS, RET_ERRNO = 0x7FFF0000, 0x80000000, 0x00050000
NR_OFFSET, ARCH_OFFSET, ARG0_OFFSET = 0, 4, 16  # struct seccomp_data (little-endian arg0: low word)
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
    """The filter for `machine` (`os.uname().machine`) allowing sockets of `families` only."""
    calls = SYSCALLS[machine]
    deny = RET_ERRNO | errno.EPERM
    code: list[tuple[int, int, int, int]] = [  # (op, jump if true, jump if false, k)
        (LD_ABS_W, 0, 0, ARCH_OFFSET),
        (JEQ_K, 1, 0, AUDIT_ARCH[machine]),
        (RET_K, 0, 0, RET_KILL_PROCESS),
        (LD_ABS_W, 0, 0, NR_OFFSET),
    ]
    if machine == "x86_64":
        code += [(JGE_K, 0, 1, X32_BIT), (RET_K, 0, 0, RET_KILL_PROCESS)]
    for name in DENIED:
        code += [(JEQ_K, 0, 1, calls[name]), (RET_K, 0, 0, deny)]
    # sockets: jump over the final "allow" to the family check
    for i, name in enumerate(SOCKET_CALLS):
        code.append((JEQ_K, len(SOCKET_CALLS) - i, 0, calls[name]))
    code += [(RET_K, 0, 0, RET_ALLOW), (LD_ABS_W, 0, 0, ARG0_OFFSET)]
    for family in families:
        code += [(JEQ_K, 0, 1, family), (RET_K, 0, 0, RET_ALLOW)]
    code.append((RET_K, 0, 0, deny))
    return b"".join(_INSN.pack(*insn) for insn in code)
