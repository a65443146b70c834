"""Hostile programs against both sandbox backends.

Every case must be scored as a non-pass with the right status, leave no process behind
(each program names itself with a unique marker through prctl(PR_SET_NAME), which its
forks inherit, and we scan /proc/*/comm for it), and leave the sandbox working: a passing
program runs after each case. Under bwrap nothing may be written outside the sandbox.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from eval.sandbox import SandboxLimits, bwrap_available, make_sandbox

REPO = Path(__file__).resolve().parent.parent
LIMITS = SandboxLimits(timeout_s=2.0, memory_mb=512, max_output_bytes=100_000, max_processes=64, disk_mb=64)
BACKENDS = [
    pytest.param(
        "bwrap", marks=pytest.mark.skipif(not bwrap_available(), reason="bubblewrap cannot run here")
    ),
    "local",
]


@pytest.fixture(scope="module", params=BACKENDS)
def sandbox(request):
    with make_sandbox(request.param, limits=LIMITS, workers=2) as sb:
        yield sb


@pytest.fixture
def marker():
    return "efx" + uuid.uuid4().hex[:12]  # 15 characters: the most PR_SET_NAME keeps


def named(marker: str, program: str) -> str:
    """``program`` prefixed with a line that renames the process (and its future forks) to ``marker``."""
    return f"import ctypes; ctypes.CDLL(None).prctl(15, b'{marker}', 0, 0, 0)\n{program}"


def survivors(marker: str, wait_s: float = 2.0) -> list[int]:
    """Live processes named ``marker`` once killed ones had ``wait_s`` to die.

    Zombies do not count: they are dead. Under bwrap the server reaps all of them before it
    answers; a local run that killed its server leaves them to the host's init to reap.
    """
    deadline = time.monotonic() + wait_s
    while True:
        found = []
        for pid in filter(str.isdigit, os.listdir("/proc")):
            try:
                head, _, tail = Path(f"/proc/{pid}/stat").read_text().rpartition(")")
            except OSError:
                continue
            if head.partition("(")[2] == marker and tail.split()[0] != "Z":
                found.append(int(pid))
        if not found or time.monotonic() > deadline:
            return found
        time.sleep(0.05)


def check_aftermath(sandbox, marker: str) -> None:
    assert survivors(marker) == [], "a process of the run outlived it"
    after = sandbox.run("def f():\n    return 1\n", "assert f() == 1\n")
    assert after.passed, f"the sandbox stopped working: {after}"


def run_hostile(sandbox, marker, program, tests="assert True\n", **limits):
    result = sandbox.run(
        named(marker, program), tests, limits=SandboxLimits(**{**LIMITS.to_dict(), **limits})
    )
    assert not result.passed
    check_aftermath(sandbox, marker)
    return result


CASES = {
    "infinite_loop": ("while True:\n    pass\n", "timeout"),
    "long_c_call": ("import itertools\nsum(itertools.repeat(1, 10**13))\n", "timeout"),
    "ignored_signals": (
        "import signal\nfor s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGALRM):\n"
        "    signal.signal(s, signal.SIG_IGN)\nwhile True:\n    pass\n",
        "timeout",
    ),
    "memory_bomb": ("blocks = []\nwhile True:\n    blocks.append(b'x' * 10**7)\n", "memory"),
    "huge_allocation": ("x = bytearray(64 * 2**30)\n", "memory"),
    "gigabyte_stdout": (
        "import sys\nfor _ in range(10**4):\n    sys.stdout.write('x' * 10**5)\n",
        "output_limit",
    ),
    "gigabyte_stderr": ("import os\nfor _ in range(10**4):\n    os.write(2, b'x' * 10**5)\n", "output_limit"),
    "sys_exit_0": ("import sys\nsys.exit(0)\n", "failed"),
    "os_exit_0": ("import os\nos._exit(0)\n", "failed"),
    "kill_own_group": ("import os, signal\nos.killpg(os.getpgrp(), signal.SIGKILL)\n", "killed"),
    "atexit_exit_0": ("import atexit, os\natexit.register(lambda: os._exit(0))\n", "failed"),
    "excepthook_and_atexit": (
        "import atexit, os, sys\nsys.excepthook = lambda *a: None\natexit.register(os._exit, 0)\n",
        "failed",
    ),
    "read_stdin": ("data = input()\n", "failed"),
    "big_file": ("open('big.bin', 'wb').write(b'x' * (100 * 2**20))\n", "failed"),
    "fill_disk": ("for i in range(200):\n    open(f'f{i}', 'wb').write(b'x' * 2**20)\n", "failed"),
}


@pytest.mark.parametrize("case", CASES)
def test_hostile_program_fails_cleanly(sandbox, marker, case):
    program, status = CASES[case]
    started = time.monotonic()
    result = run_hostile(sandbox, marker, program, tests="assert False, 'the tests must not pass'\n")
    assert result.status == status, result
    if case == "fill_disk" and sandbox.backend == "bwrap":
        assert "No space left" in result.detail  # the work folder's tmpfs is full (locally: no quota)
    assert time.monotonic() - started < LIMITS.timeout_s + 3
    if status == "output_limit":
        assert len(result.stdout) <= LIMITS.max_output_bytes and len(result.stderr) <= LIMITS.max_output_bytes
    if case == "sys_exit_0":
        assert result.exit_code == 0 and "SystemExit(0) before the tests finished" in result.detail
    if case == "os_exit_0":
        assert result.exit_code == 0 and "no pass sentinel" in result.detail


def test_fork_bomb(sandbox, marker):
    if sandbox.guards()["processes"].startswith("none"):
        pytest.skip(
            "no process-count guard here (root without a pids cgroup): a fork bomb would hit the host"
        )
    program = "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass\n"
    result = run_hostile(sandbox, marker, program)
    assert result.status == "timeout", result


def test_daemon_in_new_session_is_killed(sandbox, marker):
    program = (
        "import os, time\n"
        "if os.fork() == 0:\n"
        "    os.setsid()\n"
        "    if os.fork() == 0:\n"
        "        time.sleep(60)\n"
        "    os._exit(0)\n"
        "os.wait()\n"
    )
    result = run_hostile(sandbox, marker, program, tests="assert False\n")
    assert result.status == "failed", result


def test_printed_pass_markers_and_fd_spraying(sandbox, marker):
    program = (
        "import os\n"
        "print('PASSED\\nOK\\nAll tests passed\\n1 passed, 0 failed\\n__SANDBOX_PASS__', flush=True)\n"
        "for fd in [*range(3, 11), *map(int, os.listdir('/proc/self/fd'))]:\n"
        "    try:\n"
        "        os.write(fd, os.urandom(16).hex().encode())\n"
        "    except OSError:\n"
        "        pass\n"
        "os._exit(0)\n"
    )
    result = run_hostile(sandbox, marker, program)
    assert result.status == "failed" and "PASSED" in result.stdout, result
    assert "altered" in result.detail, result  # it found the report pipe but could not know the nonce


def test_killing_the_parent(sandbox, marker):
    program = "import os, signal, time\nos.kill(os.getppid(), signal.SIGKILL)\ntime.sleep(0.3)\n"
    result = run_hostile(sandbox, marker, program, tests="assert False\n")
    # bwrap: the parent is PID 1 of the namespace, which ignores the signal; local: it dies.
    assert result.status == ("failed" if sandbox.backend == "bwrap" else "killed"), result


def test_killing_the_parents_process_group(sandbox, marker):
    program = (
        "import os, signal, time\nos.killpg(os.getpgid(os.getppid()), signal.SIGKILL)\ntime.sleep(0.3)\n"
    )
    result = run_hostile(sandbox, marker, program, tests="assert False\n")
    assert result.status == ("failed" if sandbox.backend == "bwrap" else "killed"), result


def test_stopping_the_parent(sandbox, marker):
    """SIGSTOP on the server: ignored by PID 1 under bwrap; locally the host's backstop kills it."""
    program = "import os, signal\nos.kill(os.getppid(), signal.SIGSTOP)\nwhile True:\n    pass\n"
    result = run_hostile(sandbox, marker, program, timeout_s=1.0)
    assert result.status == "timeout", result


def test_server_is_out_of_reach(sandbox, marker):
    """The server holds the nonce's pipes: its memory, descriptors and environment stay closed."""
    if sandbox.backend != "bwrap":
        pytest.skip("the local backend does not protect its server (the same user may ptrace it)")
    program = (
        "import ctypes, os\n"
        "def attempt(what, action):\n"
        "    try:\n"
        "        action()\n"
        "        print('OPEN', what)\n"
        "    except OSError as exc:\n"
        "        print('denied', what, exc.errno)\n"
        "attempt('mem', lambda: open('/proc/1/mem', 'rb').read(1))\n"
        "attempt('environ', lambda: open('/proc/1/environ', 'rb').read())\n"
        "for fd in os.listdir('/proc/1/fd'):\n"
        "    attempt(f'fd {fd}', lambda: os.open(f'/proc/1/fd/{fd}', os.O_RDONLY | os.O_NONBLOCK))\n"
        "libc = ctypes.CDLL(None, use_errno=True)\n"
        "def ptrace_attach():\n"
        "    if libc.ptrace(16, 1, 0, 0) != 0:  # PTRACE_ATTACH\n"
        "        raise OSError(ctypes.get_errno(), 'ptrace')\n"
        "attempt('ptrace', ptrace_attach)\n"
    )
    result = run_hostile(sandbox, marker, program, tests="assert False\n")
    assert result.status == "failed" and "denied ptrace" in result.stdout, result
    assert "OPEN" not in result.stdout, result.stdout


def test_writes_outside_the_work_folder(sandbox, marker, tmp_path):
    targets = [Path("/tmp") / marker, REPO / marker, Path.home() / marker, tmp_path / marker]
    program = (
        f"for path in {[str(t) for t in targets]!r}:\n"
        "    try:\n"
        "        open(path, 'w').write('escaped')\n"
        "        print('wrote', path)\n"
        "    except OSError as exc:\n"
        "        print('blocked', path, exc)\n"
    )
    try:
        result = run_hostile(sandbox, marker, program, tests="assert False\n")
        written = [t for t in targets if t.exists()]
    finally:
        for target in targets:
            target.unlink(missing_ok=True)
    assert result.status == "failed", result
    if sandbox.backend == "bwrap":
        assert written == [], f"bwrap let the program write {written}"
    else:  # documented: the local backend does not protect the file system
        assert written == targets


def test_network_is_disabled(sandbox, marker):
    if not sandbox.guards()["network"].startswith("network namespace"):
        pytest.skip("this machine cannot give the local backend a network namespace")
    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]
        program = (
            f"import socket\nsocket.create_connection(('127.0.0.1', {port}), timeout=1).sendall(b'leak')\n"
        )
        result = run_hostile(sandbox, marker, program)
        assert _received(server) is None, "the sandboxed program reached a host socket"
    assert result.status == "failed" and "Error" in result.detail, result


def test_network_when_allowed(sandbox):
    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]
        program = (
            f"import socket\nsocket.create_connection(('127.0.0.1', {port}), timeout=2).sendall(b'hello')\n"
        )
        result = sandbox.run(program, "", limits=SandboxLimits(**{**LIMITS.to_dict(), "network": True}))
        assert result.passed, result
        assert _received(server) == b"hello"


def test_processes_swarm_beyond_memory(sandbox, marker):
    """Each child stays under RLIMIT_AS; together they exceed the worker's memory cgroup."""
    if "memory cgroup" not in sandbox.guards()["memory"]:
        pytest.skip("no memory cgroup here: only the per-process RLIMIT_AS applies")
    program = (
        "import os\n"
        "pids = []\n"
        "for _ in range(6):\n"
        "    pid = os.fork()\n"
        "    if pid == 0:\n"
        "        block = b'x' * (300 * 2**20)\n"
        "        os._exit(0)\n"
        "    pids.append(pid)\n"
        "codes = [os.waitpid(pid, 0)[1] for pid in pids]\n"
        "assert all(code == 0 for code in codes), codes\n"
    )
    result = run_hostile(sandbox, marker, program, memory_mb=400, timeout_s=10.0)
    assert result.status == "memory", result


def test_host_death_takes_the_runs_along(sandbox, marker, tmp_path):
    """SIGKILL the evaluating process mid-run: the run and its setsid() daemon must die too."""
    program = named(marker, "import os, time\nif os.fork() == 0:\n    os.setsid()\ntime.sleep(60)\n")
    script = tmp_path / "host.py"
    script.write_text(
        "import sys\n"
        "from eval.sandbox import SandboxLimits, make_sandbox\n"
        f"sandbox = make_sandbox({sandbox.backend!r}, workers=1)\n"
        f"sandbox.run({program!r}, limits=SandboxLimits(timeout_s=60))\n"
    )
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    host = subprocess.Popen([sys.executable, str(script)], env=env, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 20
        while len(survivors(marker, wait_s=0)) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(survivors(marker, wait_s=0)) == 2, "the run did not start"
    finally:
        host.kill()
        host.wait()
    assert survivors(marker) == [], "a run outlived the process that started it"


def _received(server: socket.socket) -> bytes | None:
    """What a client sent, or None if none connected (the kernel queues connections unaccepted)."""
    server.settimeout(0.2)
    try:
        conn, _ = server.accept()
    except TimeoutError:
        return None
    with conn:
        return conn.recv(100)
