"""The sandbox's system-call module: built per interpreter and cached, a clear error where it
cannot be built, and no function that takes an address."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from core.sandbox import SandboxUnavailable, native

OFFERED = {
    "set_no_new_privs",
    "prctl_set",
    "set_undumpable",
    "unshare",
    "mount",
    "umount2",
    "landlock_abi",
    "landlock_create_ruleset",
    "landlock_add_path",
    "landlock_restrict",
    "seccomp_install",
    "drop_capabilities",
    "keyring_clear",
    "ipc_remove",
    "ipc_in_use",
    "guard_forks",
    "zygote_serve",  # (socket fd, server pid): the zygote's loop; forks, as os.fork does
}


def test_the_module_offers_only_narrow_calls():
    module = native.load()
    assert {name for name in dir(module) if not name.startswith("__")} == OFFERED
    for option in (35, 4):  # PR_SET_MM takes addresses; PR_SET_DUMPABLE would undo set_undumpable
        with pytest.raises(ValueError, match="not offered"):
            module.prctl_set(option, 1)
    with pytest.raises(ValueError, match="multiple of 8"):
        module.seccomp_install(b"123")
    with pytest.raises(TypeError):
        module.seccomp_install(12345)  # an address is not a program
    assert module.landlock_abi() >= 0


FORK_GUARD = """
import os, sys
from core.sandbox import native
module = native.load()

def refused(error, *args):
    try:
        module.guard_forks(*args)
    except error:
        return True
    return False

nonce, (r, w) = bytearray(b"the-run-nonce"), os.pipe()
assert refused(TypeError, b"bytes", w), "a bytes object was accepted"
module.guard_forks(nonce, w)
assert refused(PermissionError, bytearray(b"decoy"), r), "the guard was pointed elsewhere"
pid = os.fork()
if pid == 0:
    try:
        os.fstat(w)
        os._exit(3)  # the report pipe is still open in the fork
    except OSError:
        os._exit(0 if nonce == bytearray(len(nonce)) else 4)
code = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
assert code == 0, code
assert nonce == b"the-run-nonce"  # the run itself keeps it
os.fstat(w)
print("guarded")
"""


def _in_own_process(script: str) -> str:
    """What ``script`` prints, run in a fresh interpreter from the repository (it must succeed)."""
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(script)],
        cwd=Path(native.__file__).resolve().parents[2],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_the_fork_guard_zeroes_the_nonce_and_closes_the_pipe_in_forks_only_and_arms_once():
    """In a process of its own: once armed, the guard acts in every fork of that process."""
    assert _in_own_process(FORK_GUARD) == "guarded"


ZYGOTE = """
import json, os, socket, time
from core.sandbox import native
module = native.load()
module.prctl_set(36, 1)  # PR_SET_CHILD_SUBREAPER, as on the local backend: orphans come here
zygote_end, server_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
zygote = os.getpid()
server = os.fork()
if server == 0:  # the server's side, as zygote.ZygoteClient speaks it
    zygote_end.close()

    def ask(message, fds=()):
        socket.send_fds(server_end, [message], list(fds))
        for fd in fds:
            os.close(fd)

    def answer():
        return json.loads(server_end.recv(1 << 16))

    def others():  # the zygote's children but this server
        with open(f"/proc/{zygote}/task/{zygote}/children") as f:
            return [int(pid) for pid in f.read().split() if int(pid) != os.getpid()]

    for code, daemon in ((3, False), (0, True)):
        r, w = os.pipe()
        marker = os.urandom(24).hex()  # made here: the zygote only ever holds it in its loop's buffer
        ask(b"F" + json.dumps({"code": code, "daemon": daemon, "mark": "#" * 200 + marker}).encode(), [w])
        pid = answer()["pid"]
        assert json.loads(os.read(r, 400))["code"] == code
        assert os.waitstatus_to_exitcode(answer()["exited"]) == code
        if daemon:
            time.sleep(0.2)  # the orphan is the zygote's now
            assert others(), "the setsid() orphan did not reach the zygote"
        ask(b"E")
        ended = answer()
        assert ended["ended"] and os.waitstatus_to_exitcode(ended["status"]) == code, ended
        assert others() == [], f"processes outlived their run: {others()}"
        # the next run's process (a shorter job) looks for this one's marker in the C module's memory
        (marker_r, marker_w), (verdict_r, verdict_w) = os.pipe(), os.pipe()
        ask(b"F" + json.dumps({"code": 0, "daemon": False, "scan": True}).encode(), [marker_r, verdict_w])
        answer()
        os.write(marker_w, marker.encode())
        os.close(marker_w)
        assert os.read(verdict_r, 100) == b"clean", "a run's process found the job before its own"
        answer()
        ask(b"E")
        answer()
    ask(b"F" + json.dumps({"code": 0, "daemon": False}).encode())  # no descriptor: an empty list
    answer(), answer()
    ask(b"E")
    answer()
    ask(b"E")  # between runs: nothing to kill, no status
    assert answer() == {"ended": True, "status": None}
    ask(b"F" + json.dumps({"code": 0, "daemon": True}).encode())  # a run still going when the server goes
    answer()
    print("served", flush=True)
    os._exit(0)  # the zygote's loop ends once its server is gone
server_end.close()
request = module.zygote_serve(zygote_end.fileno(), server)
if request is None:  # the loop is over: it killed and reaped every process it had
    with open(f"/proc/{zygote}/task/{zygote}/children") as f:
        assert not f.read().split(), "a run's process outlived the zygote's loop"
if request is not None:  # a run's process
    zygote_end.close()
    body, fds = request
    job = json.loads(body)
    if job.get("scan"):  # the module's mappings (its static buffers: the anonymous one after) hold no earlier job
        needle = os.read(fds[0], 100)
        lines = open("/proc/self/maps").read().splitlines()
        regions = []
        for i, line in enumerate(lines):
            if line.endswith(module.__file__):
                regions.append(line)
                if i + 1 < len(lines) and len(lines[i + 1].split()) < 6:
                    regions.append(lines[i + 1])
        found = False
        with open("/proc/self/mem", "rb") as mem:
            for line in regions:
                lo, hi = (int(x, 16) for x in line.split()[0].split("-"))
                if "r" in line.split()[1]:
                    mem.seek(lo)
                    found = found or needle in mem.read(hi - lo)
        os.write(fds[1], b"found" if found else b"clean")
        os._exit(0)
    if fds:
        os.write(fds[0], json.dumps(job).encode())
    if job["daemon"] and os.fork() == 0:
        os.setsid()
        time.sleep(60)  # an orphan the end of the run must kill
    os._exit(job["code"])
"""


def test_the_zygote_loop_forks_reports_exits_and_kills_every_process_of_a_run():
    """The zygote's loop in C (zygote.py), spoken to as the server speaks to it: each fork gets the
    job's text and descriptors, its exit status is reported, the end of a run kills a setsid()
    orphan too, and the loop ends once the server is gone."""
    assert _in_own_process(ZYGOTE) == "served"


def test_it_is_built_once_per_source_and_interpreter(tmp_path, monkeypatch):
    monkeypatch.setenv("EDITFORGE_CACHE", str(tmp_path))
    native.built.cache_clear()
    try:
        first = native.built(sys.executable)
        assert first.startswith(str(tmp_path)) and native.load_path(first).landlock_abi() >= 0
        native.built.cache_clear()
        assert native.built(sys.executable) == first  # reused from the cache, not rebuilt
    finally:
        native.built.cache_clear()


def test_a_missing_compiler_is_a_clear_error(tmp_path, monkeypatch):
    monkeypatch.setenv("EDITFORGE_CACHE", str(tmp_path))
    monkeypatch.setenv("CC", str(tmp_path / "no-such-cc"))
    native.built.cache_clear()
    try:
        with pytest.raises(SandboxUnavailable, match="apt install gcc python3-dev"):
            native.built(sys.executable)
    finally:
        native.built.cache_clear()
