"""Sandboxed execution of untrusted generated programs.

    from eval.sandbox import make_sandbox

    with make_sandbox() as sandbox:  # bwrap where it works, else the weaker local backend
        result = sandbox.run(program, tests)
        result.passed, result.status, result.detail

See ForkServerSandbox for the semantics and docs/sandbox.md for what each backend does and
does not protect.
"""

from eval.sandbox.bwrap import bwrap_available
from eval.sandbox.limits import SandboxLimits
from eval.sandbox.result import STATUSES, ExecutionResult
from eval.sandbox.sandbox import BACKENDS, ForkServerSandbox, Sandbox, make_sandbox
from eval.sandbox.worker import SandboxUnavailable

__all__ = [
    "BACKENDS",
    "STATUSES",
    "ExecutionResult",
    "ForkServerSandbox",
    "Sandbox",
    "SandboxLimits",
    "SandboxUnavailable",
    "bwrap_available",
    "make_sandbox",
]
