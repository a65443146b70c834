"""Code of ours that runs inside a program's own process to record how it calls an API: shared by
the novel-API spy (``core/benchmarks/novelapi_spy.py``) and the API-update runtime
(``eval/apiupdate/runtime.py``).

Standard library only, and no imports of its own: each of those embeds this file's source before
its own in every program it sends to the sandbox, so the names
here are globals of that program. They are a measurement taken in the program's process, not a
security boundary: the verdict is the sandbox's, and each benchmark confirms a pass with a second
run (see their docstrings).
"""

MAX_REPR = 200


def _short(value):
    """A call argument as the report shows it: its repr, cut at MAX_REPR characters; a repr that
    raises is still a call."""
    try:
        text = repr(value)
    except Exception as exc:
        text = f"<unrepresentable {type(value).__name__}: {type(exc).__name__}>"
    return text if len(text) <= MAX_REPR else text[: MAX_REPR - 3] + "..."


def _failure(exc, phase):
    """The exception that ended a run, as the report records it: its type, message, the file of its
    innermost frame (``<tests>`` for the tests' code, which the sandbox guards), the phase
    (candidate, tests...) and, for an ImportError or NameError, the missing name."""
    tb, where = exc.__traceback__, ""
    while tb is not None:
        try:
            where = tb.tb_frame.f_code.co_filename
        except PermissionError:  # the sandbox guards only the tests' code
            where = "<tests>"
        tb = tb.tb_next
    name = getattr(exc, "name", None)
    return {
        "type": type(exc).__name__,
        "message": str(exc)[:300] if not isinstance(exc, RecursionError) else "maximum recursion depth",
        "phase": phase,
        "where": where,
        "name": name if isinstance(name, str) else None,
    }


def _take_channel(builtins_module):
    """The sandbox's report channel and tests hook (run with ``channel=True``), taken out of the
    builtins before the candidate runs, so that no candidate code finds them there."""
    names = builtins_module.__dict__
    return names.pop("__editforge_report__"), names.pop("__editforge_tests__")
