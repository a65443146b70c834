"""Measurements a program wrapper prints beside the sandbox's verdict (call counts, a spy's record).

A wrapper writes one line `@@<tag> <token> <json>` to fd 1 when its program ends; the token is
chosen per run by the host, and the last line with it counts (the program's own output, or a
line it forged with another token, does not). The verdict itself stays the sandbox's.
"""

from __future__ import annotations

import json
import re
from typing import Any


def last_report(stdout: str, tag: str, token: str) -> dict[str, Any] | None:
    """The last `@@<tag> <token> {...}` line's JSON, or None when the run never printed one."""
    found = None
    for match in re.finditer(rf"^@@{re.escape(tag)} (\S+) (\{{.*\}})$", stdout, re.MULTILINE):
        if match.group(1) == token:
            try:
                found = json.loads(match.group(2))
            except json.JSONDecodeError:
                found = None
    return found
