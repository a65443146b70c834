"""The novel-API spy; runs INSIDE the sandbox, under the library version's interpreter.

Standard library only: `core/benchmarks/novelapi.py` embeds this file's source in every task
program, after `core/sandbox/recording.py`'s (whose `_short`, `_failure` and `_take_channel`
are then globals here) and followed by one call of `novelapi_main(paths, candidate)`; the tests
go to the sandbox apart and run after it, in the same namespace as the candidate.

Before the candidate runs, every public path of the target API (`pkg.mod.func`, its
re-export `pkg.func`, `pkg.mod.Class.method`, a class's constructor) is replaced by one
wrapper that records each call's arguments, so `from pkg import func` gets the wrapper too.
Only calls made directly from the candidate's code while the tests run count (a library function
that calls the API internally does not make the candidate's use of it, nor does a call at import
time). A call the API's signature rejects is recorded as `rejected`; after the tests, a run
without a call that was accepted and returned fails. The spy lives in the program's process:
code that edits its state through the wrappers' closures can forge a call, so the evaluation
does not take its word for a pass: a passing sample runs again with the same wrappers raising on
every call (`novelapi_main(..., absent=True)`), and passes only if it fails there (a class the task
uses as a type, never calling it, is replaced by a bare class of its name in that run). A program that
tells the two runs apart (by reading the wrappers' state) and fails on purpose in the second can
still forge a call: the bar is no longer "edit a counter" but "detect the check". Pass or fail, one
record `spy <json>` with the calls (argument reprs) and the exception that ended the run goes
through the sandbox's report channel (a pipe of its own, never stdout; its writer is taken from
the builtins before the candidate runs, and the token that marks its lines is in no program text).
"""

import builtins
import contextlib
import importlib
import inspect
import json
import sys

MAX_CALLS = 50


def _owner(path):
    """(object holding the last attribute, attribute name) for a dotted public path."""
    parts = path.split(".")
    for cut in range(len(parts) - 1, 0, -1):
        try:
            owner = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for attr in parts[cut:-1]:
            owner = getattr(owner, attr)
        return owner, parts[-1]
    raise ImportError(f"cannot import any module of {path}")


def install(paths, calls, state):
    """Wrap every path's object (once per object); returns the number of paths wrapped."""
    wrappers = {}
    wrapped = 0
    for path in paths:
        try:
            owner, name = _owner(path)
            raw = inspect.getattr_static(owner, name)
        except (ImportError, AttributeError):
            continue
        key = id(raw)
        if key not in wrappers:
            wrappers[key] = _wrap(raw, calls, state, drop_first=inspect.isclass(owner))
        if wrappers[key] is not None:
            setattr(owner, name, wrappers[key])
            wrapped += 1
    return wrapped


def stand_in(paths):
    """Replace every path's object by a bare class of the same name, with no behaviour: a type API
    taken away (its users' annotations, subscripts and isinstance checks no longer find it)."""
    made = {}
    replaced = 0
    for path in paths:
        try:
            owner, name = _owner(path)
            raw = getattr(owner, name)  # a lazy module attribute (pydantic's __getattr__) too
        except (ImportError, AttributeError):
            continue
        if id(raw) not in made:
            made[id(raw)] = type(
                getattr(raw, "__name__", name), (), {"__module__": getattr(raw, "__module__", None)}
            )
        setattr(owner, name, made[id(raw)])
        replaced += 1
    return replaced


def _wrap(raw, calls, state, drop_first):
    if isinstance(raw, (staticmethod, classmethod)):
        inner = _wrap(raw.__func__, calls, state, drop_first=isinstance(raw, classmethod))
        return type(raw)(inner)
    if inspect.isclass(raw):  # the constructor: record its arguments, keep the class itself
        if raw.__init__ is object.__init__ and raw.__new__ is not object.__new__:
            # only __new__ takes the arguments (a str subclass): object.__init__ would refuse them
            # once __init__ were replaced
            raw.__new__ = staticmethod(_recorder(raw.__new__, calls, state, drop_first=True))
        else:
            raw.__init__ = _recorder(raw.__init__, calls, state, drop_first=True)
        return None
    if not callable(raw):
        return None
    return _recorder(raw, calls, state, drop_first)


def _recorder(function, calls, state, drop_first):
    try:
        signature = inspect.signature(function)
    except (TypeError, ValueError):
        signature = None

    def spy(*args, **kwargs):
        if state["absent"]:
            raise RuntimeError("the API is not available in this run")
        try:
            caller = sys._getframe(1).f_code.co_filename
        except PermissionError:  # the sandbox guards only the tests' code: a call from the tests
            caller = "<tests>"
        if caller != "<candidate>" or not state["testing"] or len(calls) >= MAX_CALLS:
            return function(*args, **kwargs)
        shown = args[1:] if drop_first else args
        record = {"args": [_short(a) for a in shown], "kwargs": {k: _short(v) for k, v in kwargs.items()}}  # noqa: F821
        calls.append(record)
        try:
            if signature is not None:
                signature.bind(*args, **kwargs)
        except TypeError:
            record["rejected"] = True  # the API was chosen but called wrongly: it never ran
            return function(*args, **kwargs)
        try:
            result = function(*args, **kwargs)
        except BaseException:
            record["raised"] = True
            raise
        state["returned"] += 1
        return result

    for attr in ("__name__", "__qualname__", "__doc__", "__module__"):
        with contextlib.suppress(AttributeError, TypeError):
            setattr(spy, attr, getattr(function, attr))
    return spy  # no __wrapped__: it would hand the real function out


def novelapi_main(
    paths,
    candidate,
    absent=False,
    use="call",
    _exec=exec,
    _compile=compile,
    _dumps=json.dumps,
    _builtins=builtins,
):
    """Run `candidate` with the spy installed, in the namespace in which the sandbox then runs the
    tests (which never pass through this program); report the calls when the tests end.

    Only calls made while the tests run count (a call at import time proves nothing about the
    code under test), only calls the API's signature accepts, and the run passes only if one of
    them returned. Everything used after the candidate ran is bound at definition time, so a
    candidate that replaces `exec` or `compile` changes nothing of it. With `absent`, the same
    wrappers raise on every call and the tests alone decide: the evaluation's second run, in which
    a sample that really calls the API fails.

    `use="type"`: a class the task uses as a type (an annotation, `Secret[bool]`), which its code
    never calls: the tests alone decide the first run, and with `absent` the class itself is
    replaced by a bare one of the same name (`stand_in`), so a sample that needs it fails there.
    """
    send, register = _take_channel(_builtins)  # noqa: F821 - the report channel; the tests, run after this
    calls = []
    # calls count once the tests run; a pass needs one that returned; `absent`: every call raises
    typed = use == "type"
    state = {"testing": False, "returned": 0, "absent": bool(absent) and not typed}
    wrapped = stand_in(paths) if absent and typed else install(paths, calls, state)
    report = {"calls": calls, "wrapped": wrapped, "error": None}

    def after(exc):
        error = exc
        if exc is None and not absent and not typed and not state["returned"]:
            error = AssertionError("the target API was never called")
        report["error"] = None if error is None else _failure(error, "tests" if exc is not None else "spy")  # noqa: F821
        send("spy " + _dumps(report))
        if error is not exc:
            raise error

    namespace = register()
    namespace["__name__"] = "__main__"
    # a script has a `__file__` (test helpers build paths from it); the sandbox's work folder
    namespace.setdefault("__file__", "candidate.py")
    try:
        _exec(_compile(candidate, "<candidate>", "exec", dont_inherit=True), namespace)
    except BaseException as exc:
        report["error"] = _failure(exc, "candidate")  # noqa: F821
        send("spy " + _dumps(report))
        raise
    state["testing"] = True
    register(after)
