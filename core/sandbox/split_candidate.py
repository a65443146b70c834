"""The candidate's side of a split run: runs the program and answers the trusted side's requests.

Nothing here decides a check. The trusted process (``split_trusted.py``) asks this one to load
the program, call functions, build objects, read and set attributes, apply operators; every
answer is plain data or a handle (``plain.py``). The program may therefore keep every primitive
(ctypes, numpy, its own C code, fork): whatever it does here, the worst it can send back is a
wrong value, a handle, a malformed message or silence, and the trusted side fails the test for
each. Standard library only: this module runs inside the sandbox, loaded by the harness.
"""

from __future__ import annotations

import builtins
import contextlib
import copy
import io
import operator
import sys
import types
import warnings
from collections.abc import Callable
from typing import Any

try:  # in the sandbox the harness loads this file from its own folder
    from line_probes import ProgramLines
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
    from core.sandbox.line_probes import ProgramLines
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

MAX_DEPTH = 48  # nested callbacks (candidate -> trusted -> candidate ...)
MAX_OUTPUT = 1 << 20
MAX_CHAIN = 8  # links of an exception's chain that cross
MAX_NAMES = 100_000
BINARY: dict[str, Callable[..., Any]] = {name: getattr(operator, name) for name in OPERATORS}
BINARY |= {"i" + name.rstrip("_"): getattr(operator, "i" + name.rstrip("_")) for name in OPERATORS}
BINARY["concat"] = operator.concat
UNARY: dict[str, Callable[..., Any]] = {
    "neg": operator.neg,
    "pos": operator.pos,
    "abs": operator.abs,
    "invert": operator.invert,
}
UNARY |= {"index": operator.index, "int": int, "float": float, "complex": complex, "round": round}
UNARY |= {"copy": copy.copy, "deepcopy": copy.deepcopy, "reversed": reversed, "dir": lambda o: sorted(dir(o))}
TRUTH: dict[str, Callable[..., Any]] = {
    "eq": operator.eq,
    "ne": operator.ne,
    "lt": operator.lt,
    "le": operator.le,
    "gt": operator.gt,
    "ge": operator.ge,
    "contains": operator.contains,
    "instancecheck": isinstance,
    "subclasscheck": issubclass,
}
# Process-wide state the tests set, applied here too (see split_trusted.MIRRORED).
MIRRORS = {
    "random.seed": ("random", "seed"),
    "numpy.random.seed": ("numpy.random", "seed"),
    "warnings.simplefilter": ("warnings", "simplefilter"),
    "warnings.filterwarnings": ("warnings", "filterwarnings"),
    "warnings.resetwarnings": ("warnings", "resetwarnings"),
    "sys.setrecursionlimit": ("sys", "setrecursionlimit"),
}


class TrustedRef:
    """A trusted-side object the tests passed in (a key function, a class): it can only be called."""

    __slots__ = ("_server", "_id")

    def __init__(self, server: CandidateServer, ident: int) -> None:
        self._server, self._id = server, ident

    def __call__(self, *args, **kwargs):
        return self._server.call_trusted(self._id, args, kwargs)

    def __repr__(self) -> str:
        return f"<trusted callable {self._id}>"


class CandidateServer:
    def __init__(self, channel: Channel, program: str, main_path: str, probes: bool = False) -> None:
        self.channel, self.program, self.main_path = channel, program, main_path
        self.probes = ProgramLines() if probes else None  # the lines that ran, for ExcessCode
        self.objects: dict[int, object] = {}
        self.handles: dict[int, int] = {}
        self.encoder = Encoder(self._handle)
        self.decoder = Decoder(self._resolve)
        self.depth = 0
        self.seq = 0
        self.warned: list = []
        self.back: list = []
        warnings.showwarning = self._show_warning
        self.module = types.ModuleType("__main__")
        self.module.__dict__.update(__file__=main_path, __builtins__=builtins, __cached__=None)

    # -- handles -------------------------------------------------------------------------------
    def _handle(self, obj: object) -> list:
        if isinstance(obj, TrustedRef):
            return ["H", obj._id]
        name = getattr(obj, "__name__", None)
        if type(name) is str and name in SAFE_BUILTINS and getattr(builtins, name) is obj:
            return ["B", name]
        if type(obj) is types.ModuleType and type(obj.__name__) is str:
            return ["m", self._id_of(obj), obj.__name__]
        if isinstance(obj, type) and issubclass(obj, BaseException):
            bases = [self.encoder._enc(base, 1) for base in obj.__bases__]
            return ["xc", self._id_of(obj), str(obj.__module__), str(obj.__qualname__), bases]
        kind = "c" if isinstance(obj, type) else "f" if callable(obj) else "o"
        return ["h", self._id_of(obj), kind]

    def _id_of(self, obj: object) -> int:
        key = id(obj)
        if key not in self.handles:
            self.handles[key] = len(self.objects) + 1
            self.objects[self.handles[key]] = obj
        return self.handles[key]

    def _resolve(self, tree: list) -> object:
        tag = tree[0]
        if tag == "h" and len(tree) >= 2 and tree[1] in self.objects:
            return self.objects[tree[1]]
        if tag == "H" and len(tree) == 2 and type(tree[1]) is int:
            return TrustedRef(self, tree[1])
        if tag == "B" and len(tree) == 2 and tree[1] in SAFE_BUILTINS:
            return getattr(builtins, tree[1])
        raise NotPlain(f"unknown value {str(tree)[:60]!r}")

    # -- the loop ------------------------------------------------------------------------------
    def serve(self) -> None:
        """Answer requests until the trusted side says it is done."""
        while True:
            message = self.channel.receive()
            if message.get("op") == "end":
                return
            self._reply(self.answer(message))

    def _reply(self, reply: dict) -> None:
        """Send a reply; one too large to send becomes an error the tests see."""
        try:
            self.channel.send(reply)
        except NotPlain as exc:
            error = {"cls": ["B", "ValueError"], "args": ["l", f"the answer is too large: {exc}"], "text": ""}
            self.channel.send({"re": reply.get("re"), "e": error})

    def answer(self, message: dict) -> dict:
        """The reply to one request, with what the program printed and the warnings it showed
        meanwhile (the tests may capture both)."""
        reply: dict = {"re": message.get("seq")}
        out, err, saved = io.StringIO(), io.StringIO(), (sys.stdout, sys.stderr)
        self.warned, self.back = [], []
        sys.stdout, sys.stderr = out, err
        try:
            reply["v"] = self.encoder.encode(self._do(message))
        except BaseException as exc:  # everything the program raises crosses as its class and args
            reply.pop("v", None)
            reply["e"] = self._exception(exc)
        finally:
            sys.stdout, sys.stderr = saved
        for key, stream in (("out", out), ("err", err)):  # the tests' sys.stdout and sys.stderr get them
            text = stream.getvalue()
            if text:
                reply[key] = text[:MAX_OUTPUT]
        if self.warned:
            reply["warn"] = self.warned[:20]
        if self.back and "v" in reply:
            reply["back"] = self.back
        return reply

    def _show_warning(self, message, category, filename, lineno, file=None, line=None) -> None:
        """warnings.showwarning here: a warning the filters let through goes to the tests."""
        with contextlib.suppress(Exception):
            self.warned.append([self.encoder.encode(category), str(message)[:2000]])

    def _do(self, m: dict) -> object:
        op = m.get("op")
        if op == "load":
            code = compile(self.program, self.main_path, "exec", dont_inherit=True)
            if self.probes is not None:
                code = self.probes.instrument(code)
            sys.modules["__main__"] = self.module
            exec(code, self.module.__dict__)
            names = [
                k
                for k in self.module.__dict__
                if type(k) is str and not (k.startswith("__") and k.endswith("__"))
            ]
            return names[:MAX_NAMES]
        if op == "lines":  # the program's lines that ran (plain data, not reward-grade: line_probes.py)
            return self.probes.lines() if self.probes is not None else []
        if op == "getname":  # a top-level name of the program (KeyError: it has none of that name)
            name = _name(m)
            if name.startswith("__") and name.endswith("__"):
                raise KeyError(name)
            return self.module.__dict__[name]
        if op == "mirror":
            module, attribute = MIRRORS[m["fn"]]
            return getattr(sys.modules.get(module) or __import__(module, fromlist=["_"]), attribute)(
                *self._args(m), **self._kwargs(m)
            )
        h = m.get("h")
        target: Any  # whatever the candidate's object is: every operation below may fail on it
        if type(h) is list and len(h) == 3 and h[0] == "h" and type(h[1]) is int and h[1] in self.objects:
            target = self.objects[h[1]]  # the common case, a handle of ours, without the decoder
        else:
            target = self.decoder.decode(h)
        if op == "call":
            args, kwargs = self._args(m), self._kwargs(m)
            value = target(*args, **kwargs)
            # positional arguments, then keyword ones (their values in the sent mapping, in order)
            sent = m["args"][1:] + (m["kw"][2::2] if kwargs else [])
            self.back = self._mutated(sent, [*args, *kwargs.values()])
            return value
        if op == "getattr":
            return getattr(target, _name(m))
        if op == "setattr":
            setattr(target, _name(m), self.decoder.decode(m.get("v")))
            return None
        if op == "delattr":
            delattr(target, _name(m))
            return None
        if op == "getitem":
            return target[self.decoder.decode(m.get("k"))]
        if op == "setitem":
            target[self.decoder.decode(m.get("k"))] = self.decoder.decode(m.get("v"))
            return None
        if op == "delitem":
            del target[self.decoder.decode(m.get("k"))]
            return None
        if op == "binary":
            return BINARY[m["name"]](target, *self._args(m))
        if op == "rbinary":
            return BINARY[m["name"]](*self._args(m), target)
        if op == "unary":
            return UNARY[m["name"]](target)
        if op in TRUTH:
            return bool(TRUTH[op](target, *self._args(m)))
        if op == "bool":
            return bool(target)
        if op == "len":
            return len(target)
        if op == "hash":
            return hash(target)
        if op == "iter":
            return iter(target)
        if op == "next":
            return next(target)
        if op == "str":
            return str(target)
        if op == "repr":
            return repr(target)
        if op == "format":
            return format(target, _name(m, "spec"))
        raise NotPlain(f"unknown request {op!r}")

    def _mutated(self, sent: list, args: list) -> list:
        """[index, value] for each mutable argument the call changed: the caller updates its own."""
        back = []
        for i, (tree, value) in enumerate(zip(sent, args, strict=True)):
            if type(value) in MUTABLE:
                with contextlib.suppress(NotPlain, RecursionError):
                    now = self.encoder.encode(value)
                    if now != tree:
                        back.append([i, now])
        return back

    def _args(self, m: dict) -> list:
        args = self.decoder.decode(m.get("args", ["l"]))
        if type(args) is not list:
            raise NotPlain("arguments must be a list")
        return args

    def _kwargs(self, m: dict) -> dict:
        if "kw" not in m:  # most calls have none
            return {}
        kwargs = self.decoder.decode(m["kw"])
        if type(kwargs) is not dict or not all(type(k) is str for k in kwargs):
            raise NotPlain("keyword arguments must be a dict of str")
        return kwargs

    def _exception(self, exc: BaseException, depth: int = 0) -> dict:
        """The exception as its class, args and text, with its chain (``__cause__``,
        ``__context__``, ``__suppress_context__``) a few links deep: the tests may look at it."""
        if isinstance(exc, ABORTS):
            return {"abort": f"{type(exc).__name__}({', '.join(map(repr, exc.args))[:200]})"}
        try:
            cls = self.encoder.encode(type(exc))
        except NotPlain:
            cls = ["B", "Exception"]
        try:
            args = self.encoder.encode(list(exc.args))
        except (NotPlain, RecursionError):
            args = ["l", _text(exc)]
        error: dict = {"cls": cls, "args": args, "text": _text(exc)}
        if exc.__suppress_context__:
            error["suppress"] = True
        for key, linked in (("cause", exc.__cause__), ("context", exc.__context__)):
            if isinstance(linked, BaseException) and not isinstance(linked, ABORTS) and depth < MAX_CHAIN:
                error[key] = self._exception(linked, depth + 1)
        return error

    # -- callbacks into the trusted side -------------------------------------------------------
    def call_trusted(self, ident: int, args: tuple, kwargs: dict) -> object:
        if self.depth >= MAX_DEPTH:
            raise RecursionError(f"more than {MAX_DEPTH} nested calls between the two processes")
        self.seq += 1
        seq = self.seq
        self.channel.send(
            {
                "op": "tcall",
                "seq": seq,
                "h": ident,
                "args": self.encoder.encode(list(args)),
                "kw": self.encoder.encode(dict(kwargs)),
            }
        )
        self.depth += 1
        try:
            while True:
                message = self.channel.receive()
                if message.get("re") == seq and "op" not in message:
                    break
                if message.get("op") == "end":
                    raise ChannelError("the tests ended during a callback")
                self._reply(self.answer(message))
        finally:
            self.depth -= 1
        if "e" in message:
            raise _rebuilt(self.decoder, message["e"])
        return self.decoder.decode(message.get("v"))


def _name(m: dict, key: str = "name") -> str:
    name = m.get(key)
    if type(name) is not str:
        raise NotPlain(f"{key} must be a str")
    return name


def _text(exc: BaseException) -> str:
    try:
        return str(exc)[:2000]
    except Exception:
        return "<unprintable>"


def _rebuilt(decoder: Decoder, error: object) -> BaseException:
    """The exception a trusted callback raised, as this process's class (builtin, or the program's);
    a RuntimeError where the trusted side's answer names no such class."""
    try:
        cls = decoder.decode(error["cls"])  # type: ignore[index]
        args = decoder.decode(error["args"])  # type: ignore[index]
        if isinstance(cls, type) and issubclass(cls, BaseException) and not issubclass(cls, ABORTS):
            return cls(*args)
    except Exception as exc:  # a class whose constructor refuses the args, a malformed answer
        return RuntimeError(f"a callback of the tests raised an exception ({type(exc).__name__})")
    return RuntimeError("a callback of the tests raised an exception")


def serve(read_fd: int, write_fd: int, program: str, main_path: str, probes: bool = False) -> None:
    """Run the candidate's side until the trusted side ends the run (or the channel breaks);
    ``probes``: collect the program's executed lines (line_probes.py)."""
    channel = Channel(read_fd, write_fd)
    with contextlib.suppress(ChannelError):
        CandidateServer(channel, program, main_path, probes).serve()
