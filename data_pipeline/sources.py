"""Raw rows from a configured source, each either a record or the reason it is unusable.

`iter_raw(cfg)` yields `(raw, "")` or `(None, reason)` one source row at a time, so a
broken JSON line, an undecodable file or a bad commit is counted and skipped, never fatal.
Hub datasets stream by default; local files are read in bounded chunks.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from core.hub import HUB_PREFIX, load_hub_dataset
from data_pipeline.config import SourceConfig
from data_pipeline.normalize import COMMITPACKFT_COLUMNS, normalize_row

Raw = tuple[dict[str, Any] | None, str]


def _jsonl(path: Path) -> Iterator[Raw]:
    with path.open("rb") as fh:
        for line in fh:
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except (UnicodeDecodeError, json.JSONDecodeError, RecursionError):
                yield None, "broken_json"
                continue
            yield (record, "") if isinstance(record, dict) else (None, "not_a_record")


def _parquet(path: Path) -> Iterator[Raw]:
    import pyarrow.parquet as pq

    for batch in pq.ParquetFile(str(path)).iter_batches(batch_size=1024):
        yield from ((row, "") for row in batch.to_pylist())


def _json(path: Path) -> Iterator[Raw]:
    try:
        records = json.loads(path.read_bytes())
    except (UnicodeDecodeError, json.JSONDecodeError):
        yield None, "broken_json"
        return
    for record in records if isinstance(records, list) else [records]:
        yield (record, "") if isinstance(record, dict) else (None, "not_a_record")


_READERS = {".jsonl": _jsonl, ".json": _json, ".parquet": _parquet}


def _files(paths: list[str]) -> Iterator[Raw]:
    for root in paths:
        root_path = Path(root)
        files = (
            sorted(p for p in root_path.rglob("*") if p.suffix in _READERS)
            if root_path.is_dir()
            else [root_path]
        )
        for path in files:
            reader = _READERS.get(path.suffix)
            if reader is None:
                raise ValueError(f"{path}: unsupported file type; use jsonl, json or parquet")
            yield from reader(path)


def _disk(paths: list[str]) -> Iterator[Raw]:
    import datasets

    for root in paths:
        if (Path(root) / "state.json").exists() or (Path(root) / "dataset_dict.json").exists():
            ds = datasets.load_from_disk(root)
            ds = ds["train"] if isinstance(ds, datasets.DatasetDict) else ds
            yield from ((row, "") for row in ds)
        else:
            yield from _files([root])


def _hub(cfg: SourceConfig) -> Iterator[Raw]:
    assert cfg.name is not None
    ds = load_hub_dataset(HUB_PREFIX + cfg.name, cfg.subset, cfg.split, "source.name", cfg.streaming)
    yield from ((row, "") for row in ds)


def _git(cfg: SourceConfig) -> Iterator[Raw]:
    from data_pipeline.git_source import GitMiningConfig, mine_repositories

    g = cfg.git
    mining = GitMiningConfig(
        first_parent=g.first_parent,
        multi_file=g.multi_file,
        extensions=tuple(g.extensions),
        max_file_bytes=g.max_file_bytes,
        include_merges=g.include_merges,
        max_commits=g.max_commits,
    )
    yield from mine_repositories(cfg.repos, mining)


def iter_raw(cfg: SourceConfig) -> Iterator[Raw]:
    """Every raw row of the source (up to `cfg.limit`)."""
    rows = {
        "hub": lambda: _hub(cfg),
        "files": lambda: _files(cfg.paths),
        "disk": lambda: _disk(cfg.paths),
        "git": lambda: _git(cfg),
    }[cfg.kind]()
    for i, item in enumerate(rows):
        if cfg.limit is not None and i >= cfg.limit:
            return
        yield item


def source_label(cfg: SourceConfig) -> str:
    if cfg.kind == "hub":
        return f"{cfg.name}/{cfg.subset}" if cfg.subset else str(cfg.name)
    return cfg.kind


def iter_records(cfg: SourceConfig) -> Iterator[tuple[dict | None, str]]:
    """Rows in the edit-example contract, or `(None, reason)`; one item per raw row."""
    columns = dict(cfg.columns) or (COMMITPACKFT_COLUMNS if cfg.kind in ("hub", "files") else {})
    label = source_label(cfg)
    for index, (raw, reason) in enumerate(iter_raw(cfg)):
        if raw is None:
            yield None, reason
            continue
        yield normalize_row(raw, columns, label, index, max_bytes=cfg.max_bytes, lang=cfg.lang)
