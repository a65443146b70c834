"""A deterministic generator of small Python edit examples.

The `tiny` recipes train on these on CPU: real before/after code pairs with natural
instructions (rename a function or a parameter, add a docstring, add type hints, guard
empty input, add a helper), in the edit-example contract. Same seed, same rows. Every
`before` and `after` parses, and every `after` differs from its `before`.
"""

from __future__ import annotations

import io
import random
import tokenize

_FUNCTIONS = [
    ("total", "values", "result = 0\n    for v in {arg}:\n        result += v\n    return result", "int"),
    (
        "largest",
        "values",
        "best = {arg}[0]\n    for v in {arg}:\n        if v > best:\n            best = v\n    return best",
        "int",
    ),
    ("count_even", "values", "return sum(1 for v in {arg} if v % 2 == 0)", "int"),
    ("reverse_text", "text", "return {arg}[::-1]", "str"),
    ("shout", "text", "return {arg}.upper() + '!'", "str"),
    ("squares", "values", "return [v * v for v in {arg}]", "list"),
    ("mean", "values", "return sum({arg}) / len({arg})", "float"),
    ("first_word", "text", "return {arg}.split()[0]", "str"),
    (
        "unique",
        "values",
        "seen = []\n    for v in {arg}:\n        if v not in seen:\n            seen.append(v)\n    return seen",
        "list",
    ),
    ("factorial", "n", "out = 1\n    for i in range(2, {arg} + 1):\n        out *= i\n    return out", "int"),
    ("is_palindrome", "text", "return {arg} == {arg}[::-1]", "bool"),
    ("clamp", "n", "return max(0, min({arg}, 100))", "int"),
]
_ARG_TYPES = {"values": "list[int]", "text": "str", "n": "int"}
_NEW_NAMES = {"values": "items", "text": "s", "n": "k"}


def _function(name: str, arg: str, body: str, annotate: bool = False, ret: str = "") -> str:
    signature = f"{arg}: {_ARG_TYPES[arg]}" if annotate else arg
    returns = f" -> {ret}" if annotate else ""
    return f"def {name}({signature}){returns}:\n    {body.format(arg=arg)}\n"


def rename_identifier(source: str, old: str, new: str) -> str:
    """`source` with every name token `old` replaced by `new`; strings, comments, attributes untouched.

    Token-aware, so renaming `n` leaves `min`, `range` and `return` alone.
    """
    tokens = list(tokenize.generate_tokens(io.StringIO(source).readline))
    names = {t.string for t in tokens if t.type == tokenize.NAME}
    if new in names:
        raise ValueError(f"cannot rename {old!r} to {new!r}: {new!r} is already used")
    lines = source.splitlines(keepends=True)
    previous = None
    hits = []
    for tok in tokens:
        if tok.type == tokenize.NAME and tok.string == old and not (previous and previous.string == "."):
            hits.append(tok.start)
        if tok.type not in (tokenize.NL, tokenize.NEWLINE, tokenize.COMMENT):
            previous = tok
    for row, col in reversed(hits):  # right to left, so earlier offsets stay valid
        line = lines[row - 1]
        lines[row - 1] = line[:col] + new + line[col + len(old) :]
    return "".join(lines)


def _edit(rng: random.Random) -> tuple[str, str, str]:
    name, arg, body, ret = rng.choice(_FUNCTIONS)
    before = _function(name, arg, body)
    kind = rng.randrange(6)
    if kind == 0:
        new = f"compute_{name}"
        return before, _function(new, arg, body), f"Rename the function {name} to {new}."
    if kind == 1:
        return before, _function(name, arg, body, annotate=True, ret=ret), f"Add type hints to {name}."
    if kind == 2:
        doc = f'"""Return the {name.replace("_", " ")} of {arg}."""\n    '
        return before, _function(name, arg, doc + body), f"Add a docstring to {name}."
    if kind == 3:
        new_arg = _NEW_NAMES[arg]
        after = rename_identifier(before, arg, new_arg)
        return before, after, f"Rename the parameter {arg} to {new_arg}."
    if kind == 4:
        empty = (
            "0" if ret in ("int", "float") else ("''" if ret == "str" else "[]" if ret == "list" else "True")
        )
        guard = f"if not {arg}:\n        return {empty}\n    "
        return before, _function(name, arg, guard + body), f"Return {empty} when {arg} is empty."
    helper = f"\n\ndef {name}_all(batches):\n    return [{name}(b) for b in batches]\n"
    return before, before + helper, f"Add a function {name}_all that applies {name} to every batch."


def synthetic_edits(n: int, seed: int = 0) -> list[dict]:
    """`n` edit examples (`id, before, after, instruction, lang, source`)."""
    rng = random.Random(seed)
    rows = []
    for i in range(n):
        before, after, instruction = _edit(rng)
        rows.append(
            {
                "id": f"synthetic-{i}",
                "before": before,
                "after": after,
                "instruction": instruction,
                "lang": "python",
                "source": "synthetic",
            }
        )
    return rows


_INPUTS = {"values": [3, 1, 4, 1, 5], "text": "level up", "n": 5}
_EMPTY = {"values": [], "text": "", "n": 0}


def _call(source: str, name: str, *args: object, **kwargs: object) -> tuple[bool, object]:
    """(whether it returned, what it returned or raised) for our own generated function."""
    namespace: dict[str, object] = {}
    exec(compile(source, "<synthetic>", "exec"), namespace)  # noqa: S102 - code this module wrote
    try:
        return True, namespace[name](*args, **kwargs)  # type: ignore[operator]
    except Exception as err:  # noqa: BLE001 - the before program may fail on the new input
        return False, type(err).__name__


def _task(rng: random.Random) -> tuple[str, str, str, str] | None:
    """(before, after, instruction, tests) of a toy edit whose tests the unedited code fails."""
    name, arg, body, ret = rng.choice(_FUNCTIONS)
    before = _function(name, arg, body)
    sample = _INPUTS[arg]
    kind = rng.choice(("rename_function", "rename_parameter", "guard", "batch"))
    if kind == "rename_function":
        new = f"compute_{name}"
        after = _function(new, arg, body)
        call, instruction = f"{new}({sample!r})", f"Rename the function {name} to {new}."
        expected = _call(after, new, sample)[1]
    elif kind == "rename_parameter":
        new_arg = _NEW_NAMES[arg]
        after = rename_identifier(before, arg, new_arg)
        call, instruction = f"{name}({new_arg}={sample!r})", f"Rename the parameter {arg} to {new_arg}."
        expected = _call(after, name, **{new_arg: sample})[1]
    elif kind == "guard":
        empty = (
            "0" if ret in ("int", "float") else ("''" if ret == "str" else "[]" if ret == "list" else "True")
        )
        after = _function(name, arg, f"if not {arg}:\n        return {empty}\n    " + body)
        call, instruction = f"{name}({_EMPTY[arg]!r})", f"Return {empty} when {arg} is empty."
        expected = _call(after, name, _EMPTY[arg])[1]
        if _call(before, name, _EMPTY[arg]) == (True, expected):
            return None  # the unedited function already does it: no test could tell them apart
    else:
        after = before + f"\n\ndef {name}_all(batches):\n    return [{name}(b) for b in batches]\n"
        call = f"{name}_all([{sample!r}, {sample!r}])"
        instruction = f"Add a function {name}_all that applies {name} to every batch."
        expected = [_call(before, name, sample)[1]] * 2
    return before, after, instruction, f"assert {call} == {expected!r}\n"


def synthetic_tasks(n: int, seed: int = 0) -> list[dict]:
    """`n` RL tasks in CanItEdit's schema (`id, name, before, after, instruction_descriptive,
    instruction_lazy, tests`): toy edits whose tests the reference passes and `before` fails."""
    rng = random.Random(seed)
    rows: list[dict] = []
    while len(rows) < n:
        made = _task(rng)
        if made is None:
            continue
        before, after, instruction, tests = made
        i = len(rows)
        rows.append(
            {
                "id": f"synthetic-{i}",
                "name": f"synthetic_{i}",
                "before": before,
                "after": after,
                "instruction_descriptive": instruction,
                "instruction_lazy": instruction,
                "tests": tests,
            }
        )
    return rows


def task_edits(n: int, seed: int = 0) -> list[dict]:
    """`synthetic_tasks` as SFT's edit examples (`id, before, after, instruction, lang, source`):
    the warm-up of the tiny RL recipe, on the family it is then rewarded on."""
    return [
        {
            "id": f"synthetic-task-{i}",
            "before": row["before"],
            "after": row["after"],
            "instruction": row["instruction_descriptive"],
            "lang": "python",
            "source": "synthetic-tasks",
        }
        for i, row in enumerate(synthetic_tasks(n, seed))
    ]
