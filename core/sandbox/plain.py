"""Plain data across a split run's boundary: values as JSON trees, every other object a handle.

Both processes of a split run (``split_trusted.py`` and ``split_candidate.py``) use this codec;
standard library only (numpy is used only when the value already is numpy's). A value crosses
as data only when its type is *exactly* one of these (a subclass of ``int`` or ``str`` is an
object of the candidate's and crosses as a handle):

    None, bool, int, float (nan, inf), complex, str (lone surrogates too), bytes, bytearray,
    tuple, list, dict, set, frozenset, range, slice (of ints and None), Ellipsis, OrderedDict, Counter, deque,
    defaultdict with a builtin factory, Decimal, Fraction, date, time, datetime, timedelta,
    timezone, numpy scalars and arrays of bool, integer, float, complex, str or bytes dtype
    (never object or structured dtypes: those hold pointers).

Scalars are JSON's own; everything else is a list whose first item is a tag (``["l", 1, 2]``
is ``[1, 2]``). Shared and cyclic containers cross once and are referred to by their order of
appearance (``["@", 3]``), so ``x = []; x.append(x)`` comes back as itself. Nesting depth,
node count, integer size and the message size are bounded; what is too big or too deep is not
data (the caller makes it a handle or fails the call).

Decoding builds only the types above: it never unpickles, evals or imports anything named by
the other side (numpy is imported only by the side that receives an array, from its own path).
"""

from __future__ import annotations

import base64
import builtins
import collections
import datetime
import decimal
import fractions
import json
import math
import os
import struct
from collections.abc import Callable
from typing import Any

MAX_DEPTH = 64
MAX_NODES = 1_000_000
MAX_INT_BITS = 1 << 16  # 19,729 decimal digits
MAX_MESSAGE_BYTES = 32 << 20
_HEADER = struct.Struct(">I")
_JSON = json.JSONEncoder(separators=(",", ":"))  # made once: json.dumps with options makes one per call
# The C encoder behind it, made once too (JSONEncoder.encode makes one per call: half its cost);
# no cycle check: an Encoder's tree holds none (a shared value is a reference, "@").
_C_ENCODE = (  # (typeshed leaves c_make_encoder out)
    json.encoder.c_make_encoder(  # type: ignore[attr-defined]
        None, None, json.encoder.encode_basestring_ascii, None, ":", ",", False, False, True
    )
    if json.encoder.c_make_encoder is not None  # type: ignore[attr-defined]
    else None
)
_RAW_DECODE = json.JSONDecoder().raw_decode

# builtin factories a defaultdict may carry as data
_FACTORIES = {"int": int, "float": float, "str": str, "list": list, "dict": dict, "set": set, "tuple": tuple}
_ARRAY_KINDS = frozenset("biufcUS")  # no object ("O"), void/structured ("V") or datetime dtypes


_FLAT_MAX = 256


def _flat(items) -> bool:
    """Whether every item is a scalar that crosses as itself (the fast path of short lists)."""
    for x in items:
        t = type(x)
        if t is str or t is bool or x is None:
            continue
        if t is int and -(1 << 62) < x < 1 << 62:
            continue
        if t is float and x - x == 0:  # finite
            continue
        return False
    return True


# -- what both sides agree on besides values --------------------------------------------------------
# Builtins that cross by name (both sides have them): types, pure functions and exception classes.
SAFE_BUILTINS = frozenset(
    name
    for name, value in vars(builtins).items()
    if (isinstance(value, type) and not name.startswith("_"))
    or name
    in {"abs", "all", "any", "ascii", "bin", "callable", "chr", "divmod", "format", "hash", "hex", "id",
        "isinstance", "issubclass", "iter", "len", "max", "min", "next", "oct", "ord", "pow", "repr",
        "round", "sorted", "sum"}
)  # fmt: skip
# Binary operators a handle takes, by their `operator` names ("and_" is `&`); each also reflected
# and in place ("iand").
OPERATORS = ("add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "matmul", "lshift", "rshift",
             "and_", "or_", "xor")  # fmt: skip
# Containers a call may change in place (list.sort, dict.update): sent back to the caller.
MUTABLE = frozenset({list, dict, set, bytearray, collections.deque, collections.OrderedDict,
                     collections.Counter, collections.defaultdict})  # fmt: skip
# Exceptions that never cross: the run fails.
ABORTS = (SystemExit, KeyboardInterrupt, GeneratorExit)


class NotPlain(ValueError):
    """The value (or a part of it) is not plain data, or exceeds a bound."""


class Encoder:
    """Turns a value into a JSON tree; objects that are not plain data go through ``handle``
    (which returns their tag list, or raises NotPlain where handles are not allowed)."""

    def __init__(self, handle: Callable[[object], list]) -> None:
        self.handle = handle

    # Any, not object: these dispatch on type(v) kept in a variable, which mypy does not narrow through
    def encode(self, value: Any) -> object:
        t = type(value)
        if value is None or t is bool or t is str or (t is int and -(1 << 62) < value < 1 << 62):
            return value  # the common cases, without the bookkeeping of containers
        if (t is list or t is tuple) and len(value) <= _FLAT_MAX and _flat(value):
            return ["l" if t is list else "t", *value]
        self._memo: dict[int, int] = {}
        self._building: set[int] = set()
        self._keep: list[object] = []  # ids stay unique while the memo holds them
        self._nodes = 0
        return self._enc(value, 0)

    def _enc(self, v: Any, depth: int) -> object:
        self._nodes += 1
        if self._nodes > MAX_NODES:
            raise NotPlain(f"more than {MAX_NODES} values in one message")
        if depth > MAX_DEPTH:
            raise NotPlain(f"nesting deeper than {MAX_DEPTH}")
        t = type(v)
        if v is None or t is bool or t is str:
            return v
        if t is int:
            if v.bit_length() > MAX_INT_BITS:
                raise NotPlain(f"an integer of more than {MAX_INT_BITS} bits")
            return v if v.bit_length() < 1000 else ["i", hex(v)]
        if t is float:
            return v if math.isfinite(v) else ["F", repr(v)]
        scalar = self._scalar(t, v)
        if scalar is not None:
            return scalar
        tag = _CONTAINER_TAGS.get(t)
        if tag is None:
            if t.__module__ == "numpy" and t.__name__ != "ndarray":
                return self._numpy_scalar(v)
            if t.__module__ == "numpy":
                return self._array(v)
            return self.handle(v)
        key = id(v)
        if key in self._memo:
            if key in self._building and t in (tuple, frozenset):
                raise NotPlain("a cycle through an immutable container")
            return ["@", self._memo[key]]
        self._memo[key] = len(self._memo)
        self._keep.append(v)
        self._building.add(key)
        items: list[object] = [tag]
        if t is collections.deque:
            items.append(v.maxlen)
        elif t is collections.defaultdict:
            factory = next((k for k, f in _FACTORIES.items() if f is v.default_factory), None)
            if v.default_factory is not None and factory is None:
                raise NotPlain("a defaultdict whose factory is not a builtin type")
            items.append(factory)
        if t in (dict, collections.OrderedDict, collections.Counter, collections.defaultdict):
            for k, item in list(v.items()):
                items += (self._enc(k, depth + 1), self._enc(item, depth + 1))
        else:
            items += [self._enc(item, depth + 1) for item in list(v)]
        self._building.discard(key)
        return items

    @staticmethod
    def _scalar(t: type, v) -> list | None:
        if t is complex:
            return ["c", repr(v.real), repr(v.imag)]
        if t is bytes:
            return ["b", base64.b64encode(v).decode()]
        if t is range:
            return (
                ["r", v.start, v.stop, v.step]
                if max(map(abs, (v.start, v.stop, v.step))).bit_length() < 64
                else None
            )
        if t is slice:  # `obj[1:3]` on a handle: its bounds are what cross
            bounds = (v.start, v.stop, v.step)
            if all(b is None or (type(b) is int and b.bit_length() < 64) for b in bounds):
                return ["sl", *bounds]
            return None
        if v is Ellipsis:
            return ["..."]
        if t is decimal.Decimal:
            return ["D", str(v)]
        if t is fractions.Fraction:
            return ["Q", str(v.numerator), str(v.denominator)]
        if t is datetime.datetime or t is datetime.time:
            zone = _zone(v.tzinfo)
            if zone == "":  # a tzinfo of the program's own
                return None
            return [
                "dt" if t is datetime.datetime else "tm",
                v.replace(tzinfo=None).isoformat(),
                v.fold,
                zone,
            ]
        if t is datetime.date:
            return ["d8", v.isoformat()]
        if t is datetime.timedelta:
            return ["td", v.days, v.seconds, v.microseconds]
        if t is datetime.timezone:
            return ["tz", v.utcoffset(None).total_seconds(), v.tzname(None)]
        return None

    def _numpy_scalar(self, v) -> list:
        import numpy

        if not isinstance(v, numpy.generic) or v.dtype.kind not in _ARRAY_KINDS:
            return self.handle(v)
        return ["ns", v.dtype.str, base64.b64encode(numpy.asarray(v).tobytes()).decode()]

    def _array(self, v) -> list:
        if (
            v.dtype.kind not in _ARRAY_KINDS
            or v.dtype.fields is not None
            or v.nbytes > MAX_MESSAGE_BYTES // 2
        ):
            return self.handle(v)
        data = v.tobytes(order="C")
        return ["nd", v.dtype.str, list(v.shape), base64.b64encode(data).decode()]


_CONTAINER_TAGS: dict[type, str] = {
    list: "l",
    tuple: "t",
    dict: "d",
    set: "s",
    frozenset: "fs",
    bytearray: "ba",
    collections.OrderedDict: "od",
    collections.Counter: "ct",
    collections.deque: "dq",
    collections.defaultdict: "dd",
}


class Decoder:
    """Turns a JSON tree back into a value; ``handle(tag_list)`` resolves handle tags (and
    raises NotPlain for one it does not know)."""

    def __init__(self, handle: Callable[[list], object]) -> None:
        self.handle = handle

    # Any, not object: these dispatch on type(x) kept in a variable, which mypy does not narrow through
    def decode(self, tree: Any) -> object:
        """The value of ``tree``; NotPlain for anything malformed, whatever the cause."""
        t = type(tree)
        if tree is None or t is bool or t is str or t is float or (t is int and -(1 << 62) < tree < 1 << 62):
            return tree
        if t is list and 0 < len(tree) <= _FLAT_MAX + 1 and tree[0] in ("l", "t") and _flat(tree[1:]):
            return tree[1:] if tree[0] == "l" else tuple(tree[1:])
        self._refs: list[object] = []
        self._nodes = 0
        try:
            return self._dec(tree, 0)
        except NotPlain:
            raise
        except RecursionError:
            raise NotPlain("a value nested too deeply") from None
        except Exception as exc:  # ValueError, OverflowError, SystemError...: never the caller's to catch
            raise NotPlain(f"a malformed value ({type(exc).__name__})") from None

    def _dec(self, x: Any, depth: int) -> object:
        self._nodes += 1
        if self._nodes > MAX_NODES or depth > MAX_DEPTH:
            raise NotPlain("a value too large or too deeply nested")
        t = type(x)
        if x is None or t in (bool, int, float, str):
            if t is int and x.bit_length() > MAX_INT_BITS:
                raise NotPlain("an integer too large")
            return x
        if t is not list or not x or type(x[0]) is not str:
            raise NotPlain(f"malformed value {str(x)[:60]!r}")
        tag, rest = x[0], x[1:]
        if tag == "@":
            index = _int(rest[0]) if len(rest) == 1 else -1
            if not 0 <= index < len(self._refs) or self._refs[index] is None:
                raise NotPlain("a reference to no value, or to an immutable container being built")
            return self._refs[index]
        if tag in _CONTAINERS:
            return self._container(tag, rest, depth)
        decode = _SCALARS.get(tag)
        if decode is not None:
            try:
                return decode(*rest)
            except (TypeError, ValueError, ArithmeticError, OverflowError) as exc:
                raise NotPlain(f"malformed {tag!r} value: {exc}") from None
        if tag in ("nd", "ns"):
            return _numpy_value(tag, rest)
        return self.handle(x)

    def _container(self, tag: str, rest: list, depth: int) -> object:
        slot = len(self._refs)
        mutable = tag not in ("t", "fs")
        if tag in ("dq", "dd"):
            if not rest:
                raise NotPlain(f"malformed {tag!r} value")
            head, rest = rest[0], rest[1:]
            if tag == "dq":
                obj: Any = collections.deque(maxlen=None if head is None else _int(head))
            elif head is not None and head not in _FACTORIES:
                raise NotPlain("a defaultdict factory that is not a builtin type")
            else:
                obj = collections.defaultdict(_FACTORIES.get(head))
        else:
            obj = _CONTAINERS[tag]() if mutable else None
        self._refs.append(obj)
        items = [self._dec(item, depth + 1) for item in rest]
        if tag in ("d", "od", "ct", "dd"):
            if len(items) % 2:
                raise NotPlain("a mapping with a key and no value")
            pairs = zip(items[::2], items[1::2], strict=True)
            try:
                for k, v in pairs:
                    obj[k] = v
            except TypeError as exc:
                raise NotPlain(f"an unhashable key: {exc}") from None
            return obj
        try:
            if tag == "t":
                obj = tuple(items)
            elif tag == "fs":
                obj = frozenset(items)
            elif tag == "s":
                obj.update(items)
            elif tag == "ba":
                obj.extend(items)
            else:
                obj.extend(items)
        except (TypeError, ValueError) as exc:
            raise NotPlain(f"malformed {tag!r} value: {exc}") from None
        self._refs[slot] = obj
        return obj


def _int(x: object) -> int:
    if type(x) is not int:
        raise NotPlain("an integer was expected")
    return x


def _float(text: object) -> float:
    if type(text) is not str or len(text) > 40:
        raise ValueError("not a float")
    return float(text)


def _big_int(text: object) -> int:
    if type(text) is not str or len(text) > MAX_INT_BITS // 4 + 4:
        raise ValueError("not a bounded integer")
    return int(text, 16)


def _bounded_str(text: object, limit: int = 200) -> str:
    if type(text) is not str or len(text) > limit:
        raise ValueError("not a short string")
    return text


def _decimal(text: object) -> decimal.Decimal:
    value = decimal.Decimal(_bounded_str(text, 10_000))
    if value.is_finite() and abs(value.adjusted()) > 100_000:  # Decimal("1e999999999") stays a bound
        raise ValueError("an exponent too large")
    return value


def _fraction(num: object, den: object) -> fractions.Fraction:
    return fractions.Fraction(int(_bounded_str(num, 20_000)), int(_bounded_str(den, 20_000)))


def _timezone(offset: Any, name: object) -> datetime.timezone:
    if type(offset) not in (int, float):
        raise ValueError("not an offset")
    return datetime.timezone(datetime.timedelta(seconds=offset), _bounded_str(name))


def _zone(tzinfo: Any) -> object:
    """A datetime's zone as data: None, a fixed offset with its name, or an IANA key; "" for
    any other tzinfo (not plain data)."""
    if tzinfo is None:
        return None
    if type(tzinfo) is datetime.timezone:
        return ["tz", tzinfo.utcoffset(None).total_seconds(), tzinfo.tzname(None)]
    if (
        type(tzinfo).__module__ == "zoneinfo"
        and type(tzinfo).__name__ == "ZoneInfo"
        and type(tzinfo.key) is str
    ):
        return ["zi", tzinfo.key]
    return ""


def _tzinfo(zone: object) -> datetime.tzinfo | None:
    if zone is None:
        return None
    if type(zone) is list and len(zone) == 3 and zone[0] == "tz":
        return _timezone(zone[1], zone[2])
    if type(zone) is list and len(zone) == 2 and zone[0] == "zi":
        import zoneinfo

        return zoneinfo.ZoneInfo(_bounded_str(zone[1], 64))  # keys are checked: no paths
    raise ValueError("not a zone")


def _datetime(text: object, fold: object, zone: object = None) -> datetime.datetime:
    value = datetime.datetime.fromisoformat(_bounded_str(text))
    return value.replace(fold=_int(fold), tzinfo=_tzinfo(zone))


def _time(text: object, fold: object, zone: object = None) -> datetime.time:
    return datetime.time.fromisoformat(_bounded_str(text)).replace(fold=_int(fold), tzinfo=_tzinfo(zone))


def _bytes(text: object) -> bytes:
    return base64.b64decode(_bounded_str(text, MAX_MESSAGE_BYTES), validate=True)


def _range(*bounds: object) -> range:
    return range(*(_int(b) for b in bounds))


def _slice(start: object, stop: object, step: object) -> slice:
    return slice(*(None if b is None else _int(b) for b in (start, stop, step)))


def _timedelta(days: object, seconds: object, micro: object) -> datetime.timedelta:
    return datetime.timedelta(days=_int(days), seconds=_int(seconds), microseconds=_int(micro))


_SCALARS: dict[str, Callable[..., object]] = {
    "i": _big_int,
    "F": _float,
    "c": lambda re, im: complex(_float(re), _float(im)),
    "b": _bytes,
    "r": _range,
    "sl": _slice,
    "...": lambda: Ellipsis,
    "D": _decimal,
    "Q": _fraction,
    "dt": _datetime,
    "d8": lambda text: datetime.date.fromisoformat(_bounded_str(text)),
    "tm": _time,
    "td": _timedelta,
    "tz": _timezone,
}
_CONTAINERS: dict[str, Callable[[], object]] = {
    "l": list,
    "t": tuple,
    "d": dict,
    "s": set,
    "fs": frozenset,
    "ba": bytearray,
    "od": collections.OrderedDict,
    "ct": collections.Counter,
    "dq": collections.deque,
    "dd": collections.defaultdict,
}


def _numpy_value(tag: str, rest: list) -> object:
    import numpy  # the receiving side's own numpy, only when the other side sent numpy data

    try:
        dtype = numpy.dtype(_bounded_str(rest[0], 16))
        if dtype.kind not in _ARRAY_KINDS or dtype.fields is not None:
            raise NotPlain(f"numpy dtype {dtype.str!r} is not plain data")
        if tag == "ns":
            data = _bytes(rest[1])
            _check_code_points(numpy, dtype, data)
            return numpy.frombuffer(data, dtype=dtype, count=1)[0]
        shape = tuple(_int(n) for n in rest[1])
        if len(shape) > 32 or any(n < 0 for n in shape):
            raise NotPlain("a malformed array shape")
        data = _bytes(rest[2])
        count = math.prod(shape)
        if count * dtype.itemsize != len(data):
            raise NotPlain("an array whose bytes do not match its shape")
        _check_code_points(numpy, dtype, data)
        return numpy.frombuffer(data, dtype=dtype, count=count).reshape(shape).copy()
    except (TypeError, ValueError, IndexError) as exc:
        raise NotPlain(f"malformed numpy value: {exc}") from None


def _check_code_points(numpy, dtype, data: bytes) -> None:
    """A str array's bytes must be Unicode code points (numpy would fail on reading them)."""
    if dtype.kind == "U":
        points = numpy.frombuffer(data, dtype=dtype.byteorder.replace("|", "=") + "u4")
        if ((points > 0x10FFFF) | ((points >= 0xD800) & (points <= 0xDFFF))).any():
            raise NotPlain("a str array with invalid code points")


class ChannelError(Exception):
    """The other process broke the protocol: malformed, oversized or unexpected messages, or it
    closed the channel in the middle of a call."""


class Channel:
    """Length-prefixed JSON messages over a pair of pipes, bounded in size."""

    def __init__(self, read_fd: int, write_fd: int, max_bytes: int = MAX_MESSAGE_BYTES) -> None:
        self.read_fd, self.write_fd, self.max_bytes = read_fd, write_fd, max_bytes
        self.pending = bytearray()

    def send(self, message: dict) -> None:
        try:
            text = "".join(_C_ENCODE(message, 0)) if _C_ENCODE is not None else _JSON.encode(message)
        except (ValueError, TypeError, RecursionError) as exc:
            raise NotPlain(f"cannot serialise: {exc}") from None
        data = text.encode()  # ASCII: every non-ASCII character is escaped
        if len(data) > self.max_bytes:
            raise NotPlain(f"a {len(data)}-byte message exceeds the {self.max_bytes}-byte bound")
        view = memoryview(_HEADER.pack(len(data)) + data)
        try:
            while view:
                view = view[os.write(self.write_fd, view) :]
        except OSError as exc:
            raise ChannelError(f"the other process closed the channel ({exc.strerror})") from None

    def receive(self) -> dict:
        """The next message: what an earlier read brought beyond its own message first (one read
        usually brings a whole small message, header and body)."""
        self._fill(_HEADER.size)
        size = _HEADER.unpack_from(self.pending)[0]
        if size > self.max_bytes:
            raise ChannelError(f"a {size}-byte message exceeds the {self.max_bytes}-byte bound")
        end = _HEADER.size + size
        self._fill(end)
        body = self.pending[_HEADER.size : end]
        del self.pending[:end]
        try:
            text = body.decode()  # what we send is ASCII; anything not UTF-8 is malformed
            message, stop = _RAW_DECODE(text)
        except (ValueError, RecursionError) as exc:
            raise ChannelError(f"a malformed message ({type(exc).__name__})") from None
        if stop != len(text):
            raise ChannelError("a malformed message (data after its value)")
        if type(message) is not dict:
            raise ChannelError("a message that is not an object")
        return message

    def _fill(self, size: int) -> None:
        """Read until ``size`` bytes are pending."""
        while len(self.pending) < size:
            try:
                chunk = os.read(self.read_fd, max(size - len(self.pending), 1 << 16))
            except OSError as exc:
                raise ChannelError(f"cannot read the channel ({exc.strerror})") from None
            if not chunk:
                raise ChannelError("the other process closed the channel in the middle of a call")
            self.pending += chunk
