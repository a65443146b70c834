"""The catalogue of synthetic API modifications: five types, each with its new signature and behaviour.

| type | what changes | the old call under the new API |
|---|---|---|
| R1 | renamed (`math.sqrt` -> `math.square_root`) | gone: NameError / AttributeError / ImportError |
| S1 | an optional keyword `validate=False` (True: TypeError if an argument is None) | still valid use |
| S2 | a required keyword `errors`: "raise" (as before) or "return_none" (None instead of raising) | TypeError: missing argument |
| S3 | two positional parameters swapped | runs with swapped arguments: flagged as old use by argument roles |
| S4 | returns a tuple whose `[0]` is the old result (`s4_form=value`: a strict `<Name>Result` read through `.value`) | any other use raises TypeError |

An API is modifiable when it is a function (or one of the builtin types used only as calls,
such as `range`) whose signature is known: from `inspect`, or written out below for the
builtins that have none. S3 needs two positional parameters whose values can be told apart
(a callable and an iterable; a value and a class; an existing path and a destination), so a call
in the old order is recognised.
"""

from __future__ import annotations

import builtins
import importlib
import inspect
import keyword
from dataclasses import replace
from typing import Any

from core.benchmarks.apiupdate import Modification
from core.signatures import Parameter, Signature

TYPES = ("R1", "S1", "S2", "S3", "S4")
TYPE_NAMES = {
    "R1": "rename",
    "S1": "add optional parameter",
    "S2": "add required parameter",
    "S3": "reorder parameters",
    "S4": "change return type",
}
S1_PARAM, S2_PARAM = "validate", "errors"
# Builtins without an introspectable signature (defaults are placeholders: only arity matters).
SIGNATURES = {
    "builtins.range": "(start_or_stop, stop=None, step=None, /)",
    "builtins.max": "(*args, key=None, default=None)",
    "builtins.min": "(*args, key=None, default=None)",
    "builtins.zip": "(*iterables, strict=False)",
    "builtins.map": "(function, iterable, /, *iterables)",
    "builtins.filter": "(function, iterable, /)",
    "builtins.iter": "(obj, sentinel=None, /)",
    "builtins.next": "(iterator, default=None, /)",
    "builtins.getattr": "(obj, name, default=None, /)",
    "builtins.vars": "(obj=None, /)",
    "builtins.dir": "(obj=None, /)",
    "sys.getsizeof": "(obj, default=None, /)",
    "sqlite3.connect": (
        "(database, timeout=None, detect_types=None, isolation_level=None, check_same_thread=None, "
        "factory=None, cached_statements=None, uri=None)"
    ),
}
# Builtin types that programs call like functions and practically never use as types.
CALLABLE_TYPES = frozenset(
    f"builtins.{n}" for n in ("range", "enumerate", "zip", "map", "filter", "reversed")
)
# Calls with effects outside the program, or that are the language rather than a library.
EXCLUDED = frozenset(
    f"builtins.{n}"
    for n in ("print", "input", "open", "exit", "quit", "help", "breakpoint", "__import__", "super", "exec")
)
# Builtins that read the caller's frame: a wrapper in between would change what they see.
FRAME_DEPENDENT = frozenset(f"builtins.{n}" for n in ("eval", "vars", "dir", "locals", "globals"))
# S3: the positional roles (old order) of the two swapped parameters.
S3_ROLES = {
    "builtins.isinstance": ("not_classinfo", "classinfo"),
    "builtins.issubclass": ("not_classinfo", "classinfo"),
    "builtins.filter": ("callable_or_none", "iterable"),
    "builtins.map": ("callable", "iterable"),
    "functools.reduce": ("callable", "iterable"),
    "itertools.starmap": ("callable", "iterable"),
    "itertools.filterfalse": ("callable_or_none", "iterable"),
    "itertools.takewhile": ("callable", "iterable"),
    "itertools.dropwhile": ("callable", "iterable"),
    "shutil.move": ("existing_path", "path"),  # App. B's S3
}
# R1: new names that read like a real rename; anything else becomes `<name>_v2`.
RENAMES = {
    "len": "length",
    "range": "int_range",
    "sum": "total",
    "sorted": "sort_items",
    "max": "maximum",
    "min": "minimum",
    "abs": "absolute",
    "enumerate": "enumerate_items",
    "ord": "code_point",
    "chr": "from_code_point",
    "zip": "zip_items",
    "isinstance": "is_instance",
    "issubclass": "is_subclass",
    "filter": "filter_items",
    "map": "map_items",
    "round": "round_number",
    "bin": "to_binary",
    "hex": "to_hex",
    "oct": "to_octal",
    "all": "all_true",
    "any": "any_true",
    "reversed": "reverse_items",
    "divmod": "div_mod",
    "pow": "power",
    "hash": "hash_value",
    "sqrt": "square_root",
    "ceil": "ceiling",
    "floor": "floor_value",
    "split": "split_pattern",
    "md5": "md5_digest",
    "sha256": "sha256_digest",
    "gcd": "greatest_common_divisor",
    "factorial": "factorial_of",
    "getpid": "get_process_id",
    "cpu_count": "count_cpus",
    "connect": "open_connection",
    "move": "move_path",
    "getrecursionlimit": "get_recursion_limit",
    "getsizeof": "size_of",
    "compress": "compress_bytes",
}


def resolve(api: str) -> Any:
    """The object `api` names (`math.sqrt`), imported; ImportError/AttributeError if none."""
    module, _, name = api.rpartition(".")
    return getattr(importlib.import_module(module), name)


def signature_text(api: str) -> str | None:
    """The API's parameter list as source text, defaults replaced by None; None if unknown."""
    if api in SIGNATURES:
        return SIGNATURES[api]
    try:
        sig = inspect.signature(resolve(api))
    except (ValueError, TypeError, ImportError, AttributeError):
        return None
    params = [
        p.replace(default=None if p.default is not p.empty else p.empty, annotation=p.empty)
        for p in sig.parameters.values()
    ]
    return str(sig.replace(parameters=params, return_annotation=sig.empty))


def modifiable(api: str) -> str | None:
    """None when `api` can be modified, else the reason it cannot."""
    if api in EXCLUDED:
        return "excluded"
    if api in FRAME_DEPENDENT:
        return "frame_dependent"
    try:
        obj = resolve(api)
    except (ImportError, AttributeError):
        return "not_found"
    if isinstance(obj, type) and api not in CALLABLE_TYPES:
        return "is_a_type"
    if not callable(obj):
        return "not_callable"
    if signature_text(api) is None:
        return "no_signature"
    return None


def _with_keyword(signature: str, param: str, default: bool) -> str:
    sig = Signature.from_text(signature)
    new = Parameter(param, inspect.Parameter.KEYWORD_ONLY, default="False" if default else None)
    params = sig.parameters
    at = next((i for i, p in enumerate(params) if p.kind == inspect.Parameter.VAR_KEYWORD), len(params))
    return str(replace(sig, parameters=(*params[:at], new, *params[at:])))


def _swapped(signature: str) -> str:
    sig = Signature.from_text(signature)
    a, b, *rest = sig.parameters
    kind = min(a.kind, b.kind)
    swapped = (replace(b, kind=kind, default=a.default), replace(a, kind=kind, default=b.default))
    return str(replace(sig, parameters=(*swapped, *rest)))


def _free_name(preferred: str, taken: set[str]) -> str:
    name = preferred
    while name in taken or keyword.iskeyword(name):
        name += "_"
    return name


def modifications(api: str, s4_form: str = "tuple") -> list[Modification]:
    """Every modification type that applies to `api` (empty when it cannot be modified); S4's
    result is a tuple read through `[0]` (the study's) or, with `s4_form="value"`, `.value`."""
    if modifiable(api) is not None:
        return []
    module, _, name = api.rpartition(".")
    old_sig = signature_text(api)
    assert old_sig is not None
    params = {p.name for p in Signature.from_text(old_sig).parameters}
    taken = set(dir(builtins)) | set(dir(importlib.import_module(module)))
    common = dict(api=api, module=module, name=name, old_signature=old_sig)
    found = [
        Modification(
            type="R1",
            new_name=_free_name(RENAMES.get(name, f"{name}_v2"), taken),
            signature=old_sig,
            **common,
        ),
        Modification(
            type="S1",
            new_name=name,
            signature=_with_keyword(old_sig, _free_name(S1_PARAM, params), True),
            param=_free_name(S1_PARAM, params),
            **common,
        ),
        Modification(
            type="S2",
            new_name=name,
            signature=_with_keyword(old_sig, _free_name(S2_PARAM, params), False),
            param=_free_name(S2_PARAM, params),
            **common,
        ),
    ]
    if api in S3_ROLES:
        found.append(
            Modification(
                type="S3",
                new_name=name,
                signature=_swapped(old_sig),
                swap=(0, 1),
                roles=S3_ROLES[api],
                **common,
            )
        )
    camel = "".join(part.capitalize() for part in name.split("_"))
    found.append(
        Modification(
            type="S4",
            new_name=name,
            signature=old_sig,
            result_name=f"{camel}Result",
            result_form=s4_form,
            **common,
        )
    )
    return found


def unmodified(api: str) -> Modification:
    """The API as it is, with its calls counted (the pre-edit environment)."""
    module, _, name = api.rpartition(".")
    sig = signature_text(api) or "(*args, **kwargs)"
    return Modification(
        api=api, type="none", module=module, name=name, new_name=name, signature=sig, old_signature=sig
    )
