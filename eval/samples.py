"""`samples.jsonl`: every generated sample, its execution and its coverage, appended as they happen.

One JSON record per line, keyed by (problem, split, index) and typed `sample`,
`execution` or `coverage`; a later record of a type replaces an earlier one. A job killed
mid-write leaves at most one broken last line, which loading drops, so a restarted run
regenerates and re-executes nothing it had finished.
"""

from __future__ import annotations

import json
import os
from collections import defaultdict
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

from core import batches
from core.batches import CHUNK, IN_FLIGHT

Key = tuple[str, str, int]
T = TypeVar("T")


class SampleStore:
    def __init__(self, path: Path):
        self.path = path
        self.records: dict[str, dict[Key, dict[str, Any]]] = defaultdict(dict)
        if path.exists():
            self._load()
        path.parent.mkdir(parents=True, exist_ok=True)
        self._fh = path.open("a", encoding="utf-8")

    def _load(self) -> None:
        raw = self.path.read_bytes()
        good_until = 0
        for line in raw.splitlines(keepends=True):
            try:
                record = json.loads(line)
            except (json.JSONDecodeError, UnicodeDecodeError):
                break  # a torn last line from a crash: drop it and everything after
            if line.endswith(b"\n"):
                good_until += len(line)
            self.records[record["type"]][(record["problem"], record["split"], record["index"])] = record
        if good_until < len(raw):
            os.truncate(self.path, good_until)

    def append(self, record: dict[str, Any]) -> None:
        line = json.dumps(record, ensure_ascii=False)
        try:
            line.encode("utf-8")
        except UnicodeEncodeError:  # a lone surrogate (a program's message, a server's \ud800)
            line = json.dumps(record)  # escaped, kept as it is
        self._fh.write(line + "\n")
        self._fh.flush()
        self.records[record["type"]][(record["problem"], record["split"], record["index"])] = record

    def of_type(self, kind: str) -> dict[Key, dict[str, Any]]:
        return self.records[kind]

    def count(self, problem: str, split: str) -> int:
        return sum(1 for p, s, _ in self.records["sample"] if p == problem and s == split)

    def close(self) -> None:
        self._fh.close()


def run_missing(
    store: SampleStore,
    record_type: str,
    todo: Sequence[tuple[Key, T]],
    work: Callable[[list[tuple[Key, T]]], Sequence[dict[str, Any]]],
    progress: Callable[[int], None] | None = None,
    chunk: int = CHUNK,
    in_flight: int = IN_FLIGHT,
) -> int:
    """`core.batches.run_missing` over the store: for each item whose key has no `record_type` record
    yet, `work` gives one record body per item and each is appended (typed and keyed) as soon as its
    chunk is done; a killed run redoes at most ``in_flight`` chunks. Returns how many ran."""

    def keep(part: list[tuple[Key, T]], bodies: Sequence[dict[str, Any]]) -> None:
        for (key, _), body in zip(part, bodies, strict=True):
            head = {"type": record_type, "problem": key[0], "split": key[1], "index": key[2]}
            store.append({**head, **body, **head})

    return batches.run_missing(
        todo,
        work,
        keep,
        store.of_type(record_type),
        label=record_type,
        progress=progress,
        chunk=chunk,
        in_flight=in_flight,
    )


IDENTITY_FILE = "samples.identity.json"


def check_identity(folder: Path, identity: dict[str, Any]) -> None:
    """Refuse to add to samples made under another configuration (another model, editor, sampling).

    The first run writes `identity`; a later run into the same folder must match it, else a
    UserError names the keys that differ (resuming, topping up n, or re-scoring are unaffected).
    """
    from core.errors import UserError

    path = folder / IDENTITY_FILE
    folder.mkdir(parents=True, exist_ok=True)
    if path.is_file():
        stored = json.loads(path.read_text())
        differ = sorted(k for k in set(stored) | set(identity) if stored.get(k) != identity.get(k))
        if differ:
            raise UserError(
                f"{folder} holds samples made with other settings ({', '.join(differ)} differ); "
                "use another out= or delete that folder"
            )
        return
    path.write_text(json.dumps(identity, indent=2, sort_keys=True) + "\n")
