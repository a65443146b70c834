"""Split commands (`run_split_command`): the verdict is the trusted command's outcome alone, its
input is out of the candidate's reach, and whatever either side does ends within the run."""

from __future__ import annotations

import json

import pytest

from core.sandbox import SandboxLimits, make_sandbox

PASSING = json.dumps({"passed": True, "tests_passed": 1, "tests_total": 1, "delegated": 0})
SECRET = "expected-value-7f3a9c"
# The trusted side: its stdin is the outcome it writes to descriptor 5, after the candidate answered.
TRUSTED = ["sh", "-c", "printf ping >&4; head -c 4 <&3 >/dev/null; cat >&5"]


@pytest.fixture(scope="module", params=["bwrap", "local"])
def sandbox(request):
    from core.sandbox import bwrap_available

    if request.param == "bwrap" and not bwrap_available():
        pytest.skip("bubblewrap is not usable here")
    with make_sandbox(request.param, limits=SandboxLimits(timeout_s=5)) as box:
        if not box.split_commands():
            pytest.skip("no Landlock: commands cannot run split here")
        yield box


def test_the_outcome_alone_decides(sandbox):
    answer = ["sh", "-c", "head -c 4 <&3 >/dev/null; printf pong >&4; exit 3"]
    result = sandbox.run_split_command(answer, {}, TRUSTED, PASSING)
    assert result.passed and result.mode == "split" and result.tests_total == 1, result
    failing = json.dumps(
        {"passed": False, "tests_passed": 0, "tests_total": 1, "delegated": 0, "error": "no\nway"}
    )
    result = sandbox.run_split_command(answer, {}, TRUSTED, failing)
    assert not result.passed and result.detail == "no way", result


def test_the_candidate_cannot_read_the_trusted_input_or_write_the_outcome(sandbox):
    """The candidate scans every process's descriptors and memory for the trusted side's input and
    writes a passing outcome to every descriptor 5 it can open: it finds nothing, and the trusted
    side's own (failing) outcome decides."""
    scan = (
        "for p in /proc/[0-9]*; do for f in $p/fd/* $p/environ $p/cmdline; do "
        "grep -a -o " + SECRET + " $f 2>/dev/null; done; "
        f"printf '%s' '{PASSING}' > $p/fd/5 2>/dev/null; done; "
        "head -c 4 <&3 >/dev/null; printf pong >&4"
    )
    failing = json.dumps(
        {"passed": False, "tests_passed": 0, "tests_total": 1, "delegated": 0, "error": SECRET}
    )
    result = sandbox.run_split_command(["sh", "-c", scan], {}, TRUSTED, failing)
    assert not result.passed, result
    assert SECRET not in result.stdout, result.stdout
    assert result.detail == SECRET  # the trusted side's outcome, not the candidate's forgery


def test_a_trusted_side_that_ends_without_an_outcome_fails_and_one_that_hangs_times_out(sandbox):
    answer = ["sh", "-c", "sleep 0.2"]
    dies = sandbox.run_split_command(answer, {}, ["sh", "-c", "exit 0"], PASSING)
    assert dies.status == "failed" and "without a report" in dies.detail, dies
    junk = sandbox.run_split_command(answer, {}, ["sh", "-c", "printf '{\"passed\": true}' >&5"], "")
    assert not junk.passed and "without a report" in junk.detail, junk
    hangs = sandbox.run_split_command(
        answer, {}, ["sh", "-c", "sleep 30"], PASSING, limits=SandboxLimits(timeout_s=1)
    )
    assert hangs.status == "timeout", hangs
    after = sandbox.run_split_command(
        ["sh", "-c", "head -c 4 <&3 >/dev/null; printf pong >&4"], {}, TRUSTED, PASSING
    )
    assert after.passed, after  # the next run gets fresh processes and pipes


def test_the_files_are_the_candidates_and_names_stay_inside(sandbox):
    program = ["sh", "-c", "head -c 4 <&3 >/dev/null; cat main.txt >&4"]
    trusted = ["sh", "-c", 'printf ping >&4; x=$(head -c 2 <&3); [ "$x" = ok ] && cat >&5']
    assert sandbox.run_split_command(program, {"main.txt": "ok"}, trusted, PASSING).passed
    with pytest.raises(ValueError):
        sandbox.run_split_command(program, {"../escape": "x"}, trusted, PASSING)


def test_the_candidate_cannot_signal_limit_or_slow_the_trusted_side(sandbox):
    """The trusted side hands the candidate its pid; the candidate signals it (SIGUSR1 would open
    node's inspector), lowers its priority and its limits: every call is refused (seccomp.protect,
    whatever Landlock's ABI), and the trusted side, at its priority, writes its outcome."""
    trusted = [
        "sh",
        "-c",
        'printf "%s\\n" $$ >&4; head -c 2 <&3 >/dev/null; '
        '[ "$(cut -d" " -f19 /proc/$$/stat)" = 0 ] && [ "$(ulimit -n)" != 8 ] && cat >&5',
    ]
    reach = (
        "read pid <&3; kill -USR1 $pid; kill -STOP $pid; renice -n 19 -p $pid; renice -n 19 -u $(id -u); "
        "prlimit --pid $pid --nofile=8:8; printf ok >&4"
    )
    result = sandbox.run_split_command(["sh", "-c", reach], {}, trusted, PASSING)
    assert result.passed, result
    assert "Operation not permitted" in result.stderr or "Permission denied" in result.stderr, result.stderr
