"""Errors a user can fix: the entry points print them as one line and exit 2, without a traceback.

Raise `UserError` (or a subclass) for an expected mistake: a bad path, an unknown key, a value
out of range, a missing benchmark file or package. Its message says what was wrong and what
to do. Anything else is a bug and keeps its traceback.
"""

from __future__ import annotations


class UserError(Exception):
    """An expected mistake of the user; the message names it and the fix."""


class ConfigError(UserError, ValueError):
    """A configuration value is wrong; the message names the key and the fix."""
