"""Bring raw rows from any source into the edit-example contract, or name why not.

Sources hand us rows with other column names (CommitPackFT: old_contents, new_contents,
subject, message, ...), fields that may be None, bytes that may not decode, binary blobs
or enormous files, and JSON accepts what Arrow cannot store (a lone surrogate such as
"\\ud800", a `meta` that is a number or a list). `normalize_row` maps and checks one row; it
never raises on bad data.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

CONTRACT = ("id", "before", "after", "instruction", "lang", "source", "meta")
REQUIRED = ("before", "after", "instruction")
COMMITPACKFT_COLUMNS = {
    "old_contents": "before",
    "new_contents": "after",
    "subject": "instruction",
    "commit": "commit",
}
_SURROGATE = re.compile(r"[\ud800-\udfff]")


def _text(value: Any, max_bytes: int) -> tuple[str | None, str]:
    if value is None:
        return None, "missing_field"
    if isinstance(value, (bytes, bytearray)):
        if len(value) > max_bytes:
            return None, "oversized"
        if b"\x00" in value:
            return None, "binary"
        try:
            value = bytes(value).decode("utf-8")
        except UnicodeDecodeError:
            return None, "not_utf8"
    if not isinstance(value, str):
        return None, "wrong_type"
    if len(value) > max_bytes:  # characters >= bytes/4, so this bounds memory either way
        return None, "oversized"
    if "\x00" in value:
        return None, "binary"
    return value, ""


def normalize_row(
    raw: Mapping[str, Any] | Any,
    columns: Mapping[str, str],
    source: str,
    index: int,
    max_bytes: int = 1_000_000,
    lang: str = "python",
) -> tuple[dict | None, str]:
    """(row, "") for a usable row, (None, reason) otherwise."""
    if not isinstance(raw, Mapping):
        return None, "not_a_record"
    mapped = {columns.get(key, key): value for key, value in raw.items()}
    row: dict[str, Any] = {}
    for field in REQUIRED:
        if field not in mapped:
            return None, "missing_field"
        text, reason = _text(mapped[field], max_bytes)
        if text is None:
            return None, reason
        row[field] = text
    row["instruction"] = row["instruction"].strip().splitlines()[0] if row["instruction"].strip() else ""
    if mapped.get("id"):  # already in the contract (built folders, git mining)
        row["id"] = str(mapped["id"])
    elif mapped.get("commit"):
        row["id"] = f"{source}:{mapped['commit']}:{mapped.get('new_file', '')}"
    else:
        row["id"] = f"{source}:{index}"
    row["lang"] = str(mapped.get("lang") or lang).lower()
    row["source"] = str(mapped.get("source") or source)
    extra = {k: v for k, v in mapped.items() if k not in (*CONTRACT, "commit") and _jsonable(v)}
    meta = _meta(mapped.get("meta"), extra)
    if meta is None:
        return None, "bad_meta"
    row["meta"] = meta
    if any(_has_lone_surrogate(row[field]) for field in CONTRACT):
        return None, "lone_surrogate"
    return row, ""


def _meta(meta: Any, extra: dict[str, Any]) -> str | None:
    """`meta` as JSON object text, or None: a number, a list or unserialisable values are no object."""
    if isinstance(meta, str):
        try:
            return meta if isinstance(json.loads(meta), dict) else None
        except (json.JSONDecodeError, RecursionError):
            return None
    if meta is not None and not isinstance(meta, Mapping):
        return None
    try:  # ASCII output: surrogates and other odd characters become escapes Arrow can store
        return json.dumps({**(meta or {}), **extra}, sort_keys=True)
    except (TypeError, ValueError, RecursionError):
        return None


def _has_lone_surrogate(text: str) -> bool:
    """JSON decodes "\\ud800" into a str that UTF-8, and so Arrow, cannot encode."""
    return not text.isascii() and _SURROGATE.search(text) is not None


def _jsonable(value: Any) -> bool:
    return isinstance(value, (str, int, float, bool)) and (not isinstance(value, str) or len(value) < 10_000)
