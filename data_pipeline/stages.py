"""Resumable stage outputs: each stage's rows and counts, written atomically.

A stage writes `out/.stages/NN-name/` (a `save_to_disk` folder plus `stage.json`) into a
temporary folder first and renames it into place (an older version is renamed away before
it is removed), so a killed run leaves either a complete stage or none. A stage is reused only
when its fingerprint (its config, chained after the input's identity and every earlier
stage's) matches; a run started again after a crash therefore skips the finished stages and
redoes the rest. A stage folder that cannot be loaded (files deleted or damaged by hand) is
built again, with a warning.

One build at a time writes into an `out` folder: `claim_output` takes an exclusive lock on
`out/.lock` and then removes the temporaries a killed run left behind.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import logging
import os
import shutil
import time
from collections import Counter
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import xxhash
from datasets import Dataset, Features, load_from_disk

from core.errors import UserError

LOCK_FILE = ".lock"
STAGES_DIR = ".stages"
STATE_FILE = "state.json"
# What loading a damaged stage folder raises: missing or truncated files, stage.json of another shape.
_BROKEN_STAGE = (OSError, ValueError, KeyError, TypeError, AttributeError, pa.ArrowException)
log = logging.getLogger(__name__)


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


def top_reasons(dropped: dict[str, int], n: int = 3) -> str:
    """The largest drop counts as "12 bad_meta, 3 broken_json", for one-line messages."""
    return ", ".join(f"{count} {reason}" for reason, count in Counter(dropped).most_common(n)) or "none"


def split_by_reason(ds: Dataset, column: str = "drop_reason") -> tuple[Dataset, dict[str, int]]:
    """Rows whose `column` is empty, and the count of every other value; the column is removed."""
    if column not in ds.column_names:  # `map` never calls the function on an empty table
        return ds, {}
    reasons = Counter(r for r in ds[column] if r)
    kept = ds.filter(lambda r: not r, input_columns=column) if reasons else ds
    return kept.remove_columns(column), dict(sorted(reasons.items()))


def write_rows(rows: Iterable[dict[str, Any]], features: Features, path: Path) -> Dataset:
    """Stream rows into an Arrow file and memory-map it, so memory stays flat however many come."""
    from datasets.arrow_writer import ArrowWriter

    path.parent.mkdir(parents=True, exist_ok=True)
    with ArrowWriter(features=features, path=str(path)) as writer:
        for row in rows:
            writer.write(row)
        writer.finalize()
    return Dataset.from_file(str(path))


def save_rows(ds: Dataset, folder: Path) -> None:
    """`save_to_disk` that `load_from_disk` can read back at 0 rows (it would write no shard at all).

    `datasets` gives each run's table a random fingerprint and writes it to `state.json`; it is
    replaced by a hash of the saved rows, so the same rows give the same bytes, whether a build
    ran straight through or was killed and resumed.
    """
    ds.save_to_disk(str(folder), num_shards=None if len(ds) else 1)
    state_path = folder / STATE_FILE
    state = json.loads(state_path.read_text())
    state["_fingerprint"] = _files_hash([folder / f["filename"] for f in state["_data_files"]])
    state_path.write_text(json.dumps(state, indent=2, sort_keys=True))


def _files_hash(paths: list[Path]) -> str:
    digest = xxhash.xxh3_64()
    for path in paths:
        with path.open("rb") as fh:
            while chunk := fh.read(1 << 20):
                digest.update(chunk)
    return digest.hexdigest()


class OutputLock:
    """An exclusive `flock` on `out/.lock`: two builds writing into one folder would corrupt it.

    Released by `release()` (run_pipeline does so in a `finally`) or when the process ends.
    """

    def __init__(self, out: Path):
        self._fd = -1
        out.mkdir(parents=True, exist_ok=True)
        fd = os.open(out / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.read(fd, 32).decode(errors="replace").strip()
            os.close(fd)
            who = f"another build (pid {holder})" if holder.isdigit() else "another build"
            raise UserError(
                f"out={out}: {who} is writing into this folder; wait for it to finish or choose another out="
            ) from None
        os.ftruncate(fd, 0)
        os.write(fd, str(os.getpid()).encode())
        self._fd = fd

    def release(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


def claim_output(out: Path) -> OutputLock:
    """Lock `out` for this build; then every temporary in it is a killed run's leftover: remove them."""
    lock = OutputLock(out)
    for leftover in [*out.glob(".output.tmp-*"), *(out / STAGES_DIR).glob("*.tmp-*")]:
        shutil.rmtree(leftover) if leftover.is_dir() else leftover.unlink()
    return lock


class StageStore:
    def __init__(self, out: Path):
        self.root = out / STAGES_DIR
        self.root.mkdir(parents=True, exist_ok=True)

    def _dir(self, index: int, name: str) -> Path:
        return self.root / f"{index:02d}-{name}"

    def load(self, index: int, name: str, key: str) -> tuple[Dataset, StageResult] | None:
        """The stage's rows and counts if they were built with `key`; None means build it again."""
        folder = self._dir(index, name)
        meta_path = folder / "stage.json"
        if not meta_path.exists():
            return None
        try:
            meta = json.loads(meta_path.read_text())
            if meta.get("key") != key:
                return None
            result = StageResult(**meta["result"])
            rows = load_from_disk(str(folder / "rows"))  # reads every shard through: truncation fails here
        except _BROKEN_STAGE as err:
            log.warning("stage %s: %s cannot be loaded (%s); building it again", name, folder, err)
            return None
        return rows, result

    def save(self, index: int, name: str, key: str, ds: Dataset, result: StageResult) -> Dataset:
        result.check()
        final = self._dir(index, name)
        tmp = self._temporary(final)
        save_rows(ds, tmp / "rows")
        (tmp / "stage.json").write_text(json.dumps({"key": key, "result": asdict(result)}, indent=2))
        # An older version is renamed away, not removed in place: a kill never leaves its
        # stage.json beside half its rows.
        old = self._temporary(final)
        if final.exists():
            os.replace(final, old)
        os.replace(tmp, final)
        shutil.rmtree(old, ignore_errors=True)
        self.clear_after(index)
        return load_from_disk(str(final / "rows"))

    @staticmethod
    def _temporary(final: Path) -> Path:
        """A sibling name `claim_output` and `clear_after` remove if a killed run leaves it."""
        return final.with_name(f"{final.name}.tmp-{os.getpid()}-{time.monotonic_ns()}")

    def clear_after(self, index: int) -> None:
        """Later stages were built from an older version of this one: drop them."""
        for folder in self.root.iterdir():
            prefix = folder.name.split("-", 1)[0]
            if prefix.isdigit() and int(prefix) > index or ".tmp-" in folder.name:
                shutil.rmtree(folder, ignore_errors=True)
