"""What a build read, so that a changed input reruns the source stage and every stage after it.

Stages are reused when their fingerprint matches; the config alone does not change when a
file grows or a branch moves, so `run_pipeline` seeds the source stage's fingerprint with
`input_identity(cfg.source)`:

- files / disk: every file the source reads (the reader's own discovery, in reading order)
  with its path, size and an xxh3-64 hash of its bytes. Content alone decides: a `touch`, a
  copy or a checkout that leaves the bytes as they were reuses the stages, and an edit that
  keeps size and mtime reruns them;
- hub: name, subset and split, plus the dataset's revision sha when the hub answers
  (offline it is left out, never waited for);
- git: the commit each mined ref resolves to in every repository.

`identity_summary` is the short form `manifest.json` records.
"""

from __future__ import annotations

import json
import logging
from functools import cache, lru_cache
from pathlib import Path
from typing import Any

import xxhash

from core.errors import UserError
from core.hub import hub_offline
from data_pipeline.config import SourceConfig
from data_pipeline.sources import source_files

CHUNK_BYTES = 1 << 20
log = logging.getLogger(__name__)


def input_identity(cfg: SourceConfig) -> dict[str, Any]:
    """Everything about the source's input that the config does not say (see the module docstring)."""
    if cfg.kind in ("files", "disk"):
        return {"kind": cfg.kind, "files": [_file_identity(path) for path in source_files(cfg)]}
    if cfg.kind == "hub":
        return _hub_identity(cfg)
    if cfg.kind == "tree":  # folders (their files, hashed) and archives
        files = [
            p for raw in cfg.paths for p in ([Path(raw)] if Path(raw).is_file() else _tree_files(Path(raw)))
        ]
        return {"kind": "tree", "files": [_file_identity(path) for path in files]}
    if cfg.kind == "benchmark":
        paths = [Path(str(getattr(b, "path", None) or b["path"])) for b in cfg.benchmarks]
        files = [p for path in paths for p in ([path] if path.is_file() else sorted(path.rglob("*")))]
        return {"kind": "benchmark", "files": [_file_identity(p) for p in files if p.is_file()]}
    if cfg.kind == "pypi":  # a pinned version names its sdist; an unpinned one is as the index says today
        return {"kind": "pypi", "packages": sorted(cfg.packages)}
    return {"kind": "git", "heads": _git_heads(cfg)}


def _tree_files(root: Path) -> list[Path]:
    """The files a fix-task build reads from a folder (its .py files, as `units.python_files`)."""
    from data_pipeline.fix_tasks.units import python_files

    return python_files(root)


def identity_summary(identity: dict[str, Any]) -> dict[str, Any]:
    """File count, total bytes and one combined hash; hub and git identities are short already."""
    if "files" not in identity:
        return identity
    files = identity["files"]
    listing = json.dumps([[f["path"], f["size"], f["xxh3"]] for f in files]).encode()
    return {
        "kind": identity["kind"],
        "files": len(files),
        "bytes": sum(f["size"] for f in files),
        "xxh3": xxhash.xxh3_64_hexdigest(listing),
    }


def _file_identity(path: Path) -> dict[str, Any]:
    """Path, size and content hash; a file that cannot be read (or vanished) is "unreadable"."""
    try:  # the reader reports it (a dropped file, or an error for a named one)
        stat = path.stat()
        digest = _content_hash(str(path), stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns, stat.st_ino)
    except OSError:
        return {"path": str(path), "size": 0, "xxh3": "unreadable"}
    return {"path": str(path), "size": stat.st_size, "xxh3": digest}


@lru_cache(maxsize=1 << 16)
def _content_hash(path: str, size: int, mtime_ns: int, ctime_ns: int, inode: int) -> str:
    """xxh3-64 of the bytes, streamed; the stat fields in the key let one process hash a file once.

    ctime and inode are there because mtime can be set back: a write, a `touch -d` or a
    replacing rename changes one of them, so a file edited in place is hashed again.
    """
    digest = xxhash.xxh3_64()
    with open(path, "rb") as fh:
        while chunk := fh.read(CHUNK_BYTES):
            digest.update(chunk)
    return digest.hexdigest()


def _hub_identity(cfg: SourceConfig) -> dict[str, Any]:
    identity: dict[str, Any] = {"kind": "hub", "name": cfg.name, "subset": cfg.subset, "split": cfg.split}
    revision = None if hub_offline() else _hub_revision(str(cfg.name))
    if revision:
        identity["revision"] = revision
    return identity


@cache
def _hub_revision(name: str) -> str | None:
    """The dataset's current commit on the hub; None when the hub will not say (gated, renamed, flaky)."""
    from huggingface_hub import HfApi

    try:
        return HfApi().dataset_info(name, timeout=10).sha
    except Exception as err:  # any failure only leaves the revision out of the fingerprint
        log.info("hub revision of %s unknown (%s): the fingerprint uses name, subset and split", name, err)
        return None


def _git_heads(cfg: SourceConfig) -> dict[str, dict[str, str]]:
    from data_pipeline.git_source import repo_heads

    try:
        return repo_heads(cfg.repos, cfg.git.refs)
    except ValueError as err:  # GitSourceError: a repository or ref that names no commit
        raise UserError(f"source.repos / source.git.refs: {err}") from err
