"""Signature text, read with `ast` and never run.

Signature text is a parameter list as Python writes it, `(text, /, sep='-', *, max_len=None) -> str`:
`str(inspect.signature(f))` of a library function, or a signature written in a benchmark. Both come
from outside, so the text is parsed as the parameter list of `def _f<text>: pass` and never
executed: a default such as `__import__('os').system(...)` stays text. `inspect` prints some
defaults as reprs that are not Python (`<object object at 0x7f...>`, `<function <lambda> at
0x7f...>`); those are read as opaque values and kept as written.

- `Signature.from_text(text)`: the typed parameters (name, kind, annotation and default as source
  text); `SignatureError` (a ValueError) when the text is not a parameter list.
- `Signature.to_inspect()`: an `inspect.Signature` to bind calls with. Defaults are stand-ins whose
  repr is the default's repr (for a literal) or its text, so arguments bound with defaults applied
  compare with the argument reprs a spy records, and `str(signature)` prints the text back.
- `parse_signature(text)`: `to_inspect()` of the text, or None when there is none or it is malformed.

>>> sig = Signature.from_text("(text, /, sep='-', *, max_len: int = None) -> str")
>>> [(p.name, p.kind.name, p.annotation, p.default) for p in sig.parameters][1:]
[('sep', 'POSITIONAL_OR_KEYWORD', None, "'-'"), ('max_len', 'KEYWORD_ONLY', 'int', 'None')]
>>> bound = sig.to_inspect().bind("'a'")
>>> bound.apply_defaults()
>>> repr(bound.arguments["sep"]), str(sig)
("'-'", "(text, /, sep='-', *, max_len: int = None) -> str")
"""

from __future__ import annotations

import ast
import functools
import inspect
import re
from collections.abc import Iterator
from dataclasses import dataclass

__all__ = ["Parameter", "Signature", "SignatureError", "parse_signature"]

_REPR = re.compile(r"<[^<>\n]*>")


class SignatureError(ValueError):
    """The text is not a parameter list; the message quotes it."""


@dataclass(frozen=True)
class _Text:
    """A default or annotation standing in for its value: its repr is the text, so a signature
    prints as written and a default applied in a binding reads like a recorded argument repr."""

    text: str

    def __repr__(self) -> str:
        return self.text


@dataclass(frozen=True)
class Parameter:
    """One parameter; `annotation` and `default` are source text (None when absent)."""

    name: str
    kind: inspect._ParameterKind
    annotation: str | None = None
    default: str | None = None

    @property
    def has_default(self) -> bool:
        return self.default is not None

    def to_inspect(self) -> inspect.Parameter:
        empty = inspect.Parameter.empty
        return inspect.Parameter(
            self.name,
            self.kind,
            default=empty if self.default is None else _Text(_default_repr(self.default)),
            annotation=empty if self.annotation is None else _Text(self.annotation),
        )


@dataclass(frozen=True)
class Signature:
    """A parameter list and its return annotation (source text, None when absent)."""

    parameters: tuple[Parameter, ...]
    returns: str | None = None

    @classmethod
    def from_text(cls, text: str) -> Signature:
        """The signature `text` writes; SignatureError when it is not a parameter list."""
        return _parse(text)

    def to_inspect(self) -> inspect.Signature:
        """An `inspect.Signature` to bind calls with; each default is a stand-in whose repr is the
        default's repr (for a literal) or its text, never its value."""
        return inspect.Signature(
            [p.to_inspect() for p in self.parameters],
            return_annotation=inspect.Signature.empty if self.returns is None else _Text(self.returns),
        )

    def __str__(self) -> str:
        return str(self.to_inspect())


def parse_signature(text: str | None) -> inspect.Signature | None:
    """The `inspect.Signature` recorded calls are bound to; None when there is no text or it is
    not a parameter list, so a caller falls back to comparing calls unbound."""
    if not text:
        return None
    try:
        return Signature.from_text(text).to_inspect()
    except SignatureError:
        return None


# Every call of a modified API in every sample is bound to one of a few texts.
@functools.lru_cache(maxsize=1024)
def _parse(text: str) -> Signature:
    stripped = text.strip()
    if not stripped.startswith("("):
        raise SignatureError(f"signature {text!r} must start with '(' (a parameter list)")
    source = f"def _f{stripped}: pass"
    function = _function(source) or _function(f"def _f{_opaque_reprs(stripped)}: pass")
    if function is None:
        raise SignatureError(f"signature {text!r} is not a Python parameter list such as '(x, /, y=1, *, z)'")
    parameters = tuple(_parameters(function.args, source, text))
    names = [p.name for p in parameters]
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        raise SignatureError(f"signature {text!r} repeats parameter {', '.join(repeated)}")
    return Signature(parameters, _segment(source, function.returns))


def _function(source: str) -> ast.FunctionDef | None:
    """The one `def ...: pass` that `source` holds, or None (a syntax error, or more code than that)."""
    try:
        module = ast.parse(source)
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return None
    if len(module.body) != 1 or not isinstance(module.body[0], ast.FunctionDef):
        return None
    function = module.body[0]
    if len(function.body) != 1 or not isinstance(function.body[0], ast.Pass):
        return None
    return function


def _opaque_reprs(text: str) -> str:
    """`text` with each `<...>` repr (innermost first) replaced by a name of the same UTF-8 length,
    so node positions still index the original text."""
    while True:
        text, count = _REPR.subn(lambda m: "_" * len(m.group().encode()), text)
        if not count:
            return text


def _parameters(args: ast.arguments, source: str, text: str) -> Iterator[Parameter]:
    kind = inspect.Parameter
    positional: list[tuple[ast.arg, inspect._ParameterKind]] = [
        (a, kind.POSITIONAL_ONLY) for a in args.posonlyargs
    ]
    positional += [(a, kind.POSITIONAL_OR_KEYWORD) for a in args.args]
    defaults = [None] * (len(positional) - len(args.defaults)) + list(args.defaults)
    for (arg, arg_kind), default in zip(positional, defaults, strict=True):
        yield _parameter(arg, arg_kind, default, source, text)
    if args.vararg:
        yield _parameter(args.vararg, kind.VAR_POSITIONAL, None, source, text)
    for arg, default in zip(args.kwonlyargs, args.kw_defaults, strict=True):
        yield _parameter(arg, kind.KEYWORD_ONLY, default, source, text)
    if args.kwarg:
        yield _parameter(args.kwarg, kind.VAR_KEYWORD, None, source, text)


def _parameter(
    arg: ast.arg, kind: inspect._ParameterKind, default: ast.expr | None, source: str, text: str
) -> Parameter:
    written = _segment(source, arg) or ""
    # An opaque `<...>` repr parses as a name, which must not become a parameter's name.
    if not written.startswith(arg.arg):
        raise SignatureError(f"signature {text!r} has a parameter whose name is not a name: {written!r}")
    return Parameter(arg.arg, kind, _segment(source, arg.annotation), _segment(source, default))


def _segment(source: str, node: ast.AST | None) -> str | None:
    return None if node is None else ast.get_source_segment(source, node)


def _default_repr(text: str) -> str:
    """A literal default as Python's repr writes it (`"-"` reads `'-'`, like a recorded argument);
    any other default as written."""
    try:
        return repr(ast.literal_eval(text))
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return text
