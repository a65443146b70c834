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

from core.sandbox import SandboxLimits, bwrap_available, make_sandbox
from core.sandbox.native import landlock_abi

REPO = Path(__file__).resolve().parents[3]
LIMITS = SandboxLimits(timeout_s=2.0, memory_mb=512, max_output_bytes=100_000, max_processes=64, disk_mb=64)
BACKENDS = [
    pytest.param(
        "bwrap", marks=pytest.mark.skipif(not bwrap_available(), reason="bubblewrap cannot run here")
    ),
    "local",
]


@pytest.fixture(scope="module", params=BACKENDS)
def sandbox(request):
    """Not strict: these programs make raw system calls through ctypes, to show that the kernel-level
    guards hold against a program that has every primitive (strict mode would refuse the import)."""
    with make_sandbox(request.param, limits=LIMITS, workers=2, strict=False) as sb:
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
        "for fd in range(3, 256):\n"
        "    try:\n"
        "        os.write(fd, os.urandom(16).hex().encode())\n"
        "    except OSError:\n"
        "        pass\n"
        "os._exit(0)\n"
    )
    result = run_hostile(sandbox, marker, program)
    assert result.status == "failed" and "PASSED" in result.stdout, result
    assert "altered" in result.detail, result  # it found the report pipe but could not know the nonce


def signals_reach_the_server(sandbox) -> bool:
    """Only the local backend without Landlock's signal scope (ABI 6) lets a run signal its server."""
    return sandbox.backend == "local" and landlock_abi() < 6


def test_killing_the_parent(sandbox, marker):
    program = "import os, signal, time\nos.kill(os.getppid(), signal.SIGKILL)\ntime.sleep(0.3)\n"
    result = run_hostile(sandbox, marker, program, tests="assert False\n")
    # bwrap: the parent is PID 1 of the namespace, which ignores the signal; local: refused, or it dies.
    assert result.status == ("killed" if signals_reach_the_server(sandbox) else "failed"), result


def test_killing_the_parents_process_group(sandbox, marker):
    program = (
        "import os, signal, time\nos.killpg(os.getpgid(os.getppid()), signal.SIGKILL)\ntime.sleep(0.3)\n"
    )
    result = run_hostile(sandbox, marker, program, tests="assert False\n")
    assert result.status == ("killed" if signals_reach_the_server(sandbox) else "failed"), result


def test_stopping_the_parent(sandbox, marker):
    """SIGSTOP on the server: ignored by PID 1 under bwrap, refused under Landlock's signal scope;
    where it lands, the host's backstop kills the stopped worker at the deadline."""
    program = (
        "import os, signal\n"
        "try:\n"
        "    os.kill(os.getppid(), signal.SIGSTOP)\n"
        "except PermissionError:\n"
        "    pass\n"
        "while True:\n"
        "    pass\n"
    )
    result = run_hostile(sandbox, marker, program, timeout_s=1.0)
    assert result.status == "timeout", result


def test_server_is_out_of_reach(sandbox, marker):
    """The server holds the nonce's pipes: its memory, descriptors and environment stay closed."""
    if sandbox.backend != "bwrap" and not landlock_abi():
        pytest.skip("without Landlock the local backend does not keep /proc closed")
    program = (
        "import ctypes, os\n"
        "def attempt(what, action):\n"
        "    try:\n"
        "        action()\n"
        "        print('OPEN', what)\n"
        "    except OSError as exc:\n"
        "        print('denied', what, exc.errno)\n"
        "server = os.getppid()\n"
        "attempt('mem', lambda: open(f'/proc/{server}/mem', 'rb').read(1))\n"
        "attempt('environ', lambda: open(f'/proc/{server}/environ', 'rb').read())\n"
        "for fd in range(64):\n"
        "    attempt(f'fd {fd}', lambda: os.open(f'/proc/{server}/fd/{fd}', os.O_RDONLY | os.O_NONBLOCK))\n"
        "libc = ctypes.CDLL(None, use_errno=True)\n"
        "def ptrace_attach():\n"
        "    if libc.ptrace(16, server, 0, 0) != 0:  # PTRACE_ATTACH\n"
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
    if sandbox.backend == "bwrap" or landlock_abi():
        assert written == [], f"the program wrote {written}"
    else:  # documented: without Landlock the local backend does not protect the file system
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
        "from core.sandbox import SandboxLimits, make_sandbox\n"
        f"sandbox = make_sandbox({sandbox.backend!r}, workers=1, strict={sandbox.strict})\n"
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


# Programs that try to fake a pass from inside the interpreter. Each searches for the nonce (a
# 32-hex-digit bytes or str value) or a reporting function and sprays what it finds to every
# descriptor; the tests that follow always fail, so only a forged sentinel could pass.
SPRAY = (
    "import os, re, sys\n"
    "HEX = re.compile(rb'[0-9a-f]{32}')\n"
    "def spray(value):\n"
    "    data = value.encode() if isinstance(value, str) else bytes(value)\n"
    "    for fd in range(3, 64):\n"
    "        try:\n"
    "            os.write(fd, data)\n"
    "        except OSError:\n"
    "            pass\n"
    "def looks_like_nonce(value):\n"
    "    if isinstance(value, str):\n"
    "        value = value.encode('latin-1', 'ignore')\n"
    "    return isinstance(value, (bytes, bytearray)) and HEX.fullmatch(bytes(value)) is not None\n"
    "def loot(namespace):\n"
    "    for name, value in list(namespace.items()):\n"
    "        if looks_like_nonce(value):\n"
    "            spray(value)\n"
    "        for cell in getattr(value, '__closure__', None) or ():\n"
    "            if looks_like_nonce(cell.cell_contents):\n"
    "                spray(cell.cell_contents)\n"
    "        for arg in getattr(value, 'args', None) or ():\n"
    "            if looks_like_nonce(arg):\n"
    "                spray(arg)\n"
    "        if callable(value) and 'report' in name.lower():\n"
    "            for argument in (None, b''):\n"
    "                try:\n"
    "                    value(argument)\n"
    "                except Exception:\n"
    "                    pass\n"
    "def walk(frame):\n"
    "    while frame is not None:\n"
    "        loot(frame.f_locals)\n"
    "        loot(frame.f_globals)\n"
    "        frame = frame.f_back\n"
)
FAKE_PASS = {
    "frame_walk": SPRAY + "walk(sys._getframe())\nos._exit(0)\n",
    "traceback_frame_walk": SPRAY
    + "try:\n    raise RuntimeError\nexcept RuntimeError as exc:\n    walk(exc.__traceback__.tb_frame)\nos._exit(0)\n",
    "signal_handler_frame_walk": SPRAY + "import signal\n"
    "signal.signal(signal.SIGALRM, lambda signum, frame: walk(frame))\n"
    "signal.setitimer(signal.ITIMER_REAL, 0.0001, 0.0001)\n"
    "for _ in range(20000):\n    pass\n",
    "gc_search_and_proc_fd_write": SPRAY + "import gc\n"
    "try:\n"
    "    objects = gc.get_objects()\n"
    "except PermissionError as exc:\n"
    "    print('gc refused:', exc)\n"
    "    objects = []\n"
    "for obj in objects:\n"
    "    for value in [obj, *(getattr(obj, 'args', None) or ())]:\n"
    "        if looks_like_nonce(value):\n"
    "            for fd in os.listdir('/proc/self/fd'):\n"
    "                try:\n"
    "                    os.write(os.open(f'/proc/self/fd/{fd}', os.O_WRONLY), bytes(value))\n"
    "                except OSError:\n"
    "                    pass\n"
    "os._exit(0)\n",
    "trace_function_skips_the_tests": (
        "import sys\n"
        "def jump(frame, event, arg):\n"
        "    if event == 'line' and frame.f_code.co_filename.endswith('main.py') and frame.f_lineno > 12:\n"
        "        frame.f_lineno = frame.f_code.co_firstlineno + 999\n"
        "    return jump\n"
        "sys.settrace(jump)\n"
    ),
}


def unicode_escaped(program: str) -> str:
    """``program`` hidden from any text scan: a coding declaration and every character escaped."""
    return "# -*- coding: unicode_escape -*-\n" + "".join(f"\\u{ord(c):04x}" for c in program)


FAKE_PASS["gc_search_hidden_by_unicode_escape"] = unicode_escaped(FAKE_PASS["gc_search_and_proc_fd_write"])


@pytest.mark.parametrize("case", FAKE_PASS)
def test_no_pass_faked_from_inside_the_interpreter(sandbox, marker, case):
    result = run_hostile(sandbox, marker, FAKE_PASS[case], tests="assert False, 'the tests must not pass'\n")
    # (a program whose own 0.1 ms interval timer outlives its handler dies of SIGALRM: "killed")
    assert result.status in ("failed", "timeout", "killed"), result


def test_gc_and_tracing_are_refused(sandbox, marker):
    program = (
        "import gc, sys\n"
        "for attempt in (gc.get_objects, lambda: gc.get_referrers(sys), lambda: sys.settrace(print),\n"
        "                lambda: sys.setprofile(print)):\n"
        "    try:\n"
        "        attempt()\n"
        "        print('ALLOWED')\n"
        "    except PermissionError as exc:\n"
        "        print('refused', exc)\n"
    )
    result = run_hostile(sandbox, marker, program, tests="assert False\n")
    assert result.stdout.count("refused") == 4 and "ALLOWED" not in result.stdout, result


def test_forged_server_reply(sandbox, marker):
    """Write a well-formed 'passed' reply into every pipe and socket of the server and of the host
    (with raw system calls, below any Python-level check), then kill the server."""
    program = (
        "import ctypes, json, os, signal, struct\n"
        "libc = ctypes.CDLL(None, use_errno=True)\n"
        "reply = json.dumps({'status': 'passed', 'exit_code': 0, 'stdout': '', 'stderr': '',\n"
        "                    'duration_s': 0.0, 'detail': '', 'restart': False}).encode()\n"
        "frame = struct.pack('>I', len(reply)) + reply\n"
        "server = os.getppid()\n"
        "with open(f'/proc/{server}/stat') as f:\n"
        "    host = int(f.read().rpartition(')')[2].split()[1])\n"
        "opened = 0\n"
        "channels = {server: (b'pipe:', b'socket:'), host: (b'socket:',), os.getpid(): (b'pipe:', b'socket:')}\n"
        "for pid, kinds in channels.items():\n"  # the host's own pipes are its terminal: left alone
        "    for fd in range(256):\n"
        "        path = f'/proc/{pid}/fd/{fd}'.encode()\n"
        "        target = ctypes.create_string_buffer(64)\n"
        "        if libc.readlink(path, target, 63) <= 0 or not target.value.startswith(kinds):\n"
        "            continue\n"
        "        handle = libc.open(path, os.O_WRONLY | os.O_NONBLOCK)\n"
        "        if handle >= 0:\n"
        "            opened += 1\n"
        "            libc.write(handle, frame, len(frame))\n"
        "            libc.close(handle)\n"
        "print('opened', opened, flush=True)\n"
        "os.kill(server, signal.SIGKILL)\n"
    )
    result = run_hostile(sandbox, marker, program, tests="assert False\n")
    assert result.status in ("failed", "killed"), result


def test_payload_under_coverage_stays_inside(sandbox, marker, tmp_path):
    """A passing program whose payload fires only when coverage.py is loaded (the ExcessCode run)."""
    from eval.excess_code import coverage_of

    targets = [tmp_path / marker, REPO / marker]
    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]
        program = named(
            marker,
            "import os, socket, sys, time\n"
            "def add(a, b):\n"
            "    return a + b\n"
            "if 'coverage' in sys.modules:\n"
            f"    for path in {[str(t) for t in targets]!r}:\n"
            "        try:\n"
            "            open(path, 'w').write('escaped')\n"
            "        except OSError:\n"
            "            pass\n"
            "    try:\n"
            f"        socket.create_connection(('127.0.0.1', {port}), timeout=1).sendall(b'leak')\n"
            "    except OSError:\n"
            "        pass\n"
            "    if os.fork() == 0:\n"
            "        os.setsid()\n"
            "        if os.fork() == 0:\n"
            "            time.sleep(60)\n"
            "        os._exit(0)\n",
        )
        try:
            report = coverage_of(program, "assert add(1, 2) == 3\n", sandbox, LIMITS)
            written = [t for t in targets if t.exists()]
        finally:
            for target in targets:
                target.unlink(missing_ok=True)
        if sandbox.guards()["network"].startswith("network namespace"):
            assert _received(server) is None, "the payload reached a host socket"
    assert report.statements, report
    assert survivors(marker) == [], "the payload's daemon outlived the coverage run"
    if sandbox.backend == "bwrap":
        assert written == [], f"the payload wrote {written}"


@pytest.fixture(scope="module", params=BACKENDS)
def single_worker(request):
    """One worker, so consecutive runs share a server: what one leaves, the next would see."""
    with make_sandbox(request.param, limits=LIMITS, workers=1, strict=False) as sb:
        yield sb


def test_nothing_carries_over_to_the_next_program(single_worker):
    # The local backend shares the host's /dev, /dev/shm and /tmp (documented): only bwrap's are checked.
    paths = ["efx-left"]
    if single_worker.backend == "bwrap":
        paths += ["/dev/efx-left", "/dev/shm/efx-left", "/tmp/efx-left"]
    leave = (
        "import ctypes, os\n"
        "libc = ctypes.CDLL(None, use_errno=True)\n"
        f"for path in {paths!r}:\n"
        "    try:\n"
        "        open(path, 'w').write('left behind')\n"
        "    except OSError as exc:\n"
        "        print('refused', path, exc)\n"
        "print('shm', libc.shmget(0x45465801, 4096, 0o1666))\n"  # IPC_CREAT | 0666
        "print('sem', libc.semget(0x45465802, 1, 0o1666))\n"
    )
    find = (
        "import ctypes, os\n"
        "libc = ctypes.CDLL(None, use_errno=True)\n"
        f"found = [p for p in {paths!r} if os.path.exists(p)]\n"
        "found += ['shm'] if libc.shmget(0x45465801, 0, 0) >= 0 else []\n"
        "found += ['sem'] if libc.semget(0x45465802, 0, 0) >= 0 else []\n"
    )
    left = single_worker.run(leave, "")
    assert left.passed and "shm -1" not in left.stdout and "sem -1" not in left.stdout, left
    if single_worker.backend == "bwrap":
        assert "refused /dev/efx-left" in left.stdout, left  # /dev is read-only
    found = single_worker.run(find, "assert not found, found\n")
    assert found.passed, (left.stdout, found.detail)


def test_secrets_and_project_folders_are_unreadable(sandbox, marker):
    if sandbox.backend != "bwrap":
        pytest.skip("the local backend reads what its user can (documented)")
    secret = REPO / f".{marker}"
    secret.write_text("secret")
    program = (
        f"for path in ('/etc/shadow', '/etc/gshadow', {str(secret)!r}, '/root/.bashrc'):\n"
        "    try:\n"
        "        print('READ', path, open(path).read()[:40])\n"
        "    except OSError as exc:\n"
        "        print('refused', path, type(exc).__name__)\n"
    )
    try:
        result = run_hostile(sandbox, marker, program, tests="assert False\n")
    finally:
        secret.unlink()
    assert "READ" not in result.stdout.replace("READ /etc/shadow \n", ""), result.stdout
    assert "secret" not in result.stdout and "root:" not in result.stdout, result.stdout


def test_ordinary_programs_are_not_hindered(sandbox):
    """What the audit hook must let through: logging, inspect, tracebacks, namedtuple, typing, threads,
    dataclasses and the modules most programs import."""
    program = (
        "import collections, dataclasses, functools, heapq, inspect, itertools, logging, math, re\n"
        "import threading, traceback, typing\n"
        "logging.basicConfig(level=logging.INFO)\n"
        "logging.getLogger('x').info('hello')\n"
        "Point = collections.namedtuple('Point', 'x y')\n"
        "T = typing.TypeVar('T')\n"
        "@dataclasses.dataclass(frozen=True)\n"
        "class Box:\n"
        "    size: int = 1\n"
        "@functools.lru_cache\n"
        "def f(a, b=2):\n"
        "    return 'f', inspect.signature(f.__wrapped__)\n"
        "try:\n"
        "    1 / 0\n"
        "except ZeroDivisionError:\n"
        "    shown = traceback.format_exc()\n"
        "out = []\n"
        "t = threading.Thread(target=lambda: out.append(Point(1, 2)))\n"
        "t.start(); t.join()\n"
        "heap = list(itertools.islice(itertools.count(), 5)); heapq.heapify(heap)\n"
        "assert re.fullmatch(r'\\d+', '42') and math.isclose(0.1 + 0.2, 0.3) and Box().size == 1\n"
    )
    tests = (
        "assert f(1)[0] == 'f' and str(f(1)[1]) == '(a, b=2)'\nassert out == [Point(1, 2)]\n"
        "assert 'ZeroDivisionError' in shown\n"
    )
    result = sandbox.run(program, tests)
    assert result.passed, result
    measured = sandbox.run(program, tests, coverage=True)
    assert measured.passed and measured.coverage and measured.coverage["missing"] == [], measured


needs_landlock = pytest.mark.skipif(not landlock_abi(), reason="no Landlock in this kernel")


@needs_landlock
def test_proc_stays_closed_by_any_route(sandbox, marker):
    """dir_fd, a symlink in the work folder, a thread flipping it: the kernel refuses them all."""
    program = (
        "import os, threading\n"
        "def attempt(what, action):\n"
        "    try:\n"
        "        os.close(action())\n"
        "        print('OPENED', what)\n"
        "    except OSError as exc:\n"
        "        print('refused', what, exc.errno)\n"
        "attempt('/ as dir_fd', lambda: os.open('proc/self/mem', os.O_RDONLY, dir_fd=os.open('/', os.O_RDONLY)))\n"
        "attempt('/proc as dir_fd', lambda: os.open('self/maps', os.O_RDONLY, dir_fd=os.open('/proc', os.O_RDONLY)))\n"
        "os.symlink('/proc/self/mem', 'mem')\n"
        "attempt('symlink', lambda: os.open('mem', os.O_RDONLY))\n"
        "open('benign', 'w').write('x')\n"
        "stop = False\n"
        "def flip():\n"
        "    while not stop:\n"
        "        for target in ('benign', '/proc/self/maps'):\n"
        "            try:\n"
        "                os.symlink(target, 'flip.tmp'); os.replace('flip.tmp', 'flip')\n"
        "            except OSError:\n"
        "                pass\n"
        "threading.Thread(target=flip, daemon=True).start()\n"
        "opened = 0\n"
        "for _ in range(3000):\n"
        "    try:\n"
        "        with open('flip') as f:\n"
        "            opened += f.read(3) != 'x'\n"
        "    except OSError:\n"
        "        pass\n"
        "stop = True\n"
        "print('maps read through the race:', opened)\n"
    )
    result = run_hostile(sandbox, marker, program, tests="assert False\n")
    assert "OPENED" not in result.stdout and result.stdout.count("refused") == 3, result.stdout
    assert "maps read through the race: 0" in result.stdout, result.stdout


def test_proc_sys_is_read_only(sandbox, marker):
    """Writes to /proc/sys would change the whole machine (core_pattern runs a program as root)."""
    if sandbox.backend != "bwrap" and not landlock_abi():
        pytest.skip("without Landlock the local backend runs as its user, whatever that may write")
    program = (
        "import os\n"
        "for knob in ('kernel/hostname', 'kernel/core_pattern', 'vm/drop_caches'):\n"
        "    try:\n"
        "        os.close(os.open('/proc/sys/' + knob, os.O_WRONLY))\n"
        "        print('WRITABLE', knob)\n"
        "    except OSError as exc:\n"
        "        print('refused', knob, exc.errno)\n"
    )
    result = run_hostile(sandbox, marker, program, tests="assert False\n")
    assert "WRITABLE" not in result.stdout and result.stdout.count("refused") == 3, result.stdout


def test_server_socket_cannot_be_borrowed(sandbox, marker):
    """pidfd_getfd on the server (root's CAP_SYS_PTRACE would beat its non-dumpable flag: runs drop it)."""
    program = (
        "import ctypes, json, os, signal, socket, struct\n"
        "libc = ctypes.CDLL(None, use_errno=True)\n"
        "libc.syscall.restype = ctypes.c_long\n"
        "reply = json.dumps({'status': 'passed', 'exit_code': 0, 'stdout': '', 'stderr': '',\n"
        "                    'duration_s': 0.0, 'detail': '', 'restart': False}).encode()\n"
        "frame = struct.pack('>I', len(reply)) + reply\n"
        "borrowed = 0\n"
        "for pid in {os.getppid(), *range(1, 100)} - {os.getpid()}:\n"  # the zygote, the server, others
        "  try:\n"
        "    pidfd = os.pidfd_open(pid)\n"
        "  except OSError:\n"
        "    continue\n"
        "  for fd in range(64):\n"
        "    mine = libc.syscall(438, pidfd, fd, 0)\n"  # pidfd_getfd
        "    if mine >= 0:\n"
        "        borrowed += 1\n"
        "        try:\n"
        "            os.write(mine, frame)\n"
        "        except OSError:\n"
        "            pass\n"
        "print('borrowed', borrowed)\n"
    )
    result = run_hostile(sandbox, marker, program, tests="assert False\n")
    assert result.status == "failed" and "borrowed 0" in result.stdout, result


def test_thousands_of_nested_folders(sandbox, marker):
    """The clean-up after the run must not recurse (RecursionError) and the worker must go on."""
    program = "import os\nfor _ in range(1500):\n    os.mkdir('a')\n    os.chdir('a')\n"
    result = run_hostile(sandbox, marker, program, tests="assert False\n")
    assert result.status == "failed", result


def test_keyrings_are_cleared(single_worker):
    add = (
        "import ctypes\n"
        "libc = ctypes.CDLL(None, use_errno=True)\n"
        "for keyring in (-4, -5):\n"  # user, user-session
        "    print(libc.add_key(b'user', b'efx-left', b'secret', 6, keyring))\n"
    )
    find = (
        "import ctypes\n"
        "libc = ctypes.CDLL(None, use_errno=True)\n"
        "found = [k for k in (-4, -5) if libc.syscall(250, 10, k, b'user', b'efx-left', 0) >= 0]\n"  # KEYCTL_SEARCH
    )
    left = single_worker.run(add, "")
    found = single_worker.run(find, "assert not found, found\n")
    assert found.passed, (left.stdout, found.detail)


def test_forged_coverage_is_refused(sandbox):
    """A passing program writes its own 'coverage' to the data pipe: lines outside its file must
    not make the evaluator expand a trillion-line range."""
    from eval.excess_code import CoverageError, coverage_of

    program = (
        "import os, stat\n"
        "for fd in range(3, 64):\n"
        "    try:\n"
        "        if stat.S_ISFIFO(os.fstat(fd).st_mode):\n"
        '            os.write(fd, b\'{"statements": [1, 1000000000000], "excluded": [], "missing": [1, 1000000000000]}\')\n'
        "    except OSError:\n"
        "        pass\n"
    )
    with pytest.raises(CoverageError):
        coverage_of(program, "assert True\n", sandbox, LIMITS)


# ----------------------------------------------------------------------- seccomp: keyrings, sockets, ABIs
KEY_SPEC_SESSION_KEYRING = -3


def _host_key(description: bytes, payload: bytes) -> int | None:
    """A key in this (host) process's session keyring, or None where keyrings cannot be used."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    key = libc.syscall(248, b"user", description, payload, len(payload), KEY_SPEC_SESSION_KEYRING)
    return key if key >= 0 else None


def _host_find(description: bytes) -> bool:
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    for keyring in (KEY_SPEC_SESSION_KEYRING, -4, -5):  # session, user, user-session
        if libc.syscall(250, 10, keyring, b"user", description, 0) >= 0:  # KEYCTL_SEARCH
            return True
    return False


@pytest.mark.skipif(os.uname().machine != "x86_64", reason="syscall numbers of x86-64")
def test_kernel_keyrings_are_out_of_reach(sandbox, marker):
    secret = f"host-secret-{marker}".encode()
    host_key = _host_key(f"efx-host-{marker}".encode(), secret)
    program = (
        "import ctypes\n"
        "libc = ctypes.CDLL(None, use_errno=True)\n"
        "buf = ctypes.create_string_buffer(256)\n"
        "for keyring in (-3, -4, -5):\n"  # read the host's key through any keyring
        f"    key = libc.syscall(250, 10, keyring, b'user', b'efx-host-{marker}', 0)\n"
        "    if key >= 0:\n"
        "        libc.syscall(250, 11, key, buf, 256)\n"  # KEYCTL_READ
        "        print('READ', buf.value)\n"
        "    planted = libc.syscall(248, b'user', b'efx-planted', b'x', 1, keyring)\n"
        "    print('plant', keyring, planted, ctypes.get_errno())\n"
        "print('persistent', libc.syscall(250, 22, -1, -3))\n"  # KEYCTL_GET_PERSISTENT
    )
    try:
        result = sandbox.run(named(marker, program), "", limits=LIMITS)
        assert "READ" not in result.stdout and secret.decode() not in result.stdout, result.stdout
        for keyring in (-3, -4, -5):
            assert f"plant {keyring} -1 1" in result.stdout, result.stdout  # EPERM
        assert "persistent -1" in result.stdout, result.stdout
        assert not _host_find(b"efx-planted"), "a key planted in the sandbox is on the host"
    finally:
        if host_key is not None:
            import ctypes

            ctypes.CDLL(None).syscall(250, 3, host_key)  # KEYCTL_REVOKE
    check_aftermath(sandbox, marker)


# (family, socket type) by number: not every Python build names them all (AF_BLUETOOTH). The
# internet families stay open inside a run's own network namespace (only its loopback is there).
FAMILIES = {"vsock": (40, 1), "packet": (17, 3), "netlink": (16, 3), "bluetooth": (31, 1), "alg": (38, 5)}


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_socket_families_other_than_unix_and_inet_are_refused(sandbox, marker, family):
    number, kind = FAMILIES[family]
    program = f"import socket\ns = socket.socket({number}, {kind})\nprint('OPENED')\n"
    result = run_hostile(sandbox, marker, program)
    assert not result.passed and "OPENED" not in result.stdout, result
    assert "PermissionError" in result.stderr, result.stderr[-500:]
    check_aftermath(sandbox, marker)


def test_vsock_bind_does_not_reach_the_host(sandbox, marker):
    program = (
        "import socket\n"
        "a, b = socket.socketpair(socket.AF_UNIX)\n"  # the family runs still have: no error here
        "s = socket.socket(socket.AF_VSOCK, socket.SOCK_STREAM)\n"
        "s.bind((socket.VMADDR_CID_ANY, 48211))\n"
        "s.listen()\n"
        "print('LISTENING')\n"
    )
    result = run_hostile(sandbox, marker, program)
    assert "LISTENING" not in result.stdout and not result.passed, result
    check_aftermath(sandbox, marker)


@pytest.mark.skipif(os.uname().machine != "x86_64", reason="i386 and x32 calls exist on x86-64 only")
@pytest.mark.parametrize("route", ["int80", "x32"])
def test_a_foreign_syscall_abi_ends_the_run(sandbox, marker, route):
    """i386 (`int 0x80`) and x32 numbers would slip past a filter written for x86-64 numbers."""
    if route == "int80":  # mov eax, 288 (i386 keyctl); mov ebx, 0; mov ecx, -3; int 0x80; ret
        program = (
            "import ctypes, mmap\n"
            "code = bytes.fromhex('b820010000bb00000000b9fdffffffcd80c3')\n"
            "m = mmap.mmap(-1, 4096, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)\n"
            "m.write(code)\n"
            "address = ctypes.addressof(ctypes.c_char.from_buffer(m))\n"
            "print('RESULT', ctypes.CFUNCTYPE(ctypes.c_int)(address)())\n"
        )
    else:
        program = "import ctypes\nprint('RESULT', ctypes.CDLL(None).syscall(0x40000000 | 250, 0, -3, 0))\n"
    result = run_hostile(sandbox, marker, program)
    assert not result.passed and "RESULT" not in result.stdout, result
    check_aftermath(sandbox, marker)


def test_io_uring_is_refused(sandbox, marker):
    program = (
        "import ctypes\n"
        "libc = ctypes.CDLL(None, use_errno=True)\n"
        "params = ctypes.create_string_buffer(120)\n"
        "fd = libc.syscall(425, 8, params)\n"
        "assert fd >= 0, ctypes.get_errno()\n"
    )
    result = run_hostile(sandbox, marker, program)
    assert not result.passed and "AssertionError: 1" in result.stderr, result
    check_aftermath(sandbox, marker)


def test_a_busy_run_gets_its_cpu_quota_only(sandbox):
    if not sandbox.guards()["cpu"].startswith("cgroup"):
        pytest.skip("no cpu cgroup can be made here")
    program = (
        "import os, time\n"
        "pids = []\n"
        "for _ in range(2):\n"
        "    pid = os.fork()\n"
        "    if pid == 0:\n"
        "        end = time.monotonic() + 1.5\n"
        "        while time.monotonic() < end:\n"
        "            pass\n"
        "        os._exit(0)\n"
        "    pids.append(pid)\n"
        "for pid in pids:\n"
        "    os.waitpid(pid, 0)\n"
        "used = os.times().children_user + os.times().children_system\n"
    )
    result = sandbox.run(program, "print(round(used, 2))\n", limits=SandboxLimits(timeout_s=20, cpus=0.5))
    assert result.passed, result
    assert float(result.stdout.split()[-1]) < 1.2, result.stdout  # two busy processes, unlimited: ~3 s


# ----------------------------------------------------------------------- test oracles
# The tests expect a value no correct program returns: a program passes only by reading it.
ORACLE_TESTS = "def check(candidate):\n    assert candidate(2, 3) == 7340912\n\ncheck(add)\n"
ORACLE_ROUTES = {
    "main.py": "return int(re.findall(r'== (\\d+)', open(__file__).read())[0])",
    "work folder": (
        "texts = [open(os.path.join(os.getcwd(), n)).read() for n in os.listdir('.') if os.path.isfile(n)]\n"
        "    return int(re.findall(r'== (\\d+)', ''.join(texts))[0])"
    ),
    "caller's code": "return next(c for c in sys._getframe(1).f_code.co_consts if isinstance(c, int) and c > 9)",
    "caller's code via inspect": (
        "return next(c for c in inspect.currentframe().f_back.f_code.co_consts if isinstance(c, int) and c > 9)"
    ),
    "caller's bytecode via dis": (
        "text = dis.Bytecode(inspect.currentframe().f_back).dis()\n"
        "    return int(re.findall(r'\\((\\d{5,})\\)', text)[0])"
    ),
    "test function's __code__": (
        "return next(c for c in globals()['check'].__code__.co_consts if isinstance(c, int) and c > 9)"
    ),
    "traceback frame": (
        "try:\n        raise ValueError\n    except ValueError as exc:\n"
        "        frame = exc.__traceback__.tb_frame.f_back\n"
        "    return next(c for c in frame.f_code.co_consts if isinstance(c, int) and c > 9)"
    ),
    "stack summary": (
        "lines = [f.line or '' for f in traceback.extract_stack()]\n"
        "    return int(re.findall(r'== (\\d+)', ''.join(lines))[0])"
    ),
    "harness locals": (
        "frame, texts = inspect.currentframe(), []\n"
        "    while frame is not None:\n"
        "        texts += [repr(v) for v in frame.f_locals.values()]\n"
        "        frame = frame.f_back\n"
        "    return int(re.findall(r'== (\\d+)', ''.join(texts))[0])"
    ),
    "module code": (
        "frame = inspect.currentframe()\n"
        "    while frame.f_back is not None:\n"
        "        frame = frame.f_back\n"
        "    return next(c for c in frame.f_code.co_consts if isinstance(c, int) and c > 9)"
    ),
}


@pytest.mark.parametrize("route", sorted(ORACLE_ROUTES))
def test_a_program_cannot_read_its_tests(sandbox, marker, route):
    program = (
        "import dis, inspect, os, re, sys, traceback\n"
        "def add(a, b):\n"
        "    try:\n"
        "        " + ORACLE_ROUTES[route].replace("\n", "\n    ") + "\n"
        "    except Exception as exc:\n"
        "        print('refused:', type(exc).__name__, exc)\n"
        "        return a + b\n"
    )
    result = run_hostile(sandbox, marker, program, tests=ORACLE_TESTS)
    assert "7340912" not in result.stdout, result
    check_aftermath(sandbox, marker)


def test_the_tests_still_report_where_they_failed(sandbox):
    result = sandbox.run("def add(a, b):\n    return a + b\n", ORACLE_TESTS)
    assert result.status == "failed" and 'File "<tests>", line 2, in check' in result.stderr, result


# Routes that reach the tests through the harness itself: its functions as gadgets (a nested
# _run_python compiling code under the harness's file name; a C-level map consumed inside one of
# its comprehensions), a str subclass posing as the harness's file name, and a crafted .pyc.
GADGET_ROUTES = {
    "harness compiles the thief": (
        "import inspect, os, sys\n"
        "HF = inspect.currentframe().f_back.f_globals\n"
        "def add(a, b):\n"
        "    sys.caller_frame = inspect.currentframe().f_back\n"
        "    r, w = os.pipe(); os.write(w, b'x'); os.close(w); null = os.open('/dev/null', os.O_WRONLY)\n"
        "    saved = os._exit; os._exit = lambda c: None\n"
        "    try:\n"
        "        HF['_run_python']({'program': 'import sys\\nsys.stolen = sys.caller_frame.f_code.co_consts\\n',"
        " 'tests': ''}, HF['__file__'], None, r, null, null, ())\n"
        "    except BaseException as exc:\n"
        "        print('refused', exc)\n"
        "    finally:\n"
        "        os._exit = saved\n"
        "    return [c for c in getattr(sys, 'stolen', ()) if isinstance(c, int) and c > 9][0]\n"
    ),
    "C chain under a harness frame": (
        "import inspect, operator, types\n"
        "HF = inspect.currentframe().f_back.f_globals\n"
        "def add(a, b):\n"
        "    store, ns = [], types.SimpleNamespace\n"
        "    lines = map(store.append, map(operator.attrgetter('f_code'), [inspect.currentframe().f_back]))\n"
        "    HF['_executed_lines'](ns(_collector=ns(data={'/': lines})), '/')\n"
        "    return [c for c in store[0].co_consts if isinstance(c, int) and c > 9][0]\n"
    ),
    "str subclass as a file name": (
        "import inspect\n"
        'HARNESS = repr(inspect.currentframe().f_back).split("file \'")[1].split("\'")[0]\n'
        "class Name(str):\n"
        "    posing = False\n"
        "    def __eq__(self, other):\n"
        "        return Name.posing or str.__eq__(self, other)\n"
        "    __hash__ = str.__hash__\n"
        "g = {}\n"
        "exec(compile('def steal(f):\\n    return f.f_code.co_consts\\n', Name(HARNESS), 'exec'), g)\n"
        "Name.posing = True\n"
        "def add(a, b):\n"
        "    return [c for c in g['steal'](inspect.currentframe().f_back) if isinstance(c, int) and c > 9][0]\n"
    ),
    "crafted .pyc": (
        "import importlib, marshal, sys\n"
        "code = compile('import inspect\\ndef steal():\\n    return inspect.currentframe().f_back.f_back', 'x', 'exec')\n"
        "open('stealer.pyc', 'wb').write(importlib.util.MAGIC_NUMBER + bytes(12) + marshal.dumps(code))\n"
        "def add(a, b):\n"
        "    import stealer\n"
        "    return [c for c in stealer.steal().f_code.co_consts if isinstance(c, int) and c > 9][0]\n"
    ),
}


@pytest.mark.parametrize("route", sorted(GADGET_ROUTES))
def test_the_harness_is_no_gadget_to_the_tests(sandbox, marker, route):
    result = run_hostile(sandbox, marker, GADGET_ROUTES[route], tests=ORACLE_TESTS)
    assert "7340912" not in result.stdout, result
    check_aftermath(sandbox, marker)


# A wrong program that forks a copy per guess (through `fork`, a function of the program's); the
# copy whose guess passes would write the nonce into a pipe of the program's, which relays it.
GUESSING_RELAY = (
    "import os, stat, fcntl\n"
    "def report_pipe():\n"
    "    for fd in range(3, 256):\n"
    "        try:\n"
    "            st = os.fstat(fd)\n"
    "        except OSError:\n"
    "            continue\n"
    "        if stat.S_ISFIFO(st.st_mode) and fcntl.fcntl(fd, fcntl.F_GETFL) & 3 == 1:\n"
    "            return fd\n"
    "R = report_pipe()\n"
    "def is_even(n):\n"
    "    for guess in (True, False):\n"
    "        r, w = os.pipe()\n"
    "        pid = fork()\n"
    "        if pid == 0:\n"
    "            os.close(r); os.dup2(w, R)\n"
    "            return guess\n"
    "        os.close(w); os.waitpid(pid, 0); data = b''\n"
    "        while chunk := os.read(r, 4096):\n"
    "            data += chunk\n"
    "        if data and not data.startswith(b'!'):\n"
    "            os.write(R, data); os._exit(0)\n"
    "    os._exit(1)\n"
)
GUESSING_TESTS = "assert is_even(3) is False\nassert is_even(4) is True\nassert not is_even(5)\n"


def test_a_forked_copy_cannot_pass_for_the_run(sandbox, marker):
    """Every fork zeroes the nonce first, so the relay carries nothing."""
    result = run_hostile(
        sandbox, marker, "import os\nfork = os.fork\n" + GUESSING_RELAY, tests=GUESSING_TESTS
    )
    assert result.status == "failed", result
    check_aftermath(sandbox, marker)


# A fork in which Python's own at-fork hooks do not run: the interpreter copies its list of hooks
# (made long here) before calling them, and with the address space capped just above what is
# mapped that copy fails with a MemoryError, reported through sys.unraisablehook.
FORK_WITHOUT_PYTHON_HOOKS = """
import os, resource, mmap
_soft, _hard = resource.getrlimit(resource.RLIMIT_AS)
def _mapped():
    lo, hi = 0, _hard
    while hi - lo > 4096:
        mid = (lo + hi) // 2
        resource.setrlimit(resource.RLIMIT_AS, (mid, _hard))
        try:
            mmap.mmap(-1, 4096).close(); hi = mid
        except OSError:
            lo = mid
    resource.setrlimit(resource.RLIMIT_AS, (_hard, _hard))
    return hi
for _ in range(5_000_000):
    os.register_at_fork(after_in_child=int)
def fork_without_python_hooks():
    resource.setrlimit(resource.RLIMIT_AS, (_mapped() + (8 << 20), _hard))
    pid = os.fork()
    resource.setrlimit(resource.RLIMIT_AS, (_hard, _hard))
    return pid
"""


def test_a_fork_whose_python_hooks_fail_still_holds_no_nonce(sandbox, marker):
    """The guessing copies of the test above, forked so that Python's at-fork hooks fail: the
    nonce is zeroed and the report pipe closed by C code inside fork() itself."""
    program = FORK_WITHOUT_PYTHON_HOOKS + "fork = fork_without_python_hooks\n" + GUESSING_RELAY
    result = run_hostile(sandbox, marker, program, tests=GUESSING_TESTS)
    assert result.status == "failed", result
    check_aftermath(sandbox, marker)


def test_the_failed_fork_hooks_hand_nothing_to_an_unraisable_hook(sandbox, marker):
    """The same failed copy of the hook list, given to the program's own sys.unraisablehook: it
    held the harness's hooks (the nonce buffer, the report descriptor) until those moved to C; the
    program's hook is no longer called either."""
    program = (
        "def add(a, b):\n    return 0\n"
        + FORK_WITHOUT_PYTHON_HOOKS
        + (
            "import sys\n"
            "def grab(args):\n"
            "    resource.setrlimit(resource.RLIMIT_AS, (_hard, _hard))\n"
            "    nonce = fd = None\n"
            "    for hook in args.object[:64]:\n"
            "        func = getattr(hook, 'func', None)\n"
            "        if func is os.closerange:\n"
            "            fd = hook.args[0]\n"
            "        elif isinstance(getattr(func, '__self__', None), bytearray):\n"
            "            nonce = func.__self__\n"
            "    try:\n"
            "        os.write(fd, bytes(nonce))\n"
            "    finally:\n"
            "        os._exit(0)\n"
            "getattr(os, 'sys', sys).unraisablehook = grab\n"
            "if fork_without_python_hooks() == 0:\n"
            "    os._exit(5)\n"
            "os.wait()\n"
            "os._exit(0)\n"
        )
    )
    result = run_hostile(sandbox, marker, program, tests="assert add(2, 3) == 5\n")
    assert result.status == "failed" and not result.passed, result
    check_aftermath(sandbox, marker)


def test_a_wrapper_reads_frames_its_candidate_may_not(sandbox):
    wrapper = (
        "import sys\n"
        "def spy():\n"
        "    return sys._getframe(1).f_code.co_filename\n"  # the wrapper's own look at its caller
        "candidate = 'import sys\\nseen = spy()\\ntry:\\n    sys._getframe()\\nexcept PermissionError:\\n"
        "    refused = True\\n'\n"
        "namespace = {'spy': spy}\n"
        "exec(compile(candidate, '<candidate>', 'exec'), namespace)\n"
        "tests_namespace = __builtins__.__dict__.pop('__editforge_tests__')()\n"  # where the tests run
        "tests_namespace['namespace'] = namespace\n"
    )
    tests = "assert namespace['seen'] == '<candidate>' and namespace['refused']\n"
    assert sandbox.run(wrapper, tests, candidate_file="<candidate>").passed


@pytest.mark.skipif(os.uname().machine != "x86_64", reason="syscall numbers of x86-64")
def test_no_new_user_namespace(sandbox, marker):
    """A user namespace would give the run capabilities over new namespaces (kernel attack surface)."""
    program = (
        "import ctypes, threading\n"
        "libc = ctypes.CDLL(None, use_errno=True)\n"
        "print('unshare', libc.unshare(0x10000000), ctypes.get_errno())\n"
        "print('clone', libc.syscall(56, 0x10000000 | 17, 0, 0, 0, 0), ctypes.get_errno())\n"
        "t = threading.Thread(target=print, args=('thread ran',)); t.start(); t.join()\n"  # clone3 -> clone
    )
    result = sandbox.run(named(marker, program), "", limits=LIMITS)
    assert result.passed, result
    assert "unshare -1 1" in result.stdout and "clone -1 1" in result.stdout, result.stdout
    assert "thread ran" in result.stdout
    check_aftermath(sandbox, marker)


# ---------------------------------------------------------------- strict mode: no raw memory
@pytest.fixture(scope="module", params=BACKENDS)
def strict(request):
    """The default sandbox: strict mode, where no module with raw memory access can be loaded."""
    with make_sandbox(request.param, limits=LIMITS, workers=2) as sb:
        assert sb.strict
        yield sb


# A program that found a memory primitive would read the nonce with it; each of these stops at
# the primitive (its tests always fail, so only a forged sentinel could pass).
RAW_MEMORY_ROUTES = {
    "ctypes getter": "import ctypes\nprint(ctypes.c_char_p(id(b'x') + 32).value)\n",
    "pointer aliasing": (
        "import ctypes\n"
        "class U(ctypes.Union):\n    _fields_ = [('a', ctypes.c_void_p), ('p', ctypes.POINTER(ctypes.c_char))]\n"
        "u = U(); u.a = id(b'x'); print(u.p[0])\n"
    ),
    "ctypes.cast": "from ctypes import cast, c_void_p, POINTER, c_char\nprint(cast(c_void_p(id(1)), POINTER(c_char))[0])\n",
    "importlib and __import__": "import importlib\n__import__('_ctypes')\nimportlib.import_module('ctypes')\n",
    "shared object under its own name": (
        "import importlib.machinery, importlib.util, glob, os, sys\n"
        "so = glob.glob(os.path.join(os.path.dirname(os.__file__), 'lib-dynload', '_ctypes*.so'))[0]\n"
        "loader = importlib.machinery.ExtensionFileLoader('_ctypes', so)\n"
        "loader.exec_module(importlib.util.module_from_spec(importlib.util.spec_from_loader('_ctypes', loader)))\n"
    ),
    "numpy array interface": (
        "import numpy as np\nclass A:\n"
        "    __array_interface__ = {'data': (id(b'x'), False), 'shape': (64,), 'typestr': '|u1', 'version': 3}\n"
        "print(bytes(np.asarray(A())))\n"
    ),
    "numpy as_strided": (
        "from numpy.lib.stride_tricks import as_strided\nimport numpy as np\n"
        "print(as_strided(np.zeros(1, np.uint8), shape=(1 << 20,), strides=(1,)).tobytes()[:64])\n"
    ),
    "pickle with a computed name": "import pickle\npickle.loads(b'c' + b'_ct' + b'ypes\\nCFuncPtr\\n.')\n",
    "cffi": "import cffi\nffi = cffi.FFI()\n",
    "subinterpreters": "import _xxsubinterpreters as interpreters\ninterpreters.create()\n",
    "crafted bytecode (code.replace)": "def f():\n    return 1\ng = f.__code__.replace(co_code=b'd\\xff' * 4)\n",
    "crafted bytecode (CodeType)": (
        "import types\nc = compile('1', 's', 'eval')\n"
        "types.CodeType(0, 0, 0, 0, 1, 0, b'd\\xff', (), (), (), 's', 'f', 'f', 1, b'', b'', (), ())\n"
    ),
    "crafted bytecode (marshal)": "import marshal\nmarshal.loads(marshal.dumps(compile('1', 's', 'eval')))\n",
    "crafted bytecode (importlib's unmarshal, called directly)": (
        "import importlib._bootstrap_external as b, marshal\n"
        "b._compile_bytecode(marshal.dumps(compile('1', 's', 'eval')))\n"
    ),
    "crafted bytecode (a loader that serves its own bytes)": (
        "import importlib._bootstrap_external as b, importlib.util, marshal, sys, os\n"
        "data = importlib.util.MAGIC_NUMBER + b'\\0' * 12 + marshal.dumps(compile('X = 1', 'm', 'exec'))\n"
        "class L(b.SourcelessFileLoader):\n    def get_data(self, path):\n        return data\n"
        "L('m', os.path.abspath('m.pyc')).get_code('m')\n"
    ),
    "crafted bytecode (importlib's file reading patched)": (
        "import importlib._bootstrap_external as b, importlib.util, marshal, io, _io, os\n"
        "data = importlib.util.MAGIC_NUMBER + b'\\0' * 12 + marshal.dumps(compile('X = 1', 'm', 'exec'))\n"
        "_io.open_code = lambda path: io.BytesIO(data)\n"
        "b.SourcelessFileLoader('m', os.path.join(os.path.dirname(os.__file__), 'os.py')).get_code('m')\n"
    ),
}


@pytest.mark.parametrize("route", sorted(RAW_MEMORY_ROUTES))
def test_raw_memory_is_out_of_reach_in_strict_mode(strict, marker, route):
    result = run_hostile(strict, marker, RAW_MEMORY_ROUTES[route], tests="assert False, 'tests fail'\n")
    assert result.status == "failed", result
    assert "tests fail" not in result.detail, f"the route was open: {result.detail}"
    assert "not allowed" in result.detail, result.detail


def test_no_memory_primitive_is_loaded_for_a_program_to_find(strict):
    """Nothing the server loads hands out raw memory without an import: no ctypes or numpy class
    among the interpreter's types, no such module in sys.modules."""
    program = (
        "import sys\n"
        "seen, todo = set(), [object]\n"
        "while todo:\n"
        "    cls = todo.pop()\n"
        "    for sub in type.__subclasses__(cls):\n"
        "        if sub not in seen:\n"
        "            seen.add(sub); todo.append(sub)\n"
        "found = sorted(c.__module__ + '.' + c.__name__ for c in seen if c.__module__.split('.')[0] in\n"
        "               ('_ctypes', 'ctypes', 'numpy', '_cffi_backend'))\n"
        "loaded = sorted(m for m in sys.modules if m.split('.')[0] in ('ctypes', '_ctypes', 'numpy', '_cffi_backend'))\n"
        "assert not found and not loaded, (found, loaded)\n"
    )
    assert strict.run(program).status == "passed"
    assert strict.run(program, coverage=True).status == "passed"


def test_strict_mode_hinders_no_ordinary_program(strict):
    program = (
        "import collections, typing, dataclasses, re, math, itertools, functools, heapq\n"
        "import asyncio, json, unittest, decimal, fractions, statistics, string, enum, inspect\n"
        "try:\n    import numpy\nexcept ImportError:  # an optional dependency falls back\n    numpy = None\n"
        "@dataclasses.dataclass\nclass P:\n    x: int\n"
        "async def twice(x):\n    await asyncio.sleep(0)\n    return 2 * x\n"
        "def solve(xs: typing.List[int]) -> int:\n"
        "    heap = list(xs); heapq.heapify(heap)\n"
        "    counts = collections.Counter(re.findall(r'\\d', ''.join(map(str, xs))))\n"
        "    return functools.reduce(math.gcd, itertools.chain(heap, [asyncio.run(twice(P(6).x))])) + len(counts)\n"
    )
    result = strict.run(program, "assert solve([4, 8, 12]) == 8\nassert numpy is None\n")
    assert result.status == "passed", result
    assert result.verified


def test_a_declared_unverified_problem_runs_numpy_and_says_so(strict):
    program = "import numpy as np\ndef total(xs):\n    return int(np.asarray(xs).sum())\n"
    refused = strict.run(program, "assert total([1, 2]) == 3\n")
    assert refused.status == "failed" and "ImportError: importing numpy" in refused.detail, refused
    declared = strict.run(program, "assert total([1, 2]) == 3\n", unverified=True)
    assert declared.status == "passed_unverified" and declared.passed and not declared.verified, declared
    wrong = strict.run(program, "assert total([1, 2]) == 4\n", unverified=True)
    assert wrong.status == "failed", wrong


def test_the_report_channel_keeps_only_the_writers_records(strict):
    """A wrapper reports through a pipe of its own; lines need the run's token, in no program text."""
    take = "import builtins, os\nsend = builtins.__dict__.pop('__editforge_report__')\n"
    sent = strict.run(take + "send('mine {\"n\": 1}')\nprint('mine {\"n\": 9}')\n", channel=True)
    assert sent.status == "passed" and sent.channel == 'mine {"n": 1}', sent
    sprayed = strict.run(
        take + "send('mine {\"n\": 1}')\n"
        "for fd in range(3, 64):\n    try:\n        os.write(fd, b'\\nmine {\"n\": 2}\\n')\n    except OSError:\n        pass\n",
        channel=True,
    )
    assert sprayed.channel == 'mine {"n": 1}', sprayed  # (the spray also broke the run's own pass)
    assert "__editforge_report__" not in strict.run("import builtins\nprint(dir(builtins))\n").stdout


# ---------------------------------------------------------------- counters of wrapper programs
# The API-update runtime and the novel-API spy count in the candidate's process; whatever a
# program does to the counts, adoption and a pass are decided by a second run without the API.
from core.benchmarks.novelapi import CANDIDATE_FILE as SPY_CANDIDATE  # noqa: E402
from core.benchmarks.novelapi import program as spy_program  # noqa: E402
from core.benchmarks.novelapi import read_spy  # noqa: E402
from eval.apiupdate.catalogue import modifications  # noqa: E402
from eval.apiupdate.enforce import EnforcedJob, run_enforced  # noqa: E402

ABS_TESTS = "def check(candidate):\n    assert candidate([-3, 1]) == 4\n\ncheck(f)\n"
WORKAROUND = "def f(xs):\n    return sum(x if x > 0 else -x for x in xs)\n"
FRAMES = "import inspect\nframe = inspect.currentframe()\nwhile frame is not None:\n{body}    frame = frame.f_back\n"
APIUPDATE_FORGERIES = {
    "closure": (  # the counts, reached through the cells of the renamed builtin's wrapper
        "api = __builtins__.get('absolute') if isinstance(__builtins__, dict) else None\n"
        "for cell in getattr(api, '__closure__', None) or ():\n"
        "    counts = getattr(cell.cell_contents, 'counts', None)\n"
        "    if isinstance(counts, dict) and 'new' in counts:\n"
        "        counts['new'] += 9\n"
    ),
    "frame": FRAMES.format(
        body="    env = frame.f_locals.get('env')\n    if env is not None:\n        env.counts['new'] += 9\n"
    ),
    "counter": FRAMES.format(
        body="    report = frame.f_locals.get('report')\n"
        "    if isinstance(report, dict) and 'counts' in report:\n        report['counts']['new'] = 9\n"
    ),
    "the channel's writer": "import json\n"
    + FRAMES.format(
        body="    send = frame.f_locals.get('send')\n"
        "    if callable(send):\n        send('apiupdate ' + json.dumps({'counts': {'new': 9}, 'error': None}))\n"
    ),
    "stdout": "print('\\n@@apiupdate ' + 'x' * 16 + ' {\"counts\": {\"new\": 9}, \"error\": null}')\n",
}


@pytest.mark.parametrize("forgery", sorted(APIUPDATE_FORGERIES))
def test_api_update_adoption_cannot_be_forged(strict, forgery):
    mod = next(m for m in modifications("builtins.abs") if m.type == "R1")
    jobs = [
        EnforcedJob("def f(xs):\n    return sum(absolute(x) for x in xs)\n", mod, ABS_TESTS, "f"),  # control
        EnforcedJob(APIUPDATE_FORGERIES[forgery] + WORKAROUND, mod, ABS_TESTS, "f"),
    ]
    control, forged = run_enforced(strict, jobs, LIMITS)
    assert control.outcome == "adoption", control
    assert forged.outcome == "workaround" and forged.passed and not forged.adopted, forged


SPY_TESTS = "assert solve('Hello  world and more', 12) == 'Hello [...]'\n"
SPY_REIMPLEMENTED = "def solve(text, width):\n    return 'Hello [...]'\n"
SPY_FORGERIES = {
    "closure": (
        "import textwrap\n"
        "for cell in textwrap.shorten.__closure__ or ():\n"
        "    value = cell.cell_contents\n"
        "    if isinstance(value, dict) and 'returned' in value:\n        value['returned'] = 5\n"
        "    elif isinstance(value, list):\n        value.append({'args': ['1'], 'kwargs': {}})\n"
    ),
    "frame": FRAMES.format(
        body="    state, calls = frame.f_locals.get('state'), frame.f_locals.get('calls')\n"
        "    if isinstance(state, dict) and isinstance(calls, list):\n"
        "        state['returned'] = 5\n        calls.append({'args': ['1'], 'kwargs': {}})\n"
    ),
    "stdout": 'print(\'\\n@@spy \' + \'x\' * 16 + \' {"calls": [{"args": [], "kwargs": {}}], "error": null}\')\n',
    "__wrapped__": "import textwrap\nreal = textwrap.shorten.__wrapped__\n",
}


def spy_verdict(sandbox, code: str) -> tuple[bool, list]:
    """As the novel-API evaluation decides: a pass that also passes with the API taken away needed
    no API (no pass, no call)."""
    runs = [(spy_program(code, ["textwrap.shorten"], absent=absent), SPY_TESTS) for absent in (False, True)]
    first, without = sandbox.run_many(runs, candidate_file=SPY_CANDIDATE, channel=True)
    if first.passed and without.passed:
        return False, []
    return first.passed, (read_spy(first.channel) or {}).get("calls", [])


@pytest.mark.parametrize("forgery", sorted(SPY_FORGERIES))
def test_a_spy_pass_cannot_be_forged(strict, forgery):
    passed, calls = spy_verdict(
        strict, "import textwrap\ndef solve(text, width):\n    return textwrap.shorten(text, width)\n"
    )
    assert passed and calls, calls  # the control calls the API
    passed, calls = spy_verdict(strict, SPY_FORGERIES[forgery] + SPY_REIMPLEMENTED)
    assert not passed and calls == [], (forgery, calls)


def test_a_process_the_run_starts_cannot_read_its_memory(strict):
    """A fresh interpreter started by the run has no audit hook (ctypes loads there); the run is not
    dumpable, and the native module (reachable through the harness's frames) cannot make it so."""
    program = (
        "import inspect, os, subprocess, sys\n"
        "secret = b's3cr3t-value-0123456789'\n"
        "frame = inspect.currentframe()\n"
        "while frame is not None:\n"
        "    native = getattr(frame.f_locals.get('self'), 'native', None)\n"
        "    if native is not None:\n"
        "        try:\n            native.prctl_set(4, 1)\n"
        "        except ValueError as exc:\n            print('refused:', exc)\n"
        "    frame = frame.f_back\n"
        "reader = f'''\n"
        "import ctypes\n"
        "class iovec(ctypes.Structure):\n"
        "    _fields_ = [('base', ctypes.c_void_p), ('len', ctypes.c_size_t)]\n"
        "buf = ctypes.create_string_buffer(23)\n"
        "local, remote = iovec(ctypes.addressof(buf), 23), iovec({id(secret) + 32}, 23)\n"
        "libc = ctypes.CDLL(None, use_errno=True)\n"
        "n = libc.process_vm_readv({os.getpid()}, ctypes.byref(local), 1, ctypes.byref(remote), 1, 0)\n"
        "print(n, ctypes.get_errno(), buf.raw)\n"
        "'''\n"
        "print(subprocess.run([sys.executable, '-c', reader], capture_output=True, text=True).stdout)\n"
    )
    result = strict.run(program)
    assert result.status == "passed", result
    assert "refused: prctl option 4 is not offered" in result.stdout, result.stdout
    assert "-1 1 " in result.stdout and "s3cr3t" not in result.stdout, result.stdout  # EPERM


@pytest.mark.skipif(not bwrap_available(), reason="bubblewrap cannot run here")
def test_a_command_run_leaves_nothing_outside_the_scratch_folders_for_the_next():
    """bwrap's own root is a tmpfs that lives as long as the worker: read-only, so a run's files
    cannot reach the runs after it (a command run is not confined by Landlock)."""
    with make_sandbox("bwrap", limits=LIMITS, workers=1) as sb:
        planted = sb.run_command(
            ["sh", "-c", "for d in / /work /root /usr; do echo x > $d/planted; done; exit 0"]
        )
        assert "Read-only file system" in planted.stderr, planted
        found = sb.run_command(["sh", "-c", "cat /planted /work/planted /root/planted /usr/planted"])
        assert found.status == "failed" and "x" not in found.stdout, found
