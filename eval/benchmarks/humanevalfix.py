"""HumanEvalFix (HumanEvalPack): fix the bug in a function, in six languages.

The mapping into the CanItEdit contract: before = declaration + buggy solution, after =
declaration + canonical solution, tests = the language's test code (Python: plus
`check(entry_point)`), instruction = "Fix bugs in {entry_point}." (OctoPack's). Splits are
languages. Reads `<path>/<lang>.jsonl` (HumanEvalPack's layout) or the hub's
`bigcode/humanevalpack`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from eval.problems import BenchmarkError, Problem, check_unique, read_jsonl

HUB_ID = "bigcode/humanevalpack"
FIELDS = ("task_id", "declaration", "buggy_solution", "canonical_solution", "test", "entry_point")


def _join(declaration: str, solution: str) -> str:
    """declaration + solution, minus lines the declaration already holds (CPP/38's declaration
    ends with the first lines of the function body, which the solutions repeat)."""
    head = declaration.rstrip("\n").split("\n")
    body = [line.strip() for line in solution.split("\n")]
    for k in range(min(len(head), len(body)) - 1, 1, -1):
        if [line.strip() for line in head[-k:]] == body[:k] and any(body[:k]):
            return "\n".join(head[:-k]) + "\n" + solution
    return declaration + solution


def problem_from_humanevalpack(record: dict[str, Any], language: str, where: str) -> Problem:
    for key in FIELDS:
        if not isinstance(record.get(key), str):
            raise BenchmarkError(f"{where}: problem {record.get('task_id', '?')!r} lacks text field {key!r}")
    tests = record["test"]
    if language == "python":
        tests = f"{tests}\n\ncheck({record['entry_point']})\n"
    return Problem(
        id=record["task_id"],
        name=record["task_id"].replace("/", "_"),
        before=_join(record["declaration"], record["buggy_solution"]),
        after=_join(record["declaration"], record["canonical_solution"]),
        tests=tests,
        instructions={language: f"Fix bugs in {record['entry_point']}."},
        language=language,
        taxonomy={"bug_type": record.get("bug_type"), "failure_symptoms": record.get("failure_symptoms")},
        extra={"entry_point": record["entry_point"]},
    )


def load_humanevalfix(path: str | None, languages: list[str]) -> list[Problem]:
    problems: list[Problem] = []
    for language in languages:
        if path is not None:
            file = Path(path) / f"{language}.jsonl" if Path(path).is_dir() else Path(path)
            records = read_jsonl(file)
        else:
            import datasets

            try:
                ds = datasets.load_dataset(HUB_ID, language, split="test")
            except Exception as err:
                raise BenchmarkError(
                    f"could not load {HUB_ID}:{language} from the hub ({err}); pass benchmark.path=FOLDER "
                    "holding <language>.jsonl files"
                ) from err
            records = [(f"{HUB_ID}:{language}[{i}]", dict(r)) for i, r in enumerate(ds)]
        problems += [problem_from_humanevalpack(r, language, where) for where, r in records]
    return check_unique(problems, path or HUB_ID)
