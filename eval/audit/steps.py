"""An audit's per-problem steps kept on disk as they finish, so an interrupted audit started again
redoes only what was not done (the HumanEvalFix audit in six languages takes 41 min on 2 cores).

`out/steps/<step>.jsonl` holds one line per problem, `{"id": ..., "row": ...}` (`row` null for a
problem the step has nothing to say about), appended chunk by chunk. `identity.json` records what the
rows depend on (the benchmark, its problems, the options, the limits); an audit with other settings
starts the steps over. The finished `audit.json` is rebuilt from them every time.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import shutil
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from core import batches
from core.problems import Problem
from core.progress import tqdm

log = logging.getLogger("eval.audit")
Rows = dict[str, dict[str, Any] | None]


class StepStore:
    """Rows of each step by problem id, read back from `folder` (None: kept in memory only)."""

    def __init__(self, folder: Path | None, identity: dict[str, Any]):
        self.folder = folder
        if folder is None:
            return
        marker = folder / "identity.json"
        if marker.is_file() and json.loads(marker.read_text()) != identity:
            log.warning("audit: %s was made with other settings; the steps start over", folder)
            shutil.rmtree(folder)
        folder.mkdir(parents=True, exist_ok=True)
        marker.write_text(json.dumps(identity, indent=2, sort_keys=True) + "\n")

    def done(self, step: str) -> Rows:
        path = self._path(step)
        if path is None or not path.is_file():
            return {}
        rows: Rows = {}
        for line in path.read_text().splitlines():
            try:
                record = json.loads(line)
            except json.JSONDecodeError:  # a line cut short by a kill: that chunk runs again
                break
            rows[record["id"]] = record["row"]
        return rows

    def add(self, step: str, rows: Rows) -> None:
        path = self._path(step)
        if path is None:
            return
        text = "".join(json.dumps({"id": pid, "row": row}) + "\n" for pid, row in rows.items())
        with path.open("a") as f:
            f.write(text)
            f.flush()

    def _path(self, step: str) -> Path | None:
        return None if self.folder is None else self.folder / f"{step}.jsonl"


def in_chunks(
    store: StepStore,
    step: str,
    problems: Sequence[Problem],
    work: Callable[[list[Problem]], Rows],
    size: int,
) -> dict[str, dict[str, Any]]:
    """`work` over the problems `step` has not done yet, `size` at a time through `run_missing`, each
    chunk kept as it ends; the rows of every problem (those with nothing to say left out)."""
    rows = store.done(step)
    todo = [p for p in problems if p.id not in rows]
    if rows and todo:
        log.info("audit %s: resuming, %d of %d problems done", step, len(problems) - len(todo), len(problems))

    def run(part: list[tuple[str, Problem]]) -> list[dict[str, Any] | None]:
        found = work([p for _, p in part])
        return [found.get(pid) for pid, _ in part]

    def keep(part: list[tuple[str, Problem]], found: Sequence[dict[str, Any] | None]) -> None:
        chunk = {pid: row for (pid, _), row in zip(part, found, strict=True)}
        store.add(step, chunk)
        rows.update(chunk)

    with tqdm(
        total=len(problems), initial=len(problems) - len(todo), desc=f"audit: {step}", unit="problem"
    ) as bar:
        # one chunk at a time: mutation's timeouts scale with runtimes measured on a quiet pool
        batches.run_missing(
            [(p.id, p) for p in problems],
            run,
            keep,
            rows,  # what an earlier run of this step finished is skipped
            label=f"audit {step}",
            progress=bar.update,
            chunk=size,
            in_flight=1,
        )
    return {p.id: row for p in problems if (row := rows.get(p.id)) is not None}


def identity(name: str, problems: Sequence[Problem], options: Any, limits: Any) -> dict[str, Any]:
    """What every step's rows depend on: the benchmark, its problems' text, the options, the limits."""
    digest = hashlib.sha256()
    for p in problems:
        digest.update(
            json.dumps([p.id, p.language, p.before, p.after, p.tests, p.prelude, p.helpers]).encode()
        )
    kept = {k: v for k, v in dataclasses.asdict(options).items() if k not in ("model_results", "classifier")}
    return {
        "benchmark": name,
        "problems": digest.hexdigest(),
        "options": kept,
        "limits": dataclasses.asdict(limits),
    }
