"""Problems no model solves, from the folders `python -m eval.run` wrote (`model_results=[DIR,...]`).

For each unsolved problem, the likely cause, first that applies: `reference_fails` (the audit's
own validity run; with the reference's own cause in brackets when one of the patterns below
matches its error, e.g. `reference_fails (missing_dependency)`), `missing_dependency` (a ModuleNotFoundError in the models' failures),
`needs_network` (socket, DNS or HTTP errors), `needs_files` (FileNotFoundError, PermissionError),
`timeout` (most failing runs hit the time limit), else `unknown`. Where the reference fails but
some model's output passes, that output is offered as a recovered reference.
"""

from __future__ import annotations

import json
import re
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

from core.errors import UserError

CAUSES = (
    ("missing_dependency", re.compile(r"ModuleNotFoundError|No module named")),
    (
        "needs_network",
        re.compile(r"socket\.gaierror|URLError|ConnectionError|ConnectionRefused|Name or service"),
    ),
    ("needs_files", re.compile(r"FileNotFoundError|PermissionError|No such file or directory")),
)


def read_results(folders: list[str]) -> dict[str, dict[str, list[dict]]]:
    """model folder -> problem id -> its execution records (with the sample's code)."""
    found: dict[str, dict[str, list[dict]]] = {}
    for folder in folders:
        path = Path(folder) / "samples.jsonl"
        if not path.is_file():
            raise UserError(
                f"model_results: {path} does not exist; give folders written by python -m eval.run"
            )
        samples, runs = {}, defaultdict(list)
        for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                continue  # a torn last line
            if not isinstance(record, dict):
                raise UserError(f"model_results: {path} holds a line that is not a record; is it eval.run's?")
            key = (record.get("problem"), record.get("split"), record.get("index"))
            if record.get("type") == "sample":
                samples[key] = record.get("code", "")
            elif record.get("type") == "execution":
                runs[key] = record
        per_problem: dict[str, list[dict]] = defaultdict(list)
        for key, record in runs.items():
            per_problem[str(key[0])].append({**record, "code": samples.get(key, "")})
        found[str(folder)] = dict(per_problem)
    return found


def unsolved(results: dict[str, dict[str, list[dict]]], validity: dict[str, dict]) -> dict[str, Any]:
    problems = {pid for per in results.values() for pid in per}
    solved = {
        pid for per in results.values() for pid, runs in per.items() if any(r.get("passed") for r in runs)
    }
    rows = {}
    for pid in sorted(problems - solved):
        runs = [r for per in results.values() for r in per.get(pid, [])]
        rows[pid] = {
            "cause": _cause(pid, runs, validity),
            "models": sum(pid in per for per in results.values()),
        }
    recovered = {}
    for pid, check in validity.items():
        if not check.get("pass_after"):
            passing = [
                r["code"]
                for per in results.values()
                for r in per.get(pid, [])
                if r.get("passed") and r["code"]
            ]
            if passing:
                recovered[pid] = passing[0]
    return {
        "models": list(results),
        "problems_seen": len(problems),
        "unsolved": rows,
        "causes": dict(Counter(r["cause"] for r in rows.values())),
        "recovered_references": recovered,
    }


def _cause(pid: str, runs: list[dict], validity: dict[str, dict]) -> str:
    check = validity.get(pid, {})
    if check.get("pass_after") is False:
        why = next((c for c, pattern in CAUSES if pattern.search(check.get("reference_error") or "")), None)
        return f"reference_fails ({why})" if why else "reference_fails"
    text = "\n".join(f"{r.get('detail', '')}\n{r.get('stderr', '')}" for r in runs)
    for cause, pattern in CAUSES:
        if pattern.search(text):
            return cause
    statuses = Counter(r.get("status") for r in runs)
    if runs and statuses["timeout"] > len(runs) / 2:
        return "timeout"
    return "unknown"
