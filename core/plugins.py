"""Plugins: the objects installed packages declare under an entry-point group (benchmark kinds,
generation backends, languages), loaded once per process into the registry that asks."""

from __future__ import annotations

import threading
from collections.abc import Callable
from importlib.metadata import entry_points
from typing import Any

from core.errors import ConfigError


class EntryPoints:
    """One entry-point group: each entry names an object whose `name` is the entry's name.

    `load(register)` registers them on its first call, thread-safely: the execute stage's threads
    may ask at once, and none returns before the others are registered. A plugin's own import that
    asks again (in the loading thread) returns at once."""

    def __init__(self, group: str, what: str) -> None:
        self.group, self.what = group, what
        self.done = False
        self._lock = threading.RLock()

    def load(self, register: Callable[[Any], Any], skip: Callable[[str], bool] = lambda name: False) -> None:
        """Register every entry's object (but those `skip` names) with `register`, once."""
        with self._lock:
            if self.done:
                return
            self.done = True
            for entry in entry_points(group=self.group):
                if skip(entry.name):
                    continue
                found = entry.load()
                if getattr(found, "name", None) != entry.name:
                    raise ConfigError(
                        f"entry point {entry.name} = {entry.value} is not {self.what} named {entry.name!r}"
                    )
                register(found)
