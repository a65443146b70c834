"""Resumable stage outputs: each stage's rows and counts, written atomically.

A stage writes `out/.stages/NN-name/` (a `save_to_disk` folder plus `stage.json`) into a
temporary folder first and renames it into place, so a killed run leaves either a complete
stage or none. A stage is reused only when its config fingerprint matches; a run started
again after a crash therefore skips the finished stages and redoes the rest.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from datasets import Dataset, load_from_disk


@dataclass
class StageResult:
    name: str
    input: int
    kept: int
    dropped: dict[str, int] = field(default_factory=dict)
    seconds: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict)

    def check(self) -> None:
        total = self.kept + sum(self.dropped.values())
        if total != self.input:
            raise AssertionError(f"stage {self.name}: {self.input} rows in, {total} accounted for")


def fingerprint(*parts: Any) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:16]


def split_by_reason(ds: Dataset, column: str = "drop_reason") -> tuple[Dataset, dict[str, int]]:
    """Rows whose `column` is empty, and the count of every other value; the column is removed."""
    reasons = Counter(r for r in ds[column] if r)
    kept = ds.filter(lambda r: not r, input_columns=column) if reasons else ds
    return kept.remove_columns(column), dict(sorted(reasons.items()))


class StageStore:
    def __init__(self, out: Path):
        self.root = out / ".stages"
        self.root.mkdir(parents=True, exist_ok=True)

    def _dir(self, index: int, name: str) -> Path:
        return self.root / f"{index:02d}-{name}"

    def load(self, index: int, name: str, key: str) -> tuple[Dataset, StageResult] | None:
        folder = self._dir(index, name)
        meta_path = folder / "stage.json"
        if not meta_path.exists():
            return None
        meta = json.loads(meta_path.read_text())
        if meta.get("key") != key:
            return None
        return load_from_disk(str(folder / "rows")), StageResult(**meta["result"])

    def save(self, index: int, name: str, key: str, ds: Dataset, result: StageResult) -> Dataset:
        result.check()
        final = self._dir(index, name)
        tmp = final.with_name(f"{final.name}.tmp-{os.getpid()}-{time.monotonic_ns()}")
        ds.save_to_disk(str(tmp / "rows"))
        (tmp / "stage.json").write_text(json.dumps({"key": key, "result": asdict(result)}, indent=2))
        if final.exists():
            shutil.rmtree(final)
        os.replace(tmp, final)
        self.clear_after(index)
        return load_from_disk(str(final / "rows"))

    def clear_after(self, index: int) -> None:
        """Later stages were built from an older version of this one: drop them."""
        for folder in self.root.iterdir():
            prefix = folder.name.split("-", 1)[0]
            if prefix.isdigit() and int(prefix) > index or ".tmp-" in folder.name:
                shutil.rmtree(folder, ignore_errors=True)
