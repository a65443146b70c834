"""The sandbox's ordinary behaviour on both backends: verdicts, output, timing, parallelism."""

from __future__ import annotations

import itertools
import json
import os
import time

import pytest

from core.sandbox import (
    STATUSES,
    ExecutionResult,
    SandboxLimits,
    SandboxUnavailable,
    bwrap_available,
    make_sandbox,
)
from core.sandbox.sandbox import worker_cpus

LIMITS = SandboxLimits(timeout_s=5.0, memory_mb=512, max_output_bytes=10_000, disk_mb=64)
BACKENDS = [
    pytest.param(
        "bwrap", marks=pytest.mark.skipif(not bwrap_available(), reason="bubblewrap cannot run here")
    ),
    "local",
]
PROGRAM = "def add(a, b):\n    return a + b\n"


@pytest.fixture(scope="module", params=BACKENDS)
def sandbox(request):
    with make_sandbox(request.param, limits=LIMITS, workers=2) as sb:
        yield sb


def test_passing_program(sandbox):
    result = sandbox.run(PROGRAM, "assert add(1, 2) == 3\n")
    assert (result.status, result.passed, result.exit_code, result.detail) == ("passed", True, 0, "")


def test_check_candidate_convention(sandbox):
    tests = "def check(candidate):\n    assert candidate(2, 2) == 4\n\ncheck(add)\n"
    assert sandbox.run(PROGRAM, tests).passed


def test_failing_assert(sandbox):
    result = sandbox.run(PROGRAM, "assert add(1, 2) == 4, 'wrong sum'\n")
    assert (result.status, result.exit_code, result.detail) == ("failed", 1, "AssertionError: wrong sum")
    assert "Traceback" in result.stderr and "harness" not in result.stderr  # the harness's frames are hidden


def test_syntax_error(sandbox):
    result = sandbox.run("def broken(:\n    pass\n", "assert True\n")
    assert result.status == "failed" and result.detail.startswith("SyntaxError")


def test_exception_in_the_program(sandbox):
    result = sandbox.run("x = 1 / 0\n", "assert True\n")
    assert result.status == "failed" and result.detail == "ZeroDivisionError: division by zero"


def test_nonzero_exit(sandbox):
    result = sandbox.run("import sys\nsys.exit(3)\n", "")
    assert (result.status, result.exit_code) == ("failed", 3)


def test_memory_error_status(sandbox):
    result = sandbox.run("x = bytearray(8 * 2**30)\n", "")
    assert result.status == "memory" and "512 MB" in result.detail


def test_killed_by_signal(sandbox):
    result = sandbox.run("import os, signal\nos.kill(os.getpid(), signal.SIGSEGV)\n", "")
    assert (result.status, result.exit_code, result.detail) == ("killed", -11, "killed by SIGSEGV")


def test_unicode_and_invalid_bytes(sandbox):
    result = sandbox.run(
        "import sys\nprint('héllo wörld ✓ 🚀')\nsys.stdout.flush()\nsys.stdout.buffer.write(b'\\xff\\n')\n"
    )
    assert result.passed
    assert result.stdout == "héllo wörld ✓ 🚀\n\ufffd\n"


def test_stdout_and_stderr_are_separate(sandbox):
    result = sandbox.run("import sys\nprint('out')\nprint('err', file=sys.stderr)\n")
    assert (result.stdout, result.stderr) == ("out\n", "err\n")


def test_output_over_the_cap_stops_the_run(sandbox):
    result = sandbox.run("print('x' * 20_000)\n", "")
    assert result.status == "output_limit" and result.stdout == "x" * LIMITS.max_output_bytes


def test_output_under_the_cap_is_kept_whole(sandbox):
    result = sandbox.run("print('y' * 9_000)\n", "")
    assert result.passed and len(result.stdout) == 9_001


def test_timing(sandbox):
    fast = sandbox.run(PROGRAM, "assert add(1, 1) == 2\n")
    slow = sandbox.run("import time\ntime.sleep(0.3)\n", "")
    assert 0 < fast.duration_s < 0.5
    assert 0.3 <= slow.duration_s < 1.5


def test_stdin(sandbox):
    assert sandbox.run("name = input()\n", "assert name == 'ada'\n", stdin="ada\nlovelace\n").passed
    result = sandbox.run("name = input()\n", "")  # no stdin: immediate EOF, never a hang
    assert result.status == "failed" and result.detail.startswith("EOFError")


def test_fresh_interpreter_semantics(sandbox):
    program = "import pickle, random, sys\nclass A:\n    pass\nprint(random.random())\n"
    tests = (
        "assert __name__ == '__main__'\nassert pickle.loads(pickle.dumps(A())).__class__.__name__ == 'A'\n"
    )
    first, second = sandbox.run(program, tests), sandbox.run(program, tests)
    assert first.passed and second.passed
    assert first.stdout != second.stdout  # each run reseeds random


def test_forks_and_subprocesses(sandbox):
    """A forked child that exits or falls through to the end does not speak for the run."""
    program = (
        "import multiprocessing, os, subprocess, sys\n"
        "pid = os.fork()\n"
        "if pid == 0:\n"
        "    sys.exit(0)\n"
        "os.waitpid(pid, 0)\n"
        "if os.fork() == 0:\n"
        "    raise ValueError('in the child')\n"
        "os.wait()\n"
        "def square(x):\n"
        "    return x * x\n"
    )
    tests = (
        "with multiprocessing.get_context('fork').Pool(2) as pool:\n"
        "    assert pool.map(square, range(5)) == [0, 1, 4, 9, 16]\n"
        "assert subprocess.run(['echo', 'hi'], capture_output=True, text=True).stdout == 'hi\\n'\n"
    )
    result = sandbox.run(program, tests)
    assert result.passed, result


def test_localhost_works_inside(sandbox):
    program = (
        "import socket, threading\n"
        "server = socket.create_server(('127.0.0.1', 0))\n"
        "threading.Thread(target=lambda: server.accept()[0].sendall(b'pong'), daemon=True).start()\n"
        "reply = socket.create_connection(server.getsockname(), timeout=2).recv(4)\n"
    )
    result = sandbox.run(program, "assert reply == b'pong'\n")
    assert result.passed, result


def test_no_state_leaks_between_runs(sandbox):
    write = "import os\nopen('left.txt', 'w').write('x')\nos.makedirs('d/e')\nos.chmod('d', 0)\n"
    assert sandbox.run(write, "").passed
    results = sandbox.run_many([("import os\n", "assert not os.path.exists('left.txt')\n")] * 4)
    assert all(r.passed for r in results), results


def test_run_many_keeps_job_order(sandbox):
    jobs = [(f"value = {i}\n", "print(value)\nassert value != 7\n") for i in range(20)]
    results = sandbox.run_many(jobs)
    assert [r.stdout for r in results] == [f"{i}\n" for i in range(20)]
    assert [r.passed for r in results] == [i != 7 for i in range(20)]


def test_run_many_runs_in_parallel(sandbox):
    jobs = [("import time\ntime.sleep(0.5)\n", "")] * 6
    started = time.monotonic()
    results = sandbox.run_many(jobs, workers=3)
    elapsed = time.monotonic() - started
    assert all(r.passed for r in results)
    assert elapsed < 2.0, f"6 x 0.5 s on 3 workers took {elapsed:.2f} s (3 s if sequential)"


AFFINITY = "import os\nprint(json.dumps(sorted(os.sched_getaffinity(0))))\n"


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("split", [True, False], ids=["split", "in_process"])
def test_each_worker_keeps_every_process_of_its_runs_on_one_cpu(backend, split):
    """A pool of a worker per CPU: the program's process and, in a split run, the tests' trusted
    process both stay on their worker's one CPU, each a CPU this process may use."""
    cpus = sorted(os.sched_getaffinity(0))
    program = "import json\n" + AFFINITY + "def cpus():\n    return sorted(os.sched_getaffinity(0))\n"
    tests = "import os\nassert cpus() == sorted(os.sched_getaffinity(0))\nassert len(cpus()) == 1\n"
    with make_sandbox(backend, limits=LIMITS, workers=len(cpus)) as sb:
        results = sb.run_many([(program, tests)] * (3 * len(cpus)), split=split)
    assert all(r.passed and r.mode == ("split" if split else "in_process") for r in results), results
    seen = {tuple(json.loads(r.stdout)) for r in results}
    assert all(len(one) == 1 and one[0] in cpus for one in seen), seen


@pytest.mark.parametrize("backend", BACKENDS)
def test_unpinned_runs_may_use_every_cpu(backend):
    cpus = sorted(os.sched_getaffinity(0))
    with make_sandbox(backend, limits=LIMITS, workers=len(cpus), pin_cpus=False) as sb:
        result = sb.run("import json\n" + AFFINITY)
    assert result.passed, result
    assert json.loads(result.stdout) == cpus


def test_workers_go_round_robin_over_the_cpus_only_where_there_is_one_per_cpu():
    cpus = sorted(os.sched_getaffinity(0))
    assert list(itertools.islice(worker_cpus(len(cpus)), 2 * len(cpus))) == cpus * 2
    assert list(itertools.islice(worker_cpus(len(cpus) + 1), len(cpus) + 1)) == [*cpus, cpus[0]]
    if len(cpus) > 1:  # a smaller pool (one of several processes' pools) is left to the kernel
        assert set(itertools.islice(worker_cpus(len(cpus) - 1), 5)) == {None}


def test_run_command_shell_script(sandbox):
    files = {"run.sh": "echo compiling\ncat data/input.txt\nexit 3\n", "data/input.txt": "42\n"}
    result = sandbox.run_command(["sh", "run.sh"], files)
    assert (result.status, result.exit_code, result.stdout) == ("failed", 3, "compiling\n42\n")


def test_run_command_pass_marker(sandbox):
    argv = ["python3", "-c", "import sys; print(sys.stdin.read().upper())"]
    assert sandbox.run_command(argv, {}, stdin="ok").passed
    assert sandbox.run_command(argv, {}, stdin="ok", pass_marker="OK").passed
    missing = sandbox.run_command(argv, {}, stdin="no", pass_marker="OK")
    assert missing.status == "failed" and "pass marker" in missing.detail


def test_run_command_missing_program(sandbox):
    result = sandbox.run_command(["definitely-not-a-program-xyz"], {})
    assert result.exit_code == 127 and "cannot execute" in result.stderr


@pytest.mark.skipif(not bwrap_available(), reason="bubblewrap cannot run here")
def test_bwrap_shows_the_read_only_folders_it_is_given_and_no_other(tmp_path):
    """A toolchain outside the system folders (rustup's) is seen read-only, and stays across runs."""
    given, other = tmp_path / "toolchain", tmp_path / "other"
    for folder in (given, other):
        folder.mkdir()
        (folder / "tool.txt").write_text("42\n")
    with make_sandbox("bwrap", limits=LIMITS, workers=1, read_only=[str(given)]) as sb:
        runs = [sb.run_command(["cat", str(given / "tool.txt")]) for _ in range(2)]
        write = sb.run_command(["sh", "-c", f"echo 0 > {given}/tool.txt || echo 0 > {given}/new.txt"])
        hidden = sb.run_command(["cat", str(other / "tool.txt")])
    assert [(r.status, r.stdout) for r in runs] == [("passed", "42\n")] * 2
    assert write.status == "failed" and "Read-only file system" in write.stderr
    assert (given / "tool.txt").read_text() == "42\n" and not (given / "new.txt").exists()
    assert hidden.status == "failed" and "No such file" in hidden.stderr


def test_network_profile_switch_restarts_the_worker(sandbox):
    allowed = SandboxLimits(**{**LIMITS.to_dict(), "network": True})
    assert sandbox.run(PROGRAM, "assert add(2, 2) == 4\n", limits=allowed).passed
    assert sandbox.run(PROGRAM, "assert add(2, 2) == 4\n").passed


def test_bad_arguments(sandbox):
    with pytest.raises(ValueError, match="run_command"):
        sandbox.run("console.log(1)", language="js")
    with pytest.raises(ValueError, match="inside the work folder"):
        sandbox.run_command(["cat", "x"], {"../escape.txt": "x"})


def test_limits_from_config():
    limits = SandboxLimits.from_mapping({"timeout_s": 0.5, "memory_mb": 256, "network": False})
    assert (limits.timeout_s, limits.memory_mb, limits.max_output_bytes) == (0.5, 256, 1_000_000)
    with pytest.raises(ValueError, match="unknown sandbox limit.*timeout\\b"):
        SandboxLimits.from_mapping({"timeout": 3})
    with pytest.raises(ValueError, match="timeout_s must be positive"):
        SandboxLimits(timeout_s=0)
    with make_sandbox("local", limits=limits, workers=1) as sb:
        result = sb.run("while True:\n    pass\n")
    assert result.status == "timeout" and 0.5 <= result.duration_s < 1.5


def test_forced_bwrap_without_bwrap_fails_clearly(monkeypatch):
    monkeypatch.setenv("EDITFORGE_BWRAP", "/nonexistent/bwrap")
    assert not bwrap_available()
    with pytest.raises(SandboxUnavailable, match="apt-get install -y bubblewrap"):
        make_sandbox("bwrap")
    with make_sandbox("auto", workers=1) as sb:
        assert sb.backend == "local"
        assert sb.run(PROGRAM, "assert add(0, 0) == 0\n").passed


def test_unknown_backend():
    with pytest.raises(ValueError, match="unknown sandbox backend"):
        make_sandbox("docker")


def test_result_invariants():
    for status in STATUSES:  # passed is True for the two passing statuses alone
        ok = status in ("passed", "passed_unverified")
        result = ExecutionResult(status, ok, 0, "", "", 0.0)
        assert result.passed is ok
        assert result.verified is (status == "passed")
        with pytest.raises(ValueError, match="contradicts"):
            ExecutionResult(status, not ok, 0, "", "", 0.0)
    error = ExecutionResult.error("lost the server")
    assert (error.status, error.passed, error.detail) == ("error", False, "lost the server")
    with pytest.raises(ValueError, match="unknown status"):
        ExecutionResult("ok", False, 0, "", "", 0.0)


def test_closed_sandbox_refuses_work():
    sb = make_sandbox("local", workers=1)
    sb.close()
    with pytest.raises(RuntimeError, match="closed"):
        sb.run(PROGRAM, "")
