"""The audit hook of in-process Python runs: what a program may not do in its own process.

Installed (``install_guard``) in every in-process run's child after the program is compiled and
before it runs, and irremovable (PEP 578). It refuses:

- ``DENIED_EVENTS``: the garbage collector's object graph (``gc.get_objects``...), tracing and
  profiling hooks (a trace function can jump over lines), other threads' frames, subinterpreters;
- opening private /proc entries (``PRIVATE_PROC``: descriptors, memory, maps of any process), and
  loading bytecode files from a writable folder (a crafted ``.pyc`` would run unchecked bytecode);
- reading the tests' code or a frame running it, whoever asks; ``sys._getframe`` and frame and code
  attributes read by the candidate's own code;
- new code objects and ``__code__`` assignments (but ``types.coroutine``'s), ``marshal.loads`` but
  importlib's own loading of a ``.pyc``, a program's own ``sys.unraisablehook``;
- strict mode: importing a module that offers raw memory (``RAW_MEMORY_MODULES``), as an ImportError.

What it cannot stop (code with a raw memory primitive in unverified mode) is listed in
docs/sandbox.md; split runs do not rely on it (the tests run in another process).
Standard library only: harness.py loads this file from its own folder.
"""

from __future__ import annotations

import os
import re
import sys
import types
from _thread import get_ident as threading_ident

# Audit events no program needs and that lead to the nonce or around the tests: the garbage
# collector's object graph, and tracing/profiling hooks (a trace function can jump over lines).
DENIED_EVENTS = frozenset(
    {
        "gc.get_objects",
        "gc.get_referrers",
        "gc.get_referents",
        "sys.settrace",
        "sys.setprofile",
        "sys.monitoring.register_callback",
        "sys._current_frames",
        "cpython.PyInterpreterState_New",  # subinterpreters
    }
)
# Modules through which a program reaches raw memory (and from it the pass nonce): ctypes, cffi,
# numpy's array interfaces, CPython's test modules, subinterpreters, and libraries that build
# arrays or buffers on an address. Strict mode refuses to import them (any component of the
# module's name, or the shared object's file name, matches).
RAW_MEMORY_MODULES = frozenset(
    {
        "ctypes", "_ctypes", "cffi", "_cffi_backend", "numpy", "_multiarray_umath", "pyarrow", "torch",
        "jax", "jaxlib", "tensorflow", "cupy", "numba", "llvmlite", "_testcapi", "_testinternalcapi",
        "_testbuffer", "_testmultiphase", "_testsinglephase", "_xxsubinterpreters", "_xxinterpchannels",
        "_interpreters", "_interpchannels", "_interpqueues",
    }
)  # fmt: skip
# /proc entries of a process (ours or another's) through which descriptors or memory can be reached.
# (and the process folders themselves, which would serve as a dir_fd to reach them)
PRIVATE_PROC = re.compile(
    r"^/proc/(?:[^/]+/)*(?:fd|fdinfo|mem|map_files|maps|smaps|pagemap|environ|root|cwd)(?:/|$)"
    r"|^/proc/(?:\d+|self|thread-self)(?:/task(?:/[^/]+)?)?/?$"
)


# The tests' file name: on no disk, and guarded by the audit hook.
TESTS_FILE = "<tests>"
# Attributes that hand out code or frames (the object.__getattr__ audit event), and those of them
# that give a frame.
_FRAME_ATTRS = frozenset({"tb_frame", "gi_frame", "cr_frame", "ag_frame"})
_CODE_ATTRS = _FRAME_ATTRS | {"f_code", "__code__", "gi_code", "cr_code", "ag_code"}
# Coverage runs trace (their verdict only decides whether the coverage counts).
TRACING_EVENTS = frozenset({"sys.settrace", "sys.setprofile", "sys.monitoring.register_callback"})


def install_guard(
    denied: frozenset[str],
    private_proc: re.Pattern,
    candidate_file: str,
    writable: tuple[str, ...],
    strict: bool = True,
) -> None:
    """Add the audit hook that refuses ``denied`` events, opening private /proc entries, loading
    bytecode files from a writable folder (a crafted ``.pyc`` would run unchecked bytecode), and
    the routes to the tests and to raw memory:

    - reading the tests' code (``f_code``, ``__code__``, ``gi_code``...) or a frame running it
      (``tb_frame``, ``gi_frame``...), whoever asks: ``dis``, ``inspect`` and ``traceback`` called
      by the program are refused too, and a failing run's traceback is printed by C code, which
      reads no attribute through Python;
    - ``sys._getframe`` and reads of frame and code attributes made by the candidate's own code
      (``candidate_file``: main.py, or the name a wrapper program compiles it under);
    - new code objects (``code.__new__``, ``code.replace``) and ``__code__`` assignments, except
      ``types.coroutine``'s flag change (asyncio needs it): crafted bytecode reads and writes
      memory unchecked;
    - ``marshal.loads``, except importlib's own loading of a ``.pyc`` (its own loader classes and
      file reading, unpatched);
    - a program's own ``sys.unraisablehook``: an unraisable error hands it the object involved,
      which may be the harness's own (the default hook, which only prints, runs instead);
    - strict mode: importing a module that offers raw memory (``RAW_MEMORY_MODULES``, matched on
      any component of the module's name and on the shared object's file name), as an ImportError,
      so that code with an optional dependency falls back.

    File names are compared only as exact ``str`` (a subclass could answer any comparison).
    Everything it uses is bound here, in its closure: a program that reaches the harness's
    globals through a frame cannot change what the hook does, and no hook can be removed.
    """
    fspath, realpath, getframe, get_ident = os.fspath, os.path.realpath, sys._getframe, threading_ident
    str_, bytes_, int_, type_, getattr_, error = str, bytes, int, type, getattr, PermissionError
    isinstance_, basename, import_error = isinstance, os.path.basename, ImportError
    # bound here too: this module stays in sys.modules, where a program could rebind its globals
    raw_modules, tests_file, frame_attrs, code_attrs = (
        RAW_MEMORY_MODULES,
        TESTS_FILE,
        _FRAME_ATTRS,
        _CODE_ATTRS,
    )
    coroutine_code = types.coroutine.__code__
    default_unraisable = sys.__unraisablehook__
    own_bytecode = _bytecode_loading_checker()
    busy: set[int] = set()  # threads inside the hook, whose own lookups raise events too

    def code_of(obj, name):
        target = getattr_(obj, name, None)
        return getattr_(target, "f_code", None) if name in frame_attrs else target

    def named(code, name) -> bool:
        filename = getattr_(code, "co_filename", None)
        return type_(filename) is str_ and filename == name

    def frames(event: str, args: tuple, caller) -> None:
        watched = event == "object.__getattr__"
        if named(caller.f_code, candidate_file):
            raise error(f"{args[1] if watched else event} is not allowed in the sandbox")
        if watched and named(code_of(args[0], args[1]), tests_file):
            raise error("the tests' code is out of the program's reach")

    def new_code(event: str, args: tuple, caller) -> None:
        if caller.f_code is not coroutine_code:
            raise error(f"{event} (new bytecode) is not allowed in the sandbox")

    def unmarshal(event: str, args: tuple, caller) -> None:
        if not own_bytecode(caller):
            raise error(f"{event} is not allowed in the sandbox (only importlib loads bytecode)")

    def imported(event: str, args: tuple, caller) -> None:
        name, filename = args[0], args[1]
        parts = name.split(".") if type_(name) is str_ else [name]
        if type_(filename) is str_:
            parts.append(basename(filename).partition(".")[0])
        for part in parts:
            if part in raw_modules:  # ImportError: code that can do without it falls back
                raise import_error(
                    f"importing {name} is not allowed in strict mode: {part} gives raw memory access "
                    "(a problem that needs it runs in the declared unverified mode)",
                    name=name,
                )

    checks = {"sys._getframe": frames, "code.__new__": new_code, "marshal.loads": unmarshal}
    checks["marshal.load"] = unmarshal
    if strict:
        checks["import"] = imported

    def guard(event: str, args: tuple) -> None:
        if event in denied:
            raise error(f"{event} is not allowed in the sandbox")
        if event == "sys.unraisablehook" and args[0] is not None and args[0] is not default_unraisable:
            raise error("a program's own sys.unraisablehook is not called in the sandbox")
        if event == "open" and args and args[0] is not None and not isinstance_(args[0], int_):
            path = fspath(args[0])
            if isinstance_(path, bytes_):
                path = path.decode("utf-8", "surrogateescape")
            if not isinstance_(path, str_):
                return
            # realpath: a symlink in the work folder must not lead there either
            real = realpath(path)
            if private_proc.match(real):
                raise error(f"opening {path!r} is not allowed in the sandbox")
            if real.endswith(".pyc") and real.startswith(writable):
                raise error(f"loading bytecode from {path!r} is not allowed in the sandbox")
            return
        if event == "object.__getattr__":
            check = frames if args[1] in code_attrs else None
        elif event == "object.__setattr__":
            check = new_code if args[1] == "__code__" else None
        else:
            check = checks.get(event)
        if check is None:
            return
        thread = get_ident()
        if thread in busy:
            return
        busy.add(thread)
        try:
            check(event, args, getframe(1))
        finally:
            busy.discard(thread)

    sys.addaudithook(guard)


def _bytecode_loading_checker():
    """A test of whether a ``marshal.loads`` comes from importlib loading a ``.pyc`` with its own,
    unpatched classes and file reading (so the bytes are a compiled file's, not the program's):
    ``caller`` is ``_compile_bytecode``, called by a stock loader's ``get_code``."""
    bootstrap = sys.modules["importlib._bootstrap_external"]
    io_module = bootstrap._io
    compile_bytecode = bootstrap._compile_bytecode.__code__
    get_codes = (bootstrap.SourceLoader.get_code.__code__, bootstrap.SourcelessFileLoader.get_code.__code__)
    loaders = (bootstrap.SourceFileLoader, bootstrap.SourcelessFileLoader)
    get_data, open_code, file_io = bootstrap.FileLoader.get_data, io_module.open_code, io_module.FileIO
    type_, getattr_, dict_get = type, getattr, dict.get

    def own(caller) -> bool:
        outer = caller.f_back
        if caller.f_code is not compile_bytecode or outer is None or outer.f_code not in get_codes:
            return False
        loader = dict_get(outer.f_locals, "self")
        return (
            type_(loader) in loaders
            and "get_data" not in getattr_(loader, "__dict__", {})
            and type_(loader).get_data is get_data
            and bootstrap._io is io_module
            and io_module.open_code is open_code
            and io_module.FileIO is file_io
        )

    return own
