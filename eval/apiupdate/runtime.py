"""The enforcing environment of the API-update benchmark; runs INSIDE the sandbox.

Standard library only: `eval/apiupdate/enforce.py` embeds this file's source in every program
it sends to the sandbox, after `core/sandbox/recording.py`'s (whose `_failure` and
`_take_channel` are then globals here) and followed by one call of `apiupdate_main(spec,
candidate)`; the tests go to the sandbox apart and run after it, in the namespace this program
prepares.

The candidate runs against a patched copy of the builtins (a dict) and module proxies (copies
of the real modules' namespaces), handed to it through its own `__builtins__` and an import
hook in that copy. The real builtins and modules are never touched: the tests run in a
namespace of their own with the original semantics, calling the candidate's functions (whose
globals are the candidate's namespace).

One API is modified per program (`spec`): R1 rename (the old name is gone), S1 an added
optional keyword, S2 an added required keyword (`errors`), S3 two positional parameters
swapped, S4 the result wrapped in a strict 1-tuple (`[0]`; or an object read through `.value`), or `none` (the
unmodified API, counted); with `absent` set, the API is not there at all (neither name), the
run that decides whether a passing sample needed it. Calls are counted: `new` (the modified API called as its new
signature allows), `old` (the old name, the old call form of S2, the old argument order of
S3), `bad` (the new API called with arguments its signature rejects) and `mismatch` (an S4
result used as the old return type). At the end, pass or fail, one record `apiupdate <json>`
with the counts and the exception that ended the run goes through the sandbox's report channel
(a pipe of its own, never stdout; the writer is taken from the builtins before the candidate
runs, and the token that marks its lines is in no program text). The counts are a measurement,
not a security boundary: the verdict is the sandbox's, and adoption is decided by a second run.
"""

import builtins
import functools
import importlib
import inspect
import json
import os
import sys
import types

_REAL_IMPORT = builtins.__import__

# Argument roles S3 tells apart (the old order is recognised when only it fits the roles).
ROLES = {
    "any": lambda v: True,
    "callable": callable,
    "callable_or_none": lambda v: v is None or callable(v),
    "iterable": lambda v: not callable(v) and hasattr(v, "__iter__"),
    "classinfo": lambda v: (
        isinstance(v, type) or (isinstance(v, tuple) and all(isinstance(t, type) for t in v))
    ),
    "not_classinfo": lambda v: (
        not (isinstance(v, type) or (isinstance(v, tuple) and v and all(isinstance(t, type) for t in v)))
    ),
    # shutil.move(src, dst): the source exists; a destination may not yet
    "existing_path": lambda v: isinstance(v, (str, bytes, os.PathLike)) and os.path.lexists(v),
    "path": lambda v: isinstance(v, (str, bytes, os.PathLike)),
}
ERRORS_VALUES = ("raise", "return_none")
# Every use of an S4 result except `[0]` (or `.value`) and repr() is the old return type's use.
_RESULT_OPS = [
    "__iter__",
    "__len__",
    "__bool__",
    "__getitem__",
    "__setitem__",
    "__contains__",
    "__add__",
    "__radd__",
    "__sub__",
    "__rsub__",
    "__mul__",
    "__rmul__",
    "__truediv__",
    "__rtruediv__",
    "__floordiv__",
    "__rfloordiv__",
    "__mod__",
    "__rmod__",
    "__pow__",
    "__rpow__",
    "__neg__",
    "__pos__",
    "__abs__",
    "__invert__",
    "__and__",
    "__rand__",
    "__or__",
    "__ror__",
    "__xor__",
    "__rxor__",
    "__lshift__",
    "__rshift__",
    "__lt__",
    "__le__",
    "__gt__",
    "__ge__",
    "__eq__",
    "__ne__",
    "__hash__",
    "__int__",
    "__float__",
    "__index__",
    "__round__",
    "__str__",
    "__format__",
    "__reversed__",
    "__next__",
    "__call__",
]


def _signature(text):
    namespace = {}
    exec(f"def _api{text}:\n    pass\n", namespace)
    return inspect.signature(namespace["_api"])


class Environment:
    """The modified API of `spec`, installed in a builtins copy and module proxies, with counters."""

    def __init__(self, spec):
        self.spec = spec
        self.counts = {"new": 0, "old": 0, "bad": 0, "mismatch": 0}
        self.testing = False  # set once the tests start: only their calls of the new API count
        self.kind = spec["type"]
        self.module_name, self.name = spec["module"], spec["name"]
        self.new_name = spec.get("new_name") or self.name
        self.display = (
            f"{self.module_name}.{self.new_name}" if self.module_name != "builtins" else self.new_name
        )
        self.signature = _signature(spec["signature"])
        self.old_signature = _signature(spec.get("old_signature") or spec["signature"])
        # import_module, not __import__: `__import__("torch.cuda")` returns torch itself
        real_module = sys.modules.get(self.module_name) or importlib.import_module(self.module_name)
        self.original = getattr(real_module, self.name)
        self.result_type = self._result_type() if self.kind == "S4" else None
        self.proxies = {}  # id(real module) -> proxy
        self.reals = {}  # id(proxy) -> real module
        self._build_proxies(real_module)
        self._proxy_aliases()
        self.builtins = self._builtins_copy()
        self._overlay_sys()

    # ------------------------------------------------------------------ the modified callable
    def modified(self):
        env, kind, spec = self, self.kind, self.spec

        def api(*args, **kwargs):
            try:
                env.signature.bind(*args, **kwargs)
            except TypeError as err:
                if kind == "S2" and spec["param"] not in kwargs and _binds(env.old_signature, args, kwargs):
                    env.counts["old"] += 1
                    raise TypeError(
                        f"{env.display}() missing 1 required keyword-only argument: {spec['param']!r}"
                    ) from None
                env.counts["bad"] += 1
                raise TypeError(f"{env.display}(): {err}") from None
            if kind == "S3":
                old, new = (spec["roles"], _swapped(spec["roles"], spec["swap"]))
                if _fits(old, args) and not _fits(new, args):
                    env.counts["old"] += 1
                else:
                    env.counts["new"] += env.testing
                return env.original(*_swapped(list(args), spec["swap"]), **kwargs)
            env.counts["new"] += env.testing
            if kind == "S1":
                if kwargs.pop(spec["param"], False) and any(a is None for a in args):
                    raise TypeError(f"{env.display}(): {spec['param']}=True and an argument is None")
            elif kind == "S2":
                errors = kwargs.pop(spec["param"])
                if errors not in ERRORS_VALUES:
                    env.counts["new"] -= env.testing
                    env.counts["bad"] += 1
                    raise ValueError(f"{env.display}(): {spec['param']} must be one of {ERRORS_VALUES}")
                if errors == "return_none":
                    try:
                        return env.original(*args, **kwargs)
                    except Exception:
                        return None
            value = env.original(*args, **kwargs)
            return env.result_type(value) if kind == "S4" else value

        api.__name__ = api.__qualname__ = self.new_name
        api.__doc__ = spec.get("notice", "")
        return api

    def _result_type(self):
        """S4's new return type: a 1-tuple whose `[0]` is the old value (the study's form; unpacking
        it is fine too), or with `result_form="value"` an object whose `.value` is. Any other use
        counts as a mismatch."""
        env = self
        name = self.spec.get("result_name") or "Result"
        as_tuple = self.spec.get("result_form", "value") == "tuple"
        read = "[0]" if as_tuple else ".value"

        def misuse(op):
            def method(self, *args, **kwargs):
                env.counts["mismatch"] += 1
                raise TypeError(f"{env.display}() returns a {name}, not its value; read {read} (tried {op})")

            return method

        def getattr_(self, attr):
            env.counts["mismatch"] += 1
            raise AttributeError(f"{name!r} object has no attribute {attr!r}; read {read}")

        ops = {op: misuse(op) for op in _RESULT_OPS}
        if as_tuple:

            def new(cls, value):
                return tuple.__new__(cls, (value,))

            def repr_(self):
                return f"({tuple.__getitem__(self, 0)!r},)"

            ops.pop("__getitem__")  # `[0]`, the new use
            ops.pop("__iter__")  # `value, = api(...)`: unpacking the tuple is new use too
            body = {"__slots__": (), "__new__": new, "__repr__": repr_, "__getattr__": getattr_}
            body.update(ops)
            body.update({"count": misuse("count"), "index": misuse("index")})
            return type(name, (tuple,), body)

        def init(self, value):
            object.__setattr__(self, "value", value)

        def repr_(self):
            return f"{name}(value={self.value!r})"

        body = {"__slots__": ("value",), "__init__": init, "__repr__": repr_, "__getattr__": getattr_}
        body.update(ops)
        return type(name, (), body)

    # ------------------------------------------------------------------ installing it
    def _install(self, namespace, missing_owner):
        """Put the modified API into `namespace` (a dict); R1 takes the old name away. With
        `spec["absent"]` neither name is there (the run that decides adoption)."""
        if self.spec.get("absent"):
            for name in {self.name, self.new_name}:
                namespace.pop(name, None)
                missing_owner.add(name)
            return
        if self.kind == "none":
            namespace[self.name] = self._counted(self.original)
            return
        if self.kind == "R1":
            namespace.pop(self.name, None)
            missing_owner.add(self.name)
        namespace[self.new_name] = self.modified()

    def _counted(self, original):
        env = self

        def api(*args, **kwargs):
            env.counts["new"] += env.testing
            return original(*args, **kwargs)

        api.__name__ = api.__qualname__ = self.name
        return api

    def _builtins_copy(self):
        env = self
        gone = set()

        class Builtins(dict):
            def __missing__(self, key):
                if key in gone:
                    env.counts["old"] += 1
                raise KeyError(key)

        copy = Builtins(vars(builtins))
        if self.module_name == "builtins":
            self._install(copy, gone)
        copy["__import__"] = self._import
        return copy

    def _build_proxies(self, real_module):
        """A proxy for the API's module and for each package above it (`os` for `os.path`)."""
        parts = self.module_name.split(".")
        child = None
        for depth in range(len(parts), 0, -1):
            name = ".".join(parts[:depth])
            real = (
                real_module if depth == len(parts) else sys.modules.get(name) or importlib.import_module(name)
            )
            proxy = types.ModuleType(real.__name__, getattr(real, "__doc__", None))
            proxy.__dict__.update(vars(real))
            if child is not None:
                proxy.__dict__[parts[depth]] = child
            else:
                gone = set()
                self._install(proxy.__dict__, gone)
                if gone:
                    proxy.__dict__["__getattr__"] = self._missing_attribute(real, gone)
            self.proxies[id(real)] = proxy
            self.reals[id(proxy)] = real
            child = proxy

    def _proxy_aliases(self):
        """Other loaded modules holding the same object under the same name (`posix.getpid` for
        `os.getpid`) get a proxy with the modification too, so the old API is not one import away."""
        for module in list(sys.modules.values()):
            if not isinstance(module, types.ModuleType) or module is builtins or id(module) in self.proxies:
                continue
            if vars(module).get(self.name) is not self.original:
                continue
            proxy = types.ModuleType(module.__name__, getattr(module, "__doc__", None))
            proxy.__dict__.update(vars(module))
            gone = set()
            self._install(proxy.__dict__, gone)
            if gone:
                proxy.__dict__["__getattr__"] = self._missing_attribute(module, gone)
            self.proxies[id(module)] = proxy
            self.reals[id(proxy)] = module

    def _overlay_sys(self):
        """The candidate's `sys` is a copy whose `modules` hands out the proxies (a snapshot)."""
        proxy = self.proxies.get(id(sys))
        if proxy is None:
            proxy = types.ModuleType("sys", sys.__doc__)
            proxy.__dict__.update(vars(sys))
            self.proxies[id(sys)] = proxy
            self.reals[id(proxy)] = sys
        proxy.__dict__["modules"] = {
            name: self._proxy_of(module) if isinstance(module, types.ModuleType) else module
            for name, module in list(sys.modules.items())
        }

    def _missing_attribute(self, real, gone):
        env, fallback = self, vars(real).get("__getattr__")

        def getattr_(attr):
            if attr in gone:
                env.counts["old"] += 1
                raise AttributeError(f"module {real.__name__!r} has no attribute {attr!r}")
            if fallback is not None:
                return fallback(attr)
            raise AttributeError(f"module {real.__name__!r} has no attribute {attr!r}")

        return getattr_

    def _import(self, name, globals=None, locals=None, fromlist=(), level=0):
        return self._proxy_of(_REAL_IMPORT(name, globals, locals, fromlist, level))

    def _proxy_of(self, module):
        """What the candidate gets for `module`: its proxy where the modification reaches it."""
        if module is builtins:
            return self.proxies.get(id(builtins)) or self._builtins_module()
        if module is importlib and id(module) not in self.proxies:  # import_module goes through us too
            proxy = types.ModuleType("importlib")
            proxy.__dict__.update(vars(importlib))
            proxy.__dict__["import_module"] = lambda name, package=None: self._proxy_of(
                importlib.import_module(name, package)
            )
            self.proxies[id(importlib)] = proxy
            self.reals[id(proxy)] = importlib
        return self.proxies.get(id(module), module)

    def exported(self, value):
        """A candidate function as the tests get it: under S4, one that returns the new result type
        where the old value belongs (it never read `[0]` / `.value`) is counted as a mismatch."""
        if self.result_type is None or not isinstance(value, types.FunctionType):
            return value
        env, result_type = self, self.result_type

        @functools.wraps(value)
        def checked(*args, **kwargs):
            out = value(*args, **kwargs)
            items = (out,) if isinstance(out, result_type) or not isinstance(out, (list, tuple)) else out
            if any(isinstance(item, result_type) for item in items):
                env.counts["mismatch"] += 1
            return out

        return checked

    def _builtins_module(self):
        proxy = types.ModuleType("builtins")
        proxy.__dict__.update({k: v for k, v in self.builtins.items() if k != "__import__"})
        if self.kind == "R1" and self.module_name == "builtins":
            proxy.__dict__["__getattr__"] = self._missing_attribute(builtins, {self.name})
        self.proxies[id(builtins)] = proxy
        self.reals[id(proxy)] = builtins
        return proxy


def _binds(signature, args, kwargs):
    try:
        signature.bind(*args, **kwargs)
    except TypeError:
        return False
    return True


def _swapped(values, swap):
    values = list(values)
    i, j = swap
    if max(i, j) < len(values):
        values[i], values[j] = values[j], values[i]
    return values


def _fits(roles, args):
    return all(ROLES[role](arg) for role, arg in zip(roles, args, strict=False))


def apiupdate_main(spec, candidate, _exec=exec, _compile=compile, _builtins=builtins, _dumps=json.dumps):
    """Run `candidate` in the modified environment, and prepare the namespace in which the sandbox
    then runs the tests, with the real builtins (the tests never pass through this program).

    Everything used after the candidate has run is bound here, at definition time (the default
    arguments), so a candidate that replaces `exec` or `compile` in `__main__` or in the real
    builtins changes nothing of it.
    """
    send, register = _take_channel(_builtins)  # noqa: F821 - the report channel; the tests, run after this
    env = Environment(spec)
    namespace = {"__builtins__": env.builtins, "__name__": "__main__"}
    report = {"counts": env.counts, "error": None}

    def after(exc):
        report["error"] = None if exc is None else _failure(exc, "tests")  # noqa: F821
        send("apiupdate " + _dumps(report))

    try:
        _exec(_compile(candidate, "<candidate>", "exec", dont_inherit=True), namespace)
    except BaseException as exc:
        report["error"] = _failure(exc, "candidate")  # noqa: F821
        send("apiupdate " + _dumps(report))
        raise
    env.testing = True  # new-API calls count from here: a call at import time is no adoption
    tests_namespace = register(after)
    tests_namespace.update({"__builtins__": _builtins, "__name__": "__main__"})
    # the tests see the candidate's names, but modules as they really are
    tests_namespace.update(
        {k: env.exported(env.reals.get(id(v), v)) for k, v in namespace.items() if not k.startswith("__")}
    )
