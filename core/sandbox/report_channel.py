"""How a run's verdict is read from what its processes wrote: the report pipe and the run token
of in-process runs and commands, the trusted side's outcome of split runs, and a wrapper program's
record channel.

What it guarantees: a pass needs the one thing the program cannot produce on its own (the nonce
written back unaltered after the tests, or the trusted process's outcome, which no candidate
process can write); everything else a run wrote is untrusted text, read with a cap, decoded with
replacement and cut to one line. Standard library only.
"""

from __future__ import annotations

import json
import os
import signal

REPORT_CAP = 4096  # the report pipe carries one short record; anything beyond is junk
DATA_CAP = 1 << 20  # the data pipe carries the coverage of one program


def verdict(job: dict, stop: str | None, status: int, nonce: bytes, report: bytes, out: bytes) -> tuple:
    """(status, exit code, detail) of a finished run."""
    limits = job["limits"]
    if stop == "timeout":
        return stop, None, f"wall-clock limit of {limits['timeout_s']:g}s exceeded; all processes killed"
    if stop == "output_limit":
        return stop, None, f"a stream exceeded {limits['max_output_bytes']} bytes; the run was stopped"
    code = os.waitstatus_to_exitcode(status)
    if code < 0:
        return "killed", code, f"killed by {signal.Signals(-code).name}"
    if job["kind"] != "python":
        marker, token = job.get("pass_marker"), job.get("run_token")
        if code == 0 and (marker is None or marker.encode() in out) and (not token or report == nonce):
            return "passed", 0, ""
        if code != 0:
            return "failed", code, f"exited with code {code}"
        if marker is not None and marker.encode() not in out:
            return "failed", code, f"exited with code 0; pass marker {marker!r} not in stdout"
        if not report:
            return (
                "failed",
                code,
                "exited with code 0 without the run token (the tests did not reach their end)",
            )
        return "failed", code, "exited with code 0 but the run token was altered"
    if report == nonce and code == 0:
        if job.get("unverified"):  # raw memory was within reach: the nonce proves less
            return "passed_unverified", 0, "passed in the declared unverified mode (raw memory allowed)"
        return "passed", 0, ""
    if not report:
        return "failed", code, f"exited with code {code} before the tests finished (no pass sentinel)"
    if not report.startswith(b"!"):
        return (
            "failed",
            code,
            "the pass sentinel was altered (the program wrote to the harness's channel)",
        )
    kind, _, message = report[1:].decode("utf-8", errors="replace").partition(":")
    message = message.strip()
    if kind == "MemoryError":
        return "memory", code, f"MemoryError under the {limits['memory_mb']} MB limit"
    if kind == "SystemExit":
        return "failed", code, f"SystemExit({message}) before the tests finished"
    return "failed", code, f"{kind}: {message}" if message else kind


def split_verdict(job: dict, stop: str | None, outcome: bytes, died: int | None) -> tuple:
    """(status, exit code, detail, counts) of a split run, from the trusted side's report alone."""
    limits = job["limits"]
    counts: dict = {"tests_passed": None, "tests_total": None, "delegated_checks": None}
    if stop == "timeout":
        return (
            stop,
            None,
            f"wall-clock limit of {limits['timeout_s']:g}s exceeded; all processes killed",
            counts,
        )
    if stop == "output_limit":
        return (
            stop,
            None,
            f"a stream exceeded {limits['max_output_bytes']} bytes; the run was stopped",
            counts,
        )
    died = died if not outcome else None
    code = os.waitstatus_to_exitcode(died) if died is not None else 0 if outcome else None
    try:
        report = json.loads(outcome)
        passed, kind = report["passed"], report.get("kind")
        counts = {
            "tests_passed": report["tests_passed"],
            "tests_total": report["tests_total"],
            "delegated_checks": report["delegated"],
        }
        if type(passed) is not bool or not all(type(v) is int for v in counts.values()):
            raise TypeError("a malformed report")
    except Exception:  # RecursionError too: whatever the report holds, it is no pass
        how = f"killed by {signal.Signals(-code).name}" if code is not None and code < 0 else f"exit {code}"
        return "failed", code, f"the trusted test process ended without a report ({how})", counts
    if passed is True:
        return "passed", 0, "", counts
    error = " ".join(str(report.get("error", "")).split())[:500]  # one line, whatever the program wrote
    if kind == "memory":
        return "memory", code, f"MemoryError under the {limits['memory_mb']} MB limit", counts
    return "failed", code, error or "the tests failed", counts


def retires(outcome: bytes | None) -> bool:
    """Whether the trusted process must be replaced after this run: it said so in its outcome, or
    its outcome cannot be read (none, cut short, not a report): a process whose word cannot be
    read is never trusted with the next run."""
    try:
        report = json.loads(outcome or b"null")
    except (ValueError, RecursionError):
        return True
    return type(report) is not dict or "retire" in report


def channel_writer(fd: int, token: bytes):
    """The function a trusted wrapper program reports through (``Sandbox.run(channel=True)``): one
    record per call, a line on a pipe of its own, never stdout. The server keeps only lines that
    carry this run's token, which is in no program text; the program can still reach the writer
    itself through the wrapper's closures (docs/sandbox.md)."""
    prefix, write = token + b" ", os.write

    def report(record: str) -> None:
        view = memoryview(prefix + record.replace("\n", " ").encode("utf-8", "replace") + b"\n")
        while view:
            view = view[write(fd, view) :]

    return report


def records(channel: bytes, token: bytes) -> str:
    """The lines of the channel that carry ``token``, without it (anything else was not the writer's)."""
    prefix = token + b" "
    lines = [line[len(prefix) :] for line in channel.split(b"\n") if line.startswith(prefix)]
    return b"\n".join(lines).decode("utf-8", errors="replace")
