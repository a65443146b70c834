"""Coverage of a passing program, measured as CanItEdit measures it (coverage.py, its .coveragerc).

What it guarantees: the collector is configured and warmed up once per server, before any fork, so
a measured run pays only for tracing; the lines sent back are main.py's statements, exclusions and
missed lines as coverage.py's own report computes them; what a run sends is parsed as untrusted
data (anything malformed is "no readable coverage", never a crash). Standard library plus
coverage.py, imported by the servers that trace in-process runs and by the host (the analysis of a
split run's lines: line_probes.measured_coverage), whose coverage.py no run's process ever holds.
"""

from __future__ import annotations

import functools
import json
import os

# CanItEdit's benchmark/.coveragerc adds this to coverage.py's default exclusion ("pragma: no cover").
COVERAGE_EXCLUDE = r"@(abc\.)?abstractmethod"


def prepared_coverage(work_dir: str):
    """A coverage.py collector configured as CanItEdit's .coveragerc, started and stopped once
    here, and a parse with its exclusions, so that set-up and the parser's regular expressions
    are ready before the fork instead of costing every run."""
    import coverage
    from coverage.misc import join_regex

    collector = coverage.Coverage(data_file=None, config_file=False)
    collector.exclude(COVERAGE_EXCLUDE)
    collector.start()
    collector.stop()
    # our own attribute on the collector: the exclusions' regex, for whoever measures with it
    collector.editforge_exclude = join_regex(collector.get_exclude_list())  # type: ignore[attr-defined]
    prepared_parser(collector.editforge_exclude)  # type: ignore[attr-defined]
    return collector


def prepared_parser(exclude: str) -> str:
    """Parse once with ``exclude``, so that the parser's modules and regular expressions are ready
    before the fork; returns ``exclude``."""
    from coverage.parser import PythonParser

    PythonParser(text="@abc.abstractmethod\ndef f():\n    pass\n", exclude=exclude).parse_source()
    return exclude


def send_coverage(collector, source: str, main_path: str, data_fd: int) -> None:
    """Stop measuring and send main.py's statements, exclusions and missed lines as JSON."""
    collector.stop()
    lines = analysis(source, _executed_lines(collector, main_path), collector.editforge_exclude)
    data = json.dumps(lines).encode()
    view = memoryview(data)
    while view:
        view = view[os.write(data_fd, view) :]


@functools.cache
def exclusion() -> str:
    """coverage.py's default exclusions and CanItEdit's, as one regular expression (what a
    collector configured as CanItEdit's .coveragerc reports as its exclude list)."""
    from coverage.config import DEFAULT_EXCLUDE
    from coverage.misc import join_regex

    return join_regex([*DEFAULT_EXCLUDE, COVERAGE_EXCLUDE])


def analysis(source: str, executed: set[int], exclude: str) -> dict[str, list[int]]:
    """main.py's statements, exclusions and missed lines, given the lines that ran: the same analysis
    as coverage.py's report (``coverage.results.analysis_from_file_reporter``), statements and
    exclusions from its parser, executed lines mapped to their statements."""
    from coverage.parser import PythonParser

    # parsed under another name: main.py is reserved to trusted code (see code_guard.py)
    parser = PythonParser(text=source, filename="<measured>", exclude=exclude)
    parser.parse_source()
    statements = parser.statements
    ran = parser.translate_lines(executed) & statements
    lines = {"statements": statements, "excluded": parser.excluded, "missing": statements - ran}
    return {key: sorted(value) for key, value in lines.items()}


def _executed_lines(collector, main_path: str) -> set[int]:
    """Lines the tracer recorded in main.py: read from the tracer's own table where this
    coverage.py version has it (the public route first copies everything into SQLite, ~3 ms)."""
    traced = getattr(getattr(collector, "_collector", None), "data", None)
    lines = traced.get(os.path.realpath(main_path)) if isinstance(traced, dict) else None
    if lines is None:
        lines = collector.get_data().lines(main_path) or ()
    return {n for n in lines if type(n) is int}


def parse_coverage(data: bytes) -> dict:
    """The coverage a run sent (line numbers of main.py), or why there is none."""
    try:
        measured = json.loads(data)
        lines = {key: measured[key] for key in ("statements", "excluded", "missing")}
    except (ValueError, TypeError, KeyError, RecursionError):  # RecursionError: "[[[[..."
        lines = {}
    if lines and all(isinstance(v, list) and all(type(n) is int for n in v) for v in lines.values()):
        return lines
    return {"error": "the run passed but sent no readable coverage"}
