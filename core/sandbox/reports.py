"""Measurements a wrapper program reports beside the sandbox's verdict (call counts, a spy's record).

A wrapper run with ``Sandbox.run(..., channel=True)`` sends one record ``<tag> <json>`` through the
sandbox's report channel when its program ends: a pipe of its own, never stdout, whose lines the
server keeps only when they carry the run's token (in no program text).
``ExecutionResult.channel`` holds those records; the last one with the tag counts. The verdict
itself stays the sandbox's.
"""

from __future__ import annotations

import json
from typing import Any


def last_report(channel: str, tag: str) -> dict[str, Any] | None:
    """The last ``<tag> {...}`` record's JSON, or None when the run never sent one."""
    found = None
    for line in channel.splitlines():
        name, _, text = line.partition(" ")
        if name == tag:
            try:
                value = json.loads(text)
            except json.JSONDecodeError:
                value = None
            found = value if isinstance(value, dict) else None
    return found
