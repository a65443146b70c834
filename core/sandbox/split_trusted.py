"""The trusted side of a split run: the tests run here, and every check's truth value is computed
here, in a process that never runs candidate code.

The candidate's program runs in another process (``split_candidate.py``). Its functions, classes
and objects appear to the tests as ``Proxy`` objects: calling one, reading an attribute or
applying an operator is a request over a pipe, answered with plain data (``plain.py``) or another
handle. So ``assert f(2) == 4`` compares a plain ``int`` with 4 here; an object "equal to
everything" cannot cross as data, and comparing a handle with plain data is never delegated
(``NotImplemented`` here, so Python falls back to identity: False).

What the candidate's code must still decide is **delegated and counted**: comparing two handles
(``__eq__``, ordering), ``bool``, ``len``, ``in``, ``hash`` of a handle and ``isinstance`` against a
candidate class. The report carries the count (``delegated_checks``).

Each ``assert`` statement of the tests is a unit: it counts as passed when it was evaluated and
held every time (``tests_passed / tests_total``, over the assert statements in the text). Checking
stops at the first exception that leaves the tests, as in a run in one process, so a run passes
exactly when the tests run to their end. An assertion that fails inside a callback the candidate
called (a key function) fails the run even if the candidate caught it; so do a broken protocol and
an exit of the candidate (SystemExit, KeyboardInterrupt, GeneratorExit never cross).

Standard library only; loaded by the harness inside the sandbox.
"""

from __future__ import annotations

import ast
import builtins
import collections
import contextlib
import importlib
import importlib.util
import random
import sys
import traceback
import types
import warnings
from typing import Any, NoReturn

try:  # in the sandbox the harness loads this file from its own folder
    from line_probes import TestLines, is_line_list
    from plain import (
        ABORTS,
        MUTABLE,
        OPERATORS,
        SAFE_BUILTINS,
        Channel,
        ChannelError,
        Decoder,
        Encoder,
        NotPlain,
    )
except ImportError:
    from core.sandbox.line_probes import TestLines, is_line_list
    from core.sandbox.plain import (
        ABORTS,
        MUTABLE,
        OPERATORS,
        SAFE_BUILTINS,
        Channel,
        ChannelError,
        Decoder,
        Encoder,
        NotPlain,
    )

MAX_DEPTH = 48
TESTS_FILE = "<tests>"
CHECK = "__editforge_check__"
BEGIN = "__editforge_check_begins__"  # an assert's test is about to be evaluated
FAILURE = "__editforge_assertion_error__"  # AssertionError, under a name no program can shadow
BUILTIN_NAMES = frozenset(vars(builtins))
# Dunder attributes a test may read from the program's objects: descriptive data only.
DATA_DUNDERS = frozenset({"__name__", "__qualname__", "__doc__", "__module__", "__dict__", "__annotations__"})
# Standard library packages whose import acts (prints, opens a window or a browser, runs a test
# suite); besides these, no module path with a dunder part (``unittest.__main__`` runs unittest.main()).
NOISY_MODULES = frozenset(
    {"antigravity", "this", "turtle", "turtledemo", "tkinter", "idlelib", "webbrowser", "test", "ensurepip"}
)
# The harness's own modules: never a program's exception's class, never imported for a program.
SANDBOX_MODULES = frozenset(
    {
        "plain",
        "split_trusted",
        "split_candidate",
        "zygote",
        "harness",
        "confine",
        "seccomp",
        "trusted_server",
        "code_guard",
        "host_protocol",
        "run_process",
        "python_runner",
        "coverage_run",
        "report_channel",
        "scratch_folders",
        "split_runs",
        "supervision",
    }
)


class Broken(BaseException):
    """The run cannot pass: the protocol broke or the candidate exited. A BaseException, and
    remembered by the run, so that no ``except`` in the tests can turn it into a pass."""


class Remote:
    """The trusted end of the channel: requests out, callbacks in, handles both ways."""

    def __init__(self, channel: Channel, trusted_modules: frozenset[str] = frozenset()) -> None:
        self.channel = channel
        self.trusted_modules = frozenset(m for m in trusted_modules if "=" not in m)
        # names the benchmark's own text binds by an import: ours, never the program's
        self.bindings = dict(m.split("=", 1) for m in trusted_modules if "=" in m)
        self.proxies: dict[int, Proxy] = {}
        self.standins: dict[int, type] = {}
        self.standin_ids: dict[type, int] = {}
        self.modules: dict[int, object] = {}
        self.trusted: dict[int, Any] = {}  # the tests' objects the candidate may call back
        self.trusted_ids: dict[int, int] = {}
        self.encoder = Encoder(self._handle)
        self.decoder = Decoder(self._resolve)
        self.seq = 0
        self.depth = 0
        self.delegated = 0
        self.broken: str | None = None
        self.callback_failures = 0
        self.retire: str | None = None  # why this process must not serve another run after this one
        self.numpy_mirrored = False
        self.originals: dict = {}  # (module, attribute) -> the function the run's mirror wraps

    # -- handles -------------------------------------------------------------------------------
    def _handle(self, obj: object) -> list:
        if type(obj) is Proxy:
            return ["h", object.__getattribute__(obj, "_ef_id")]
        if isinstance(obj, type) and obj in self.standin_ids:
            return ["h", self.standin_ids[obj]]
        name = getattr(obj, "__name__", None)
        if type(name) is str and name in SAFE_BUILTINS and getattr(builtins, name) is obj:
            return ["B", name]
        key = id(obj)
        if key not in self.trusted_ids:  # the candidate may only call it (TrustedRef)
            self.trusted_ids[key] = len(self.trusted) + 1
            self.trusted[self.trusted_ids[key]] = obj
        return ["H", self.trusted_ids[key]]

    def _resolve(self, tree: list) -> object:
        tag, rest = tree[0], tree[1:]
        if tag == "h" and len(rest) == 2 and type(rest[0]) is int and rest[1] in ("c", "f", "o"):
            return self.proxy(rest[0])
        if tag == "H" and len(rest) == 1 and rest[0] in self.trusted:
            return self.trusted[rest[0]]
        if tag == "B" and len(rest) == 1 and rest[0] in SAFE_BUILTINS:
            return getattr(builtins, rest[0])
        if tag == "m" and len(rest) == 2 and type(rest[0]) is int and type(rest[1]) is str:
            return self._module(rest[0], rest[1])
        if tag == "xc" and len(rest) == 4 and type(rest[0]) is int:
            return self._standin(*rest)
        raise NotPlain(f"unknown value {str(tree)[:60]!r}")

    def proxy(self, ident: int) -> Proxy:
        if ident not in self.proxies:
            proxy = object.__new__(Proxy)
            object.__setattr__(proxy, "_ef_remote", self)
            object.__setattr__(proxy, "_ef_id", ident)
            self.proxies[ident] = proxy
        return self.proxies[ident]

    def _module(self, ident: int, name: str) -> object:
        """A module of the program's namespace: this process's own import of it when it is one
        that exists here (the candidate's folder is not on this process's path), else a handle."""
        if ident not in self.modules:
            module = None
            if self.importable(name):
                with contextlib.suppress(BaseException):  # SystemExit too: an import never ends the tests
                    if importlib.util.find_spec(name) is not None:
                        if name not in sys.modules:  # an import the program chose may act on this
                            # process (logging's root handlers...): nothing of it outlives the run
                            self.retire = f"the program had the tests' process import {name[:100]}"
                        module = importlib.import_module(name)
            self.modules[ident] = module if module is not None else self.proxy(ident)
        return self.modules[ident]

    def bound(self, path: str) -> object:
        """``module`` or ``module.attribute`` imported here (None where it cannot be)."""
        module_name, _, attribute = path.rpartition(".") if path not in sys.modules else (path, "", "")
        for candidate, rest in ((path, ""), (module_name, attribute)):
            if candidate and self.importable(candidate):
                try:
                    value = importlib.import_module(candidate)
                    return getattr(value, rest) if rest else value
                except BaseException:  # SystemExit too: an import never ends the tests
                    continue
        return None

    def importable(self, name: str) -> bool:
        """Whether this process imports ``name`` itself when the program names it: a standard
        library module (but those that act on import) or one the benchmark's own text imports,
        never one of the sandbox's, never any other module the program picks."""
        root = name.partition(".")[0]
        if (
            root in SANDBOX_MODULES
            or root in NOISY_MODULES
            or not all(p.isidentifier() and not (p[:2] == p[-2:] == "__") for p in name.split("."))
        ):
            return False
        return root in sys.stdlib_module_names or root in self.trusted_modules

    def _standin(self, ident: int, module: object, qualname: object, bases: object) -> type:
        """A local class for an exception class of the program's: its library's own class where
        this process already imported it (``json.JSONDecodeError``), else a stand-in that
        subclasses the decoded bases, so ``except ValueError`` and ``except ParseError`` both work."""
        if ident in self.standins:
            return self.standins[ident]
        known = sys.modules.get(module) if type(module) is str and self.importable(module) else None
        cls = _attribute(known, qualname) if known is not None else None
        if not (isinstance(cls, type) and issubclass(cls, BaseException)):
            decoded = tuple(self.decoder._dec(b, 1) for b in (bases if type(bases) is list else []))
            parents = tuple(b for b in decoded if isinstance(b, type) and issubclass(b, BaseException))
            name = str(qualname).rpartition(".")[2][:200] or "CandidateError"  # the program's to choose
            try:
                cls = type(name, parents or (Exception,), {"__module__": "__main__"})
            except TypeError:  # an instance lay-out conflict between builtin bases
                cls = type(name, parents[:1] or (Exception,), {"__module__": "__main__"})
            if issubclass(cls, (SystemExit, KeyboardInterrupt, GeneratorExit)):
                cls = type(name, (Exception,), {"__module__": "__main__"})
        self.standins[ident] = cls
        self.standin_ids.setdefault(cls, ident)
        return cls

    # -- requests ------------------------------------------------------------------------------
    def request(self, op: str, target: object = None, _writeback: tuple = (), **fields) -> object:
        """Send one request and wait for its answer, serving the callbacks the program makes
        meanwhile; the answer's value, or the exception it carries raised here. ``_writeback``: the
        call's arguments, updated in place where the program changed them (``list.sort()``)."""
        if self.broken:
            raise Broken(self.broken)
        if not self.numpy_mirrored and "numpy" in sys.modules:
            self.numpy_mirrored = True
            _mirror_numpy(self)
        self.seq += 1
        seq = self.seq
        try:
            message = {"op": op, "seq": seq}
            for key, value in fields.items():
                if not (key == "kw" and not value):  # no keyword arguments: nothing to send
                    message[key] = self.encoder.encode(value)
            if type(target) is Proxy:
                message["h"] = ["h", object.__getattribute__(target, "_ef_id")]
            elif target is not None:
                message["h"] = self.encoder.encode(target)
        except (NotPlain, RecursionError) as exc:
            raise TypeError(f"cannot pass this value to the program: {exc}") from None
        self._send(message)
        while True:
            reply = self._receive()
            if "op" in reply:
                self._serve(reply)
                continue
            if reply.get("re") != seq:
                self._break(f"an answer to no request (expected {seq}, got {str(reply.get('re'))[:20]})")
            break
        for key, stream in (("out", sys.stdout), ("err", sys.stderr)):  # what the program printed
            text = reply.get(key)
            if type(text) is str:
                stream.write(text)
        self._warnings(reply.get("warn"))
        if "e" in reply:
            error = self._exception(reply["e"])
            if isinstance(error, (StopIteration, StopAsyncIteration)) and op != "next":
                # PEP 479's rule: a StopIteration leaking out of a call would end the tests' map()
                raise RuntimeError(f"the program raised {type(error).__name__} outside an iterator")
            raise error
        if "v" not in reply:
            self._break("an answer without a value")
        try:
            value = self.decoder.decode(reply["v"])
            if _writeback and "back" in reply:
                self._write_back(_writeback, reply["back"])
        except (NotPlain, RecursionError) as exc:
            self._break(f"a malformed value: {exc}")
        return value

    def _write_back(self, args: tuple, back: object) -> None:
        if type(back) is not list:
            raise NotPlain("a malformed write-back")
        if back:  # the tests may have passed an object that outlives the run (a module's list)
            self.retire = "a call changed an object of the tests in place"
        for item in back[: len(args)]:
            if (
                type(item) is not list
                or len(item) != 2
                or type(item[0]) is not int
                or not 0 <= item[0] < len(args)
            ):
                raise NotPlain("a malformed write-back")
            original, new = args[item[0]], self.decoder.decode(item[1])
            if type(new) is not type(original) or type(original) not in MUTABLE:
                raise NotPlain("a write-back of another type")
            if isinstance(original, (list, bytearray)):
                original[:] = new
            elif isinstance(original, collections.deque):
                original.clear()
                original.extend(new)
            else:  # dict, set and their kin
                original.clear()
                original.update(new)

    def truth(self, op: str, target: Proxy, kind: type = bool, **fields) -> Any:
        """A value only candidate code can produce (its ``__eq__``, ``__len__``...): counted; one of
        type ``kind`` exactly."""
        self.delegated += 1
        value = self.request(op, target, **fields)
        if type(value) is not kind:
            self._break(f"{op} answered {type(value).__name__}, not {kind.__name__}")
        return value

    def _send(self, message: dict) -> None:
        try:
            self.channel.send(message)
        except (ChannelError, NotPlain) as exc:
            self._break(str(exc))

    def _receive(self) -> dict:
        try:
            return self.channel.receive()
        except ChannelError as exc:
            self._break(str(exc))

    def _break(self, reason: str) -> NoReturn:
        self.broken = self.broken or f"protocol: {reason}"
        raise Broken(self.broken)

    def _serve(self, message: dict) -> None:
        """A callback: the candidate calls a trusted object the tests passed it (and nothing else)."""
        if message.get("op") != "tcall" or message.get("h") not in self.trusted:
            self._break(f"a request the trusted side does not serve ({str(message.get('op'))[:20]})")
        if self.depth >= MAX_DEPTH:
            self._break(f"more than {MAX_DEPTH} nested callbacks")
        reply: dict = {"re": message.get("seq")}
        self.depth += 1
        try:
            args = self.decoder.decode(message.get("args", ["l"]))
            kwargs = self.decoder.decode(message.get("kw", ["d"]))
            if type(args) is not list or type(kwargs) is not dict or not all(type(k) is str for k in kwargs):
                self._break("malformed callback arguments")
            reply["v"] = self.encoder.encode(self.trusted[message["h"]](*args, **kwargs))
        except Broken:
            raise
        except (NotPlain, RecursionError) as exc:
            self._break(f"a malformed callback: {exc}")
        except BaseException as exc:
            if isinstance(exc, AssertionError):
                self.callback_failures += 1
            reply["e"] = {"cls": self._exception_class(type(exc)), "args": self._safe_args(exc)}
        finally:
            self.depth -= 1
        self._send(reply)

    def _exception_class(self, cls: type) -> list:
        for klass in cls.__mro__:
            if klass in self.standin_ids:
                return ["h", self.standin_ids[klass]]
            if getattr(builtins, klass.__name__, None) is klass and not issubclass(klass, ABORTS):
                return ["B", klass.__name__]
        return ["B", "Exception"]

    def _safe_args(self, exc: BaseException) -> object:
        try:
            return self.encoder.encode(list(exc.args))
        except (NotPlain, RecursionError):
            return ["l", str(exc)[:2000]]

    def _exception(self, error: object, depth: int = 0) -> BaseException:
        if type(error) is not dict:
            self._break("a malformed exception")
        if "abort" in error:
            self.broken = f"the program raised {str(error['abort'])[:200]}"
            return Broken(self.broken)
        try:
            cls = self.decoder.decode(error.get("cls"))
            args = self.decoder.decode(error.get("args"))
        except (NotPlain, RecursionError) as exc:
            self._break(f"a malformed exception: {exc}")
        if not (isinstance(cls, type) and issubclass(cls, BaseException)) or type(args) is not list:
            self._break("an exception that is not an exception class")
        if issubclass(cls, ABORTS):
            self.broken = f"the program raised {cls.__name__}"
            return Broken(self.broken)
        try:
            raised = cls(*args)
        except Exception:
            raised = cls(str(error.get("text", ""))[:2000])
        raised.__suppress_context__ = error.get("suppress") is True
        for key, attribute in (("cause", "__cause__"), ("context", "__context__")):
            if key in error and depth < 8:  # the chain the program raised with (no abort comes in one)
                linked = self._exception(error[key], depth + 1)
                if not isinstance(linked, Broken):
                    setattr(raised, attribute, linked)
        return raised

    def _warnings(self, caught: object) -> None:
        if type(caught) is not list:
            return
        for item in caught[:20]:
            with contextlib.suppress(Exception):
                category = self.decoder.decode(item[0])
                if isinstance(category, type) and issubclass(category, Warning):
                    warnings.warn(str(item[1]), category, stacklevel=2)

    def end(self) -> None:
        with contextlib.suppress(ChannelError, NotPlain):
            self.channel.send({"op": "end"})


def _attribute(module: object, qualname: object) -> object:
    value = module
    for part in str(qualname).split("."):
        value = getattr(value, part, None)
    return value


def _remote(proxy: Proxy) -> Remote:
    return object.__getattribute__(proxy, "_ef_remote")


def _binary(name: str, reflected: bool = False):
    def method(self, other):
        # The program computes it, seeing the tests' operand (perhaps the expected value: in
        # `abs(f(x) - y) < eps` it would answer 0): delegated and counted, like a comparison.
        remote = _remote(self)
        remote.delegated += 1
        return remote.request("rbinary" if reflected else "binary", self, name=name, args=[other])

    method.__name__ = f"__{name}__"
    return method


def _compare(op: str):
    def method(self, other):
        if type(other) is not Proxy:  # a handle against plain data is never delegated
            return NotImplemented
        return _remote(self).truth(op, self, args=[other])

    return method


class Proxy:
    """An object of the candidate's process (function, class, instance, iterator): every use is a
    request. One proxy per object, so ``is`` works; passed back, it is the original again."""

    __slots__ = ("_ef_remote", "_ef_id", "__weakref__")

    def __getattr__(self, name: str):
        # Libraries here probe protocols through attributes (numpy's __array_interface__ names an
        # address to read): no dunder but plain descriptive ones is the program's to answer.
        if name.startswith("_ef_") or (
            name.startswith("__") and name.endswith("__") and name not in DATA_DUNDERS
        ):
            raise AttributeError(name)
        return _remote(self).request("getattr", self, name=name)

    @property  # type: ignore[misc]  # read-only on purpose: the program's class, never set here
    def __class__(
        self,
    ):  # the program's class (type(proxy) stays Proxy: isinstance checks go to __instancecheck__)
        return _remote(self).request("getattr", self, name="__class__")

    def __setattr__(self, name: str, value) -> None:
        _remote(self).request("setattr", self, name=name, v=value)

    def __delattr__(self, name: str) -> None:
        _remote(self).request("delattr", self, name=name)

    def __call__(self, *args, **kwargs):
        back = (*args, *kwargs.values())  # what a call changes in place comes back to the tests' own
        return _remote(self).request("call", self, args=list(args), kw=dict(kwargs), _writeback=back)

    def __getitem__(self, key):
        return _remote(self).request("getitem", self, k=key)

    def __setitem__(self, key, value) -> None:
        _remote(self).request("setitem", self, k=key, v=value)

    def __delitem__(self, key) -> None:
        _remote(self).request("delitem", self, k=key)

    def __iter__(self):
        return _remote(self).request("iter", self)

    def __next__(self):
        return _remote(self).request("next", self)

    def __str__(self) -> str:
        return _text(_remote(self).request("str", self))

    def __repr__(self) -> str:
        return _text(_remote(self).request("repr", self))

    def __format__(self, spec: str) -> str:
        return _text(_remote(self).request("format", self, spec=spec))

    def __bool__(self) -> bool:
        return _remote(self).truth("bool", self)

    def __len__(self) -> int:
        return _remote(self).truth("len", self, int)

    def __hash__(self) -> int:
        return _remote(self).truth("hash", self, int)

    def __contains__(self, item) -> bool:
        return _remote(self).truth("contains", self, args=[item])

    def __instancecheck__(self, obj) -> bool:
        if type(obj) is not Proxy:  # plain data is never an instance of a program's class
            return False
        return _remote(self).truth("instancecheck", obj, args=[self])

    def __subclasscheck__(self, cls) -> bool:
        if type(cls) is not Proxy:
            return False
        return _remote(self).truth("subclasscheck", cls, args=[self])

    def __enter__(self):  # the program's own context manager, called like any of its methods
        return _remote(self).request("getattr", self, name="__enter__")()

    def __exit__(self, *exc):
        return _remote(self).request("getattr", self, name="__exit__")(*exc)

    def __round__(self, *ndigits):
        return _remote(self).request("getattr", self, name="__round__")(*ndigits)

    def __copy__(self):
        return _remote(self).request("unary", self, name="copy")

    def __deepcopy__(self, memo):
        return _remote(self).request("unary", self, name="deepcopy")

    def __reversed__(self):
        return _remote(self).request("unary", self, name="reversed")

    def __dir__(self):
        return _remote(self).request("unary", self, name="dir")

    __eq__, __ne__ = _compare("eq"), _compare("ne")
    __lt__, __le__, __gt__, __ge__ = _compare("lt"), _compare("le"), _compare("gt"), _compare("ge")


for _op in OPERATORS:
    _name = _op.rstrip("_")
    setattr(Proxy, f"__{_name}__", _binary(_op))
    setattr(Proxy, f"__r{_name}__", _binary(_op, reflected=True))
    setattr(Proxy, f"__i{_name}__", _binary(f"i{_name}"))
for _name in ("neg", "pos", "abs", "invert", "index", "int", "float", "complex"):
    setattr(
        Proxy,
        f"__{_name}__",
        (lambda name: lambda self, *a: _remote(self).request("unary", self, name=name))(_name),
    )


def _text(value: object) -> str:
    if type(value) is not str:
        raise TypeError("the program's __str__/__repr__/__format__ returned a non-string")
    return value


_BUILTIN_ITEMS = tuple((k, v) for k, v in vars(builtins).items() if not k.startswith("__"))


class _Namespace(dict):
    """The tests' globals: what the tests and the benchmark's helpers define, else the program's
    top-level name, asked for on first use (as the tests would find it in the program's module).
    Functions, classes and modules are kept once fetched; plain values are asked for each time, so a
    global the program rebinds reads as it would in one process."""

    def __init__(self, remote: Remote, names: list) -> None:
        # The builtins are entries of their own, so that looking one up never reaches __missing__
        # (an exception per lookup); the benchmark's bindings come before them.
        super().__init__({k: v for k, v in _BUILTIN_ITEMS if k not in remote.bindings})
        self.remote = remote
        self.defined = {name for name in names if type(name) is str}  # the program's, after it ran
        self.absent: set[str] = set()

    def __missing__(self, name: str):
        # A builtin's name is the tests' builtin, never the program's (a program's top-level `abs`
        # would decide `abs(f(x) - y) < eps`); problems whose tests call a builtin-named function of
        # the program run in process (eval/split_mode.py).
        if name in self.remote.bindings:
            value = self.remote.bound(self.remote.bindings[name])
            if value is not None:
                self[name] = value
                return value
        if name not in self.defined or name in self.absent or name in BUILTIN_NAMES:
            raise KeyError(name)
        try:
            value = self.remote.request("getname", name=name)
        except KeyError:
            self.absent.add(name)  # a builtin, or a name nobody defines: Python looks further
            raise
        if type(value) is Proxy or isinstance(value, (type, types.ModuleType)):
            self[name] = value
        return value


class _Checks:
    """The assert statements of the tests: which held (every time they ran to the end) and which
    failed. An assert whose test was cut short by an exception (the program raised on the loop's
    second input, say) did not hold that time, whoever caught the exception."""

    def __init__(self, total: int, remote: Remote) -> None:
        self.total, self.remote = total, remote
        self.held: set[int] = set()
        self.failed: set[int] = set()
        self.refuted = 0  # asserts whose test was false: a correct program fails none, caught or not
        self.running: list[int] = []  # asserts whose test is being evaluated, innermost last

    def begin(self, index: int) -> None:
        self.running.append(index)

    def __call__(self, index: int, value: object) -> bool:
        truth = bool(value)  # a handle's truth is delegated (and counted) by Proxy.__bool__
        while self.running:  # asserts begun inside this one's test and never checked were cut short
            begun = self.running.pop()
            if begun == index:
                break
            self.failed.add(begun)
        if truth:
            self.held.add(index)
        else:
            self.failed.add(index)
            self.refuted += 1
            if self.remote.depth:  # inside a callback the candidate called: it cannot catch this
                self.remote.callback_failures += 1
        return truth

    @property
    def passed(self) -> int:
        return len(self.held - self.failed - set(self.running))


def _count_asserts(body: list[ast.stmt], count: int = 0) -> int:
    """``assert test, msg`` -> ``if not CHECK(i, BEGIN(i) or test): raise AssertionError(msg)``,
    numbered in the order of the text; returns the next number. Only statements are visited (an
    assert is one, and no expression holds a statement): a test's large literals cost nothing here."""
    for at, node in enumerate(body):
        if isinstance(node, ast.Assert):
            body[at] = _counted(node, count)
            count += 1
            continue
        for name in _BODIES.get(type(node), ()):
            field = getattr(node, name)
            for block in [part.body for part in field] if name in ("handlers", "cases") else [field]:
                count = _count_asserts(block, count)
    return count


def _counted(node: ast.Assert, index: int) -> ast.If:
    def at(new: ast.AST) -> Any:
        return ast.copy_location(new, node)

    begin = at(ast.Call(at(ast.Name(BEGIN, ast.Load())), [at(ast.Constant(index))], []))
    test = at(ast.BoolOp(ast.Or(), [begin, node.test]))  # BEGIN returns None: the value is the test's
    check = at(ast.Call(at(ast.Name(CHECK, ast.Load())), [at(ast.Constant(index)), test], []))
    error = at(ast.Call(at(ast.Name(FAILURE, ast.Load())), [node.msg] if node.msg else [], []))
    return at(ast.If(at(ast.UnaryOp(ast.Not(), check)), [at(ast.Raise(error, None))], []))


# Each kind of statement that holds statements, and the fields that hold them (lists of
# statements, or of handlers and match cases, which have a body each).
_BODIES: dict[type, tuple[str, ...]] = {
    ast.FunctionDef: ("body",),
    ast.AsyncFunctionDef: ("body",),
    ast.ClassDef: ("body",),
    ast.If: ("body", "orelse"),
    ast.For: ("body", "orelse"),
    ast.AsyncFor: ("body", "orelse"),
    ast.While: ("body", "orelse"),
    ast.With: ("body",),
    ast.AsyncWith: ("body",),
    ast.Try: ("body", "handlers", "orelse", "finalbody"),
    ast.Match: ("cases",),
}
if hasattr(ast, "TryStar"):  # Python 3.11+: try/except*
    _BODIES[ast.TryStar] = _BODIES[ast.Try]


# Process-wide state the tests may set: applied here, then mirrored where the program runs.
MIRRORED = (
    ("random.seed", random, "seed"),
    ("warnings.simplefilter", warnings, "simplefilter"),
    ("warnings.filterwarnings", warnings, "filterwarnings"),
    ("warnings.resetwarnings", warnings, "resetwarnings"),
    ("sys.setrecursionlimit", sys, "setrecursionlimit"),
)


def _mirrored(remote: Remote, name: str, function):
    def mirrored(*args, **kwargs):
        result = function(*args, **kwargs)
        remote.request("mirror", fn=name, args=list(args), kw=dict(kwargs))
        return result

    return mirrored


def _mirror(remote: Remote) -> dict:
    """Wrap the functions of MIRRORED for one run; the originals, to put back after it."""
    originals = {}
    for name, module, attribute in MIRRORED:
        originals[module, attribute] = function = getattr(module, attribute)
        setattr(module, attribute, _mirrored(remote, name, function))
    remote.originals = originals
    return originals


def _mirror_numpy(remote: Remote) -> None:
    numpy_random: Any = sys.modules.get("numpy.random")  # numpy's module, when the program loaded it
    if numpy_random is not None and (numpy_random, "seed") not in remote.originals:
        remote.originals[numpy_random, "seed"] = numpy_random.seed
        numpy_random.seed = _mirrored(remote, "numpy.random.seed", numpy_random.seed)


def compile_tests(tests: str, helpers: str = "") -> tuple[types.CodeType, types.CodeType, int]:
    """The benchmark's helpers' code, the tests' code with every assert statement counted
    (``_count_asserts``), and how many there are. A code object holds no state: the trusted
    process compiles each text once and reuses it."""
    helpers_code = compile(helpers, "<benchmark helpers>", "exec", dont_inherit=True)
    tree = ast.parse(tests, TESTS_FILE)
    count = _count_asserts(tree.body)
    return helpers_code, compile(tree, TESTS_FILE, "exec", dont_inherit=True), count


def run(
    channel: Channel,
    tests: str,
    helpers: str,
    compiled: tuple | None = None,
    modules: frozenset[str] = frozenset(),
    measure: bool = False,
) -> dict:
    """Load the program in the candidate's process, run the tests here; the outcome, one JSON-ready
    record. ``compiled``: ``compile_tests(tests, helpers)``, where already done; ``modules``:
    top-level modules the benchmark's own text imports (imported here by name); ``measure``: a
    passing outcome also carries the lines that ran, the tests' and the program's (line_probes.py)."""
    remote = Remote(channel, modules)
    outcome: dict = {"passed": False, "tests_passed": 0, "tests_total": 0, "delegated": 0}
    checks = None
    originals = _mirror(remote)
    try:
        helpers_code, code, count = compiled or compile_tests(tests, helpers)
        checks = _Checks(count, remote)
        outcome["tests_total"] = count
        names = remote.request("load")
        if type(names) is not list:
            remote._break("the program's names are not a list")
        namespace = _Namespace(remote, names)
        namespace.update(__name__="__main__", __builtins__=builtins)
        exec(helpers_code, namespace)
        namespace[CHECK], namespace[BEGIN], namespace[FAILURE] = checks, checks.begin, AssertionError
        with TestLines(TESTS_FILE) if measure else contextlib.nullcontext() as ran:
            exec(code, namespace)
        if remote.broken:
            raise Broken(remote.broken)
        if remote.callback_failures:
            raise AssertionError("an assertion failed inside a callback the program called")
        if checks.refuted:  # an except clause the program can shape (its __exit__, a name it binds) took it
            raise AssertionError("an assert of the tests failed and its AssertionError was caught")
        outcome["passed"] = True
    except Broken as exc:
        outcome["error"] = str(exc)
        outcome["kind"] = "protocol" if str(exc).startswith("protocol") else "aborted"
    except MemoryError:
        outcome.update(error="MemoryError", kind="memory")
    except BaseException as exc:
        outcome["error"] = f"{type(exc).__name__}: {_message(exc)}".rstrip(": ")
        outcome["kind"] = "exception"
        with contextlib.suppress(BaseException):
            traceback.print_exception(
                type(exc), exc, exc.__traceback__.tb_next if exc.__traceback__ else None
            )
    finally:
        for (module, attribute), function in originals.items():
            setattr(module, attribute, function)
    if remote.broken and outcome["passed"]:
        outcome.update(passed=False, error=remote.broken, kind="protocol")
    if "error" in outcome:  # one report is one message (trusted_server.py): the program's text is cut
        outcome["error"] = str(outcome["error"])[:2000]
    if checks is not None:
        outcome["tests_passed"] = checks.passed
    outcome["delegated"] = remote.delegated
    if remote.retire:
        outcome["retire"] = remote.retire
    if measure and outcome["passed"]:
        with contextlib.suppress(Exception):  # no lines: no coverage, the verdict stands
            program = remote.request("lines")
            if is_line_list(program):
                # measure: ran is the TestLines
                outcome["lines"] = {"tests": sorted(ran.lines), "program": program}  # type: ignore[union-attr]
    remote.end()
    return outcome


def _message(exc: BaseException) -> str:
    try:
        return str(exc)[:500]
    except Exception:
        return "<unprintable>"
