"""A Python run in process: the program as ``__main__``, then its tests, in one forked interpreter.

What it guarantees: a run passes only when its process writes a random nonce that the server put in
a private pipe after the fork, and that write comes from a C-level call chain right after the tests'
``exec`` returns, with no Python frame between; no frame, local or global ever holds the nonce or
the tests' code (see ``run_python``). The audit hook (code_guard.py), installed before the program
and irremovable, closes the routes that remain in pure Python: the garbage collector's object lists,
tracing and profiling hooks, and opening another process's descriptors or memory under /proc.
What this cannot stop (code with a raw memory primitive such as ctypes) is why split runs exist
(split_runs.py) and is listed in docs/sandbox.md. Standard library only (coverage.py for measured
runs).
"""

from __future__ import annotations

import builtins
import collections
import contextlib
import functools
import operator
import os
import sys
import types
from typing import Any, NoReturn

try:  # in the sandbox the harness loads these files from its own folder
    from code_guard import DENIED_EVENTS, PRIVATE_PROC, TESTS_FILE, TRACING_EVENTS, install_guard
    from coverage_run import send_coverage
    from report_channel import REPORT_CAP
except ImportError:
    from core.sandbox.code_guard import DENIED_EVENTS, PRIVATE_PROC, TESTS_FILE, TRACING_EVENTS, install_guard
    from core.sandbox.coverage_run import send_coverage
    from core.sandbox.report_channel import REPORT_CAP


def run_python(
    job: dict,
    main_path: str,
    collector,
    key_fd: int,
    report_fd: int,
    data_fd: int,
    writable: tuple[str, ...],
    guard_forks,
) -> NoReturn:
    """Run the job's program as ``__main__``, then its tests in the same namespace; report the nonce
    only if both ran to the end.

    The texts are compiled as str, so a source-encoding declaration is a comment. The tests are
    compiled apart, under the file name ``<tests>`` that is on no disk, and their text is popped
    from the job inside the very expression that compiles it: no frame's locals hold it or its
    code, which the audit hook guards (code_guard.py), so a wrong program cannot read the
    expected values. The nonce is read and its pipe closed before the program starts; from then
    on it, like the tests' code, lives only in the arguments of ``functools.partial`` objects
    that C code calls one after the other. ``guard_forks`` (the native module's, armed once) zeroes
    it and closes the report pipe in every fork of the program, from inside fork() itself.

    A wrapper program (``candidate_file`` set: it compiles the candidate itself) does not get the
    tests either: it takes ``__editforge_tests__`` out of the builtins and calls it with a function
    to run once the tests end (with the exception that ended them, or None); it gets back the
    namespace the tests will run in, which it fills with what they may see.
    """
    exit_ = os._exit  # bound now: the program may replace os._exit
    module = main_module(main_path)
    if collector is not None:
        _run_measured(job, main_path, module, collector, key_fd, report_fd, data_fd, writable, guard_forks)
    try:
        program = compile(job.pop("program"), main_path, "exec", dont_inherit=True, optimize=0)
    except BaseException as exc:
        exit_(fail(exc, report_fd))
    strict = not job.get("unverified")
    install_guard(DENIED_EVENTS, PRIVATE_PROC, job.get("candidate_file") or main_path, writable, strict)
    finish: list[Any]
    namespace, finish = module.__dict__, []
    if job.get("candidate_file"):
        namespace = {}
        builtins.__editforge_tests__ = functools.partial(  # type: ignore[attr-defined]
            _register_wrapper, namespace, finish
        )
    try:
        collections.deque(
            map(
                operator.call,  # type: ignore[arg-type]  # partials of different types, each called bare
                (
                    functools.partial(exec, program, module.__dict__),
                    functools.partial(
                        exec,
                        compile(job.pop("tests"), TESTS_FILE, "exec", dont_inherit=True, optimize=0),
                        namespace,
                    ),
                    functools.partial(_finish, finish, None),
                    functools.partial(os.write, report_fd, _take_nonce(key_fd, report_fd, guard_forks)),
                ),
            ),
            0,
        )
    except BaseException as exc:  # everything the program raises, SystemExit included, is a failure
        with contextlib.suppress(BaseException):
            _finish(finish, exc)
        exit_(fail(exc, report_fd))
    flush_stdio()
    exit_(0)  # skips atexit hooks and waiting for non-daemon threads: the verdict is already final


def _run_measured(
    job: dict,
    main_path: str,
    module: types.ModuleType,
    collector,
    key_fd: int,
    report_fd: int,
    data_fd: int,
    writable: tuple[str, ...],
    guard_forks,
) -> NoReturn:
    """A coverage run: program and tests as one file (main.py), as CanItEdit measures them. Its
    sample was judged by a verdict run before; this run's pass only decides whether coverage counts."""
    exit_ = os._exit
    source = job.pop("program") + "\n" + job.pop("tests")
    try:
        code = compile(source, main_path, "exec", dont_inherit=True, optimize=0)
    except BaseException as exc:
        exit_(fail(exc, report_fd))
    collector.start()
    candidate_file, strict = job.get("candidate_file") or main_path, not job.get("unverified")
    install_guard(DENIED_EVENTS - TRACING_EVENTS, PRIVATE_PROC, candidate_file, writable, strict)
    try:
        collections.deque(
            map(
                operator.call,  # type: ignore[arg-type]  # partials of different types, each called bare
                (
                    functools.partial(exec, code, module.__dict__),
                    functools.partial(os.write, report_fd, _take_nonce(key_fd, report_fd, guard_forks)),
                ),
            ),
            0,
        )
    except BaseException as exc:
        exit_(fail(exc, report_fd))
    send_coverage(collector, source, main_path, data_fd)
    flush_stdio()
    exit_(0)


def main_module(main_path: str) -> types.ModuleType:
    module = types.ModuleType("__main__")
    module.__dict__.update(__file__=main_path, __builtins__=builtins, __cached__=None)
    sys.modules["__main__"] = module
    sys.argv = [main_path]
    sys.path.insert(0, os.path.dirname(main_path))
    return module


def _register_wrapper(namespace: dict, finish: list, after=None) -> dict:
    """``__editforge_tests__`` of a wrapper program: keep ``after`` for when the tests end and hand
    out the namespace they will run in."""
    if after is not None:
        finish.append(after)
    return namespace


def _finish(finish: list, exc: BaseException | None) -> None:
    """Call the wrapper's end-of-tests function once (it may raise: the run then fails)."""
    while finish:
        finish.pop()(exc)


def _take_nonce(key_fd: int, report_fd: int, guard_forks) -> bytearray:
    """The nonce, in a buffer that every fork of the program zeroes, and the report pipe, which
    every fork closes: a forked copy of the run that passes cannot hand the nonce to the run itself
    (which would then pass whatever it did). The guard is C's (pthread_atfork, run inside fork()),
    not Python's at-fork hooks: those a program can make fail (a MemoryError while the interpreter
    copies its hook list) and then read through ``sys.unraisablehook``."""
    nonce = bytearray(os.read(key_fd, 64))
    os.close(key_fd)
    guard_forks(nonce, report_fd)
    return nonce


def fail(exc: BaseException, report_fd: int) -> int:
    """Report ``exc`` (before the traceback, which may fail after a MemoryError); the exit code."""

    def report(failure: bytes) -> None:
        with contextlib.suppress(OSError):
            os.write(report_fd, b"!" + failure[: REPORT_CAP - 1])

    if isinstance(exc, SystemExit):
        report(f"SystemExit:{exc.code!r}".encode(errors="replace"))
        code = exc.code
        if code is None:
            code = 0
        elif not isinstance(code, int):
            print(code, file=sys.stderr)
            code = 1
    else:
        try:
            message = str(exc)
        except Exception:
            message = "<unprintable>"
        report(f"{type(exc).__name__}:{message}".encode(errors="replace"))
        code = 1
        # tb_next skips the harness's own frame; the interpreter's C printer reads no frame
        # attribute through Python, so the guarded tests' frames print too
        with contextlib.suppress(BaseException):
            # the printer reads the exception's own (no traceback: the AttributeError is suppressed too)
            shown = exc.with_traceback(exc.__traceback__.tb_next)  # type: ignore[union-attr]
            sys.__excepthook__(type(shown), shown, shown.__traceback__)
    flush_stdio()
    return code & 0xFF


def flush_stdio() -> None:
    for stream in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
        with contextlib.suppress(Exception):  # a stream may be None: suppressed too
            stream.flush()  # type: ignore[union-attr]
