"""The trusted process of split runs serves run after run: nothing one run's tests change reaches
the next, and where a run leaves what cannot be put back (a thread, a replaced module, a hang, a
crash, a MemoryError) the next run gets a fresh process and still passes.

The pid the tests print shows which: the same process put the state back, or a new one started.
"""

from __future__ import annotations

import dataclasses
import json
import re
import socket
import textwrap
import time

import pytest

from core.sandbox import SandboxLimits, bwrap_available, make_sandbox

LIMITS = SandboxLimits(timeout_s=3.0, memory_mb=512, max_output_bytes=100_000, max_processes=64, disk_mb=64)
BACKENDS = [
    pytest.param(
        "bwrap", marks=pytest.mark.skipif(not bwrap_available(), reason="bubblewrap cannot run here")
    ),
    "local",
]
PROGRAM = "def inc(x):\n    return x + 1\n"
PID = "import os\nprint('trusted pid', os.getpid())\n"


@pytest.fixture(params=BACKENDS)
def sandbox(request):
    # one worker: every run goes to the same server, so to the same trusted process where it lives on
    with make_sandbox(request.param, limits=LIMITS, workers=1, strict=False) as sb:
        yield sb


def run(sandbox, tests: str, limits: SandboxLimits = LIMITS):
    return sandbox.run(
        PROGRAM, textwrap.dedent(tests) + PID + "assert inc(1) == 2\n", split=True, limits=limits
    )


def trusted_pid(result) -> int:
    found = re.findall(r"trusted pid (\d+)", result.stdout)
    assert found, result
    return int(found[-1])


CHANGE_EVERYTHING = """
import builtins, decimal, os, random, signal, sys, warnings
warnings.simplefilter("error")
sys.setrecursionlimit(321)
decimal.getcontext().prec = 3
os.environ["EDITFORGE_LEAK"] = "1"
print("umask", os.umask(0o077))
builtins.leaked = "from the first run"
sys.path.append("/leaked")
sys.displayhook = print
signal.signal(signal.SIGUSR1, lambda *args: None)
signal.alarm(100)
random.seed(7)
print("first draw", random.random())
"""

EXPECT_PRISTINE = """
import builtins, decimal, os, random, signal, sys, warnings
assert not [f for f in warnings.filters if f[0] == "error"], warnings.filters
assert sys.getrecursionlimit() != 321
assert decimal.getcontext().prec == 28
assert "EDITFORGE_LEAK" not in os.environ
print("umask", os.umask(0o022))
assert not hasattr(builtins, "leaked")
assert "/leaked" not in sys.path
assert sys.displayhook is sys.__displayhook__
assert signal.getsignal(signal.SIGUSR1) == signal.SIG_DFL
assert signal.alarm(0) == 0
print("second draw", random.random())
"""


def test_what_one_runs_tests_change_is_put_back_before_the_next(sandbox):
    first = run(sandbox, CHANGE_EVERYTHING)
    assert first.passed, first
    second = run(sandbox, EXPECT_PRISTINE)
    assert second.passed, second
    assert second.tests_passed == second.tests_total == 10
    assert re.findall(r"umask (\d+)", first.stdout) == re.findall(r"umask (\d+)", second.stdout)
    # the same process put it all back (a fresh one would prove nothing)
    assert trusted_pid(first) == trusted_pid(second)
    # random is reseeded as a forked process would be: the second run does not replay the seed
    assert "second draw" in second.stdout
    seeded = re.search(r"first draw (\S+)", first.stdout).group(1)
    assert seeded not in second.stdout


@pytest.mark.parametrize(
    "leftover",
    [
        "import threading, time\nthreading.Thread(target=time.sleep, args=(30,), daemon=True).start()\n",
        "import sys, types\nsys.modules['json'] = types.ModuleType('json')\n",
        "import sys\ndel sys.modules['random']\n",
        "import resource\nresource.setrlimit(resource.RLIMIT_NOFILE, (64, 64))\n",
        "import os\nos.nice(1)\n",
    ],
    ids=["thread", "replaced_module", "removed_module", "rlimit", "priority"],
)
def test_state_that_cannot_be_put_back_retires_the_process(sandbox, leftover):
    before = run(sandbox, "")
    leaving = run(sandbox, leftover)
    after = run(sandbox, "import json\nassert json.dumps([1]) == '[1]'\n")
    assert before.passed and leaving.passed and after.passed, (before, leaving, after)
    assert trusted_pid(before) == trusted_pid(leaving) != trusted_pid(after)


@pytest.mark.parametrize(
    "tests, status",
    [
        ("while True:\n    pass\n", "timeout"),
        ("import os\nos._exit(3)\n", "failed"),
        ("import signal, os\nos.kill(os.getpid(), signal.SIGKILL)\n", "failed"),
        ("hog = bytearray(2 << 30)\n", "memory"),
    ],
    ids=["hang", "exit", "killed", "memory"],
)
def test_a_trusted_process_that_hangs_or_dies_is_replaced(sandbox, tests, status):
    before = run(sandbox, "")
    broken = sandbox.run(PROGRAM, tests, split=True)
    after = run(sandbox, "")
    assert broken.status == status and not broken.passed, broken
    assert "\n" not in broken.detail
    if status == "failed":
        assert "trusted test process ended without a report" in broken.detail
    assert before.passed and after.passed, (before, after)
    assert trusted_pid(before) != trusted_pid(after)


def test_other_limits_get_their_own_trusted_process(sandbox):
    first = run(sandbox, "")
    other = run(sandbox, "", limits=dataclasses.replace(LIMITS, memory_mb=256))
    again = run(sandbox, "", limits=dataclasses.replace(LIMITS, memory_mb=256))
    assert first.passed and other.passed and again.passed
    assert trusted_pid(first) != trusted_pid(other) == trusted_pid(again)


def test_a_candidate_that_dies_mid_run_leaves_the_trusted_process_serving(sandbox):
    before = run(sandbox, "")
    dying = sandbox.run("import os\ndef inc(x):\n    os._exit(0)\n", PID + "assert inc(1) == 2\n", split=True)
    after = run(sandbox, "")
    assert not dying.passed and "\n" not in dying.detail, dying
    assert before.passed and after.passed
    assert trusted_pid(before) == trusted_pid(dying) == trusted_pid(after)


# A later run's program against the trusted process, which holds earlier runs' tests.
READ_THE_TRUSTED_PROCESS = """
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
class IOVec(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]
PAGE = 1 << 16
BUF = ctypes.create_string_buffer(PAGE)
def inc(x):
    reads = found = 0
    anchors = {id(o) & ~(PAGE - 1) for o in (os, ctypes, inc, {}, "")}
    for pid in range(1, 200):
        if pid == os.getpid():
            continue
        for path in (f"/proc/{pid}/mem", f"/proc/{pid}/environ", f"/proc/{pid}/cmdline"):
            try:
                with open(path, "rb") as f:
                    found += b"hidden-marker" in f.read(1 << 20)
                    reads += 1
            except OSError:
                pass
        for anchor in anchors:
            for step in range(-16, 16):
                local = IOVec(ctypes.cast(BUF, ctypes.c_void_p), PAGE)
                remote = IOVec(anchor + step * PAGE, PAGE)
                if libc.process_vm_readv(pid, ctypes.byref(local), 1, ctypes.byref(remote), 1, 0) > 0:
                    reads += 1
                    found += b"hidden-marker" in BUF.raw
    print("reads", reads, "found", found)
    return x + 1
"""

SIGNAL_VARIANTS = {
    "kill_every_pid": "for pid in range(1, 400):\n    if pid != os.getpid():\n        for sig in (signal.SIGSTOP, signal.SIGKILL):\n            try:\n                os.kill(pid, sig)\n            except OSError:\n                continue\n",
    "killpg_every_group": "for pgid in range(1, 400):\n    if pgid != os.getpgid(0):\n        try:\n            os.killpg(pgid, signal.SIGKILL)\n        except OSError:\n            continue\n",
    "pidfd_send_signal": "for pid in range(1, 400):\n    if pid != os.getpid():\n        try:\n            fd = os.pidfd_open(pid)\n            signal.pidfd_send_signal(fd, signal.SIGKILL)\n        except OSError:\n            continue\n",
}
BORROW_ITS_DESCRIPTORS = """
import os, socket
def inc(x):
    borrowed = 0
    for pid in range(1, 200):
        if pid == os.getpid():
            continue
        for target in range(0, 16):
            try:
                pidfd = os.pidfd_open(pid)
                fd = os.pidfd_getfd(pidfd, target) if hasattr(os, "pidfd_getfd") else -1
            except (OSError, AttributeError):
                continue
            if fd >= 0:
                borrowed += 1
    print("reads", borrowed, "found", borrowed)  # any descriptor of another process is a find
    return x + 1
"""
READ_VARIANTS = {
    "proc_files_and_vm_readv": READ_THE_TRUSTED_PROCESS,
    "proc_fd_folder": READ_THE_TRUSTED_PROCESS.replace(
        '(f"/proc/{pid}/mem", f"/proc/{pid}/environ", f"/proc/{pid}/cmdline")',
        '[f"/proc/{pid}/fd/{n}" for n in range(16)] + [f"/proc/{pid}/map_files"]',
    ),
    "descriptors_borrowed": BORROW_ITS_DESCRIPTORS,
}


@pytest.mark.parametrize("scan", list(READ_VARIANTS.values()), ids=list(READ_VARIANTS))
def test_a_later_program_cannot_read_earlier_tests_out_of_the_trusted_process(sandbox, scan):
    hidden = run(sandbox, "HIDDEN = 'hidden-marker' * 3\nassert HIDDEN\n")
    result = sandbox.run(scan, PID + "assert inc(1) == 2\n", split=True)
    assert hidden.passed and result.passed, (hidden, result)
    assert trusted_pid(hidden) == trusted_pid(result)  # the same process holds the earlier tests
    assert re.search(r"reads \d+ found 0\b", result.stdout), result.stdout


@pytest.mark.parametrize("signals", list(SIGNAL_VARIANTS.values()), ids=list(SIGNAL_VARIANTS))
def test_a_program_that_signals_every_process_gains_nothing(sandbox, signals):
    program = (
        "import os, signal\ndef inc(x):\n" + textwrap.indent(signals, "    ") + "    return x + 2  # wrong\n"
    )
    before = run(sandbox, "")
    wrong = sandbox.run(program, "assert inc(1) == 2\n", split=True)
    after = run(sandbox, "")
    assert not wrong.passed and wrong.status in ("failed", "timeout"), wrong
    assert before.passed and after.passed, (before, after)


def test_the_scan_finds_the_marker_where_nothing_stops_it(capfd):
    """The control of the test above: run unconfined against this process (which holds the marker),
    the same scan reads it, so the sandbox's "found 0" is the sandbox's doing."""
    import os

    held = "hidden-marker" * 3  # noqa: F841 - kept alive in this process for the scan to find
    namespace: dict = {}
    exec(READ_THE_TRUSTED_PROCESS.replace("range(1, 200)", f"[{os.getpid()}]"), namespace)
    pid = os.fork()
    if pid == 0:
        try:
            namespace["inc"](1)
        finally:
            os._exit(0)
    os.waitpid(pid, 0)
    reads, found = map(int, re.search(r"reads (\d+) found (\d+)", capfd.readouterr().out).groups())
    assert reads > 0 and found > 0


# A run's program against the trusted process of this moment, whose pid the tests hand it: each call
# that acts on another process by pid, and the ones that reach every process of the user.
REACH_THE_TRUSTED_PROCESS = """
import errno, os, resource, signal
def reach(pid):
    done = []  # each call that was not refused (EPERM), with its errno where it failed otherwise
    for name, call in [
        ("prlimit", lambda: resource.prlimit(pid, resource.RLIMIT_NOFILE, (8, 8))),
        ("affinity", lambda: os.sched_setaffinity(pid, {0})),
        ("scheduler", lambda: os.sched_setscheduler(pid, os.SCHED_BATCH, os.sched_param(0))),
        ("priority", lambda: os.setpriority(os.PRIO_PROCESS, pid, 19)),
        ("group priority", lambda: os.setpriority(os.PRIO_PGRP, pid, 19)),
        ("user priority", lambda: os.setpriority(os.PRIO_USER, 0, 19)),
        ("stop", lambda: os.kill(pid, signal.SIGSTOP)),
        ("usr1", lambda: os.kill(pid, signal.SIGUSR1)),
        ("group", lambda: os.killpg(pid, signal.SIGSTOP)),
    ]:
        try:
            call()
            done.append(name)
        except OSError as error:
            if error.errno != errno.EPERM:
                done.append((name, error.errno))
    os.nice(1)  # its own priority stays its own
    return done
"""


def test_a_run_cannot_limit_slow_or_signal_the_trusted_process(sandbox):
    """Another process of the same user may change a process's limits, priority and CPUs, which
    Landlock's scopes do not cover (and its signal scope needs ABI 6): the trusted process is out of
    reach of every run's process by pid (seccomp.protect), split or not, so nothing one sample does
    fails the next sample's tests."""
    split = sandbox.run(REACH_THE_TRUSTED_PROCESS, PID + "assert reach(os.getpid()) == []\n", split=True)
    assert split.passed, split
    program = REACH_THE_TRUSTED_PROCESS + f"assert reach({trusted_pid(split)}) == []\n"
    in_process = sandbox.run(program, "", split=False)
    assert in_process.passed, in_process
    after = run(sandbox, "")
    assert after.passed and trusted_pid(after) == trusted_pid(split), after


def test_a_trusted_process_that_died_between_runs_is_replaced_for_the_next(sandbox):
    """It died after sending its outcome (here its own fork kills it): the next run, which owes it
    nothing, gets a fresh one and passes."""
    dies_later = "import os, signal, time\nif os.fork() == 0:\n    time.sleep(0.3)\n    os.kill(os.getppid(), signal.SIGKILL)\n    os._exit(0)\n"
    first = run(sandbox, dies_later)
    assert first.passed, first
    time.sleep(1.0)
    after = run(sandbox, "")
    assert after.passed, after
    assert trusted_pid(after) != trusted_pid(first)


def test_an_exception_the_program_names_past_any_message_fails_its_run_alone(sandbox):
    """The program chooses its exception's name, which the tests' report carries: the report still
    fits the one message the server reads whole, and the next run is served as always."""
    huge = "class E(Exception):\n    pass\nE.__qualname__ = 'E' * 100_000\ndef inc(x):\n    raise E('x')\n"
    failing = sandbox.run(huge, PID + "assert inc(1) == 2\n", split=True)
    assert failing.status == "failed" and failing.detail.startswith("EEE") and len(failing.detail) <= 500
    after = run(sandbox, "")
    assert after.passed and trusted_pid(after) == trusted_pid(failing)


def test_an_outcome_the_server_cannot_read_whole_retires_the_trusted_process():
    """An outcome cut short (more than one message holds), none at all, or not a report: the
    process that sent it is replaced before the next run (`retires`); a readable one is kept."""
    from core.sandbox.report_channel import retires
    from core.sandbox.trusted_server import _MESSAGE, TrustedClient, _message

    assert not retires(b'{"passed": true, "tests_passed": 1}')
    assert retires(b'{"passed": true, "retire": "1000 runs served"}')
    assert all(retires(bad) for bad in (None, b"", b'{"passed": tr', b"[1]", b"[" * 100_000))
    server, trusted = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    client = TrustedClient(0, server, {})
    trusted.send(b"x" * (_MESSAGE + 1))
    assert client.receive() == b""
    trusted.send(_message({"passed": False, "error": "E" * (_MESSAGE * 2), "lines": list(range(20_000))}))
    report = json.loads(client.receive())
    assert "lines" not in report and len(report["error"]) == 2000
    measured = {"passed": True, "lines": {"tests": [1], "program": [2]}}
    assert json.loads(_message(measured)) == measured  # what fits is sent as it is
    server.close()
    trusted.close()


# Signals that no pid argument names: the kernel's SIGIO to a descriptor's owner (any signal, with
# F_SETSIG), and a pidfd opened from /proc/<pid>, aimed at the trusted process.
SIGNAL_WITHOUT_A_PID = """
import errno, fcntl, os, signal, socket, struct, sys
def owner(fd, pid):  # SIGSTOP, not SIGIO, on the descriptor's I/O
    fcntl.fcntl(fd, 10, signal.SIGSTOP)  # F_SETSIG
    fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) | os.O_ASYNC)
def by_fcntl(pid):
    r, w = os.pipe()
    fcntl.fcntl(r, fcntl.F_SETOWN, pid)
    owner(r, pid)
    os.write(w, b"x")
def by_fcntl_ex(pid):
    r, w = os.pipe()
    fcntl.fcntl(r, 15, struct.pack("ii", 1, pid))  # F_SETOWN_EX, F_OWNER_PID
    owner(r, pid)
    os.write(w, b"x")
def by_ioctl(pid):
    a, b = socket.socketpair()
    fcntl.ioctl(a, 0x8901, struct.pack("i", pid))  # FIOSETOWN
    owner(a.fileno(), pid)
    b.send(b"x")
def by_pidfd(pid):
    signal.pidfd_send_signal(os.open(f"/proc/{pid}", os.O_RDONLY | os.O_DIRECTORY), signal.SIGSTOP)
def attack(pid):
    sent = []  # each route not refused (EPERM; EACCES: Landlock refuses /proc/<pid> itself), else its errno
    for route in (by_fcntl, by_fcntl_ex, by_ioctl, by_pidfd):
        try:
            route(pid)
            sent.append(route.__name__)
        except OSError as error:
            if error.errno not in (errno.EPERM, errno.EACCES):
                sent.append((route.__name__, error.errno))
    return sent
if __name__ == "__main__" and len(sys.argv) > 1:
    print("sent", attack(int(sys.argv[1])))
"""


@pytest.mark.parametrize("split", [True, False], ids=["split", "command"])
def test_no_signal_without_a_pid_reaches_the_trusted_process(sandbox, split):
    """A run (a command run has no Landlock; a Python run below Landlock ABI 6 has no signal scope)
    makes the trusted process a descriptor's owner for SIGIO, or opens a pidfd of it from /proc:
    both are refused (seccomp.protect), and the next split run is served as always."""
    before = run(sandbox, "")
    if split:
        attack = sandbox.run(SIGNAL_WITHOUT_A_PID, PID + "assert attack(os.getpid()) == []\n", split=True)
        assert attack.passed, attack
    else:
        argv = ["python3", "attack.py", str(trusted_pid(before))]
        attack = sandbox.run_command(argv, {"attack.py": SIGNAL_WITHOUT_A_PID})
        assert "sent []" in attack.stdout, attack
    after = run(sandbox, "")
    assert after.passed and trusted_pid(after) == trusted_pid(before), after


@pytest.mark.parametrize(
    ("program", "tests", "later"),
    [
        (  # the tests pass a module's list, which the program empties in place
            "def count_long(words):\n    words.clear()\n    return 0\n",
            "import keyword\nassert count_long(keyword.kwlist) == 0\n",
            "import keyword\nassert len(keyword.kwlist) > 30\n",
        ),
        (  # a module's dict, passed by keyword, which the program clears in place
            "def escape(text, *, table):\n    table.clear()\n    return text\n",
            "import html.entities\nassert escape('x', table=html.entities.codepoint2name) == 'x'\n",
            "import html.entities\nassert html.entities.codepoint2name[34] == 'quot'\n",
        ),
        (  # a module's list, sorted in place the wrong way round
            "def order(words):\n    words.sort(reverse=True)\n    return words[0]\n",
            "import keyword\nassert order(keyword.kwlist) == 'yield'\n",
            "import keyword\nassert keyword.kwlist[0] == 'False', keyword.kwlist[:3]\n",
        ),
        (  # the program names a module whose import configures logging's root logger
            "import types\ndef inc(x):\n    return types.ModuleType('lib2to3.tests.pytree_idempotency')\n",
            "inc(1)\n",
            "import logging\nassert not logging.getLogger().handlers, logging.getLogger().handlers\n",
        ),
    ],
    ids=[
        "module_list_emptied",
        "module_dict_cleared_by_keyword",
        "module_list_reordered",
        "import_configures_logging",
    ],
)
def test_what_a_program_makes_the_trusted_process_keep_dies_with_it(sandbox, program, tests, later):
    """Objects the tests passed and the program changed in place are written back, and a module the
    program named is imported, in the trusted process: it retires after such a run, so that nothing
    of it reaches the next one (where one process would have died with the program)."""
    first = sandbox.run(program, PID + tests, split=True)
    assert first.passed, first
    after = run(sandbox, later)
    assert after.passed and trusted_pid(after) != trusted_pid(first), after
