"""NovelAPIBench's companion metrics per sample (App. E.2): API-selection accuracy and parameter
correctness. The paper names them without a formula; its readings fix what they measure. E.2(ii):
a cell can have "the highest API_acc but middling pass@1 — the model knows which API to call ...
but writes wrong surrounding code (the WrongImport band)"; E.6: "parameter correctness moves only
marginally ... the model still identifies the right API and supplies the right arguments, but
WrongImport grows". So both are read from the code, not from whether the call ran:

- **API_acc** (`selects`): the code selects the target API, i.e. names its symbol in a call or
  a use, through an alias, at any other path or never imported, resolved statically
  (`classify.selects_target`); a pass the second run proved needed the API counts too.
- **Param_corr** (`binds_like_reference`): among samples that call the target, whether every
  call binds the parameters a reference call binds (names after binding to the signature, by
  position or keyword) with arguments of compatible kinds (`argument_kind`); values are not
  compared, and a callable is a callable whatever its repr. A call the program reached is the
  spy's record; one it never reached (a failed import first) is read from the code, its
  arguments' kinds known for literals, lambdas and the code's own functions, unknown (matching
  any kind) otherwise.

The earlier definitions stay as named options (`benchmark.api_acc=spy`: the spy recorded a call;
`benchmark.param_corr=values`: a call's argument values equal a reference call's,
`param_values_match`).
"""

from __future__ import annotations

import ast
import inspect
import re
from collections.abc import Sequence

from core.signatures import parse_signature
from eval.novelapi.classify import Attempt, bound_arguments, selects_target, static_target_calls

UNKNOWN = "<?>"  # the repr of an argument whose kind the code does not show (matches any kind)
_CALLABLE = re.compile(
    r"<(function|built-in function|built-in method|bound method|method|lambda|cyfunction)\b"
    r"|^functools\.partial\("
)
_OBJECT = re.compile(r"^<([\w.]+) object at 0x[0-9a-fA-F]+>$")


def selects(attempt: Attempt) -> bool:
    """API_acc's per-sample value (the module docstring)."""
    return attempt.passed or selects_target(attempt)


def argument_kind(text: str) -> str:
    """The kind of an argument from its repr: ``str``, ``bytes``, ``number``, ``bool``, ``none``,
    ``list``, ``tuple``, ``set``, ``dict``, ``callable``, ``class``, ``module``, an instance's
    class (``object:Name``), or ``?`` where the repr shows none."""
    if text == UNKNOWN:
        return "?"
    if _CALLABLE.search(text):
        return "callable"
    if text.startswith("<class "):
        return "class"
    if text.startswith("<module "):
        return "module"
    found = _OBJECT.match(text)
    if found:
        return "object:" + found.group(1).rsplit(".", 1)[-1]
    try:
        node = ast.parse(text, mode="eval").body
    except (SyntaxError, ValueError):
        return "?"
    return _node_kind(node)


def _node_kind(node: ast.AST) -> str:
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        return _node_kind(node.operand)
    if isinstance(node, ast.Constant):
        value = node.value
        if value is None:
            return "none"
        if isinstance(value, bool):
            return "bool"
        if isinstance(value, (int, float, complex)):
            return "number"
        return type(value).__name__  # str, bytes, ellipsis
    displays = {
        ast.List: "list", ast.ListComp: "list", ast.Tuple: "tuple", ast.Set: "set", ast.SetComp: "set",
        ast.Dict: "dict", ast.DictComp: "dict", ast.JoinedStr: "str", ast.Lambda: "callable",
    }  # fmt: skip
    for kind, name in displays.items():
        if isinstance(node, kind):
            return name
    if isinstance(node, ast.Call):  # a repr such as Decimal('1') or array([1, 2])
        func = node.func
        name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", None)
        return f"object:{name}" if name else "?"
    return "?"


def static_calls(attempt: Attempt) -> tuple[dict, ...]:
    """The target's calls in the code, as spy-style records (``{"args": [repr], "kwargs": ...}``)
    with reprs for what the code shows (literals, lambdas, its own functions) and `UNKNOWN` for the
    rest; a call with ``*args`` or ``**kwargs`` cannot be bound and is marked ``opaque``."""
    try:
        tree = ast.parse(attempt.code)
    except (SyntaxError, ValueError):
        return ()
    functions = {n.name for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
    records = []
    for call in static_target_calls(attempt):
        opaque = any(isinstance(a, ast.Starred) for a in call.args) or any(
            k.arg is None for k in call.keywords
        )
        records.append(
            {
                "args": [_static_repr(a, functions) for a in call.args],
                "kwargs": {k.arg: _static_repr(k.value, functions) for k in call.keywords if k.arg},
                **({"opaque": True} if opaque else {}),
            }
        )
    return tuple(records)


def _static_repr(node: ast.AST, functions: set[str]) -> str:
    if isinstance(node, ast.Lambda):
        return "<function <lambda>>"
    if isinstance(node, ast.Name) and node.id in functions:
        return f"<function {node.id}>"
    if _node_kind(node) != "?" and not isinstance(node, ast.Call):
        return ast.unparse(node)
    return UNKNOWN


def bound_kinds(call: dict, signature: inspect.Signature | None) -> dict[str, str] | None:
    """A call's arguments by parameter (``name``, ``*args[i]``, ``**key``; ``#i`` without a
    signature) mapped to their kinds; None if it does not bind or cannot be bound."""
    if call.get("opaque"):
        return None
    args, kwargs = list(call.get("args") or []), dict(call.get("kwargs") or {})
    if signature is None:
        return {
            **{f"#{i}": argument_kind(a) for i, a in enumerate(args)},
            **{k: argument_kind(v) for k, v in kwargs.items()},
        }
    try:
        bound = signature.bind(*args, **kwargs)
    except TypeError:
        return None
    kinds: dict[str, str] = {}
    for name, value in bound.arguments.items():
        param = signature.parameters[name]
        if param.kind is param.VAR_POSITIONAL:
            kinds.update({f"*{name}[{i}]": argument_kind(v) for i, v in enumerate(value)})
        elif param.kind is param.VAR_KEYWORD:
            kinds.update({f"**{key}": argument_kind(v) for key, v in value.items()})
        else:
            kinds[name] = argument_kind(value)
    return kinds


def _compatible(mine: dict[str, str], wanted: dict[str, str]) -> bool:
    return mine.keys() == wanted.keys() and all(
        "?" in (kind, wanted[name]) or kind == wanted[name] for name, kind in mine.items()
    )


def calls_of(attempt: Attempt) -> tuple[dict, ...]:
    """The target's calls a sample made: the spy's record where the program reached them, else the
    calls its code writes (a program that failed before reaching them)."""
    return tuple(attempt.calls) or static_calls(attempt)


def binds_like_reference(attempt: Attempt) -> bool | None:
    """Param_corr's per-sample value: whether every call of the target binds a reference call's
    parameters with compatible kinds; None when the sample calls no target or the reference
    records no call that binds (the sample is then outside Param_corr's denominator)."""
    calls = calls_of(attempt)
    signature = parse_signature(attempt.signature)
    wanted = [k for k in (bound_kinds(r, signature) for r in attempt.reference_calls) if k is not None]
    if not calls or not wanted:
        return None
    for call in calls:
        mine = bound_kinds(call, signature)
        if mine is None or not any(_compatible(mine, w) for w in wanted):
            return False
    return True


def param_values_match(calls: Sequence[dict], references: Sequence[dict], signature_text: str | None) -> bool:
    """`benchmark.param_corr=values`: whether some recorded call the API accepted passes the same
    argument values (reprs, bound with defaults applied) as some reference call."""
    signature = parse_signature(signature_text)
    wanted = [b for b in (bound_arguments(r, signature) for r in references) if b is not None]
    accepted = [c for c in calls if not c.get("rejected")]
    return any((b := bound_arguments(c, signature)) is not None and b in wanted for c in accepted)
