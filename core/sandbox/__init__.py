"""Sandboxed execution of untrusted generated programs.

    from core.sandbox import make_sandbox

    with make_sandbox() as sandbox:  # bwrap where it works, else the weaker local backend
        result = sandbox.run(program, tests)
        result.passed, result.status, result.detail

See ForkServerSandbox for the semantics and docs/sandbox.md for what each backend does and
does not protect.
"""

from core.sandbox.bwrap import bwrap_available
from core.sandbox.config import SandboxConfig
from core.sandbox.limits import SandboxLimits
from core.sandbox.result import STATUSES, ExecutionResult
from core.sandbox.sandbox import BACKENDS, ForkServerSandbox, Sandbox, make_sandbox
from core.sandbox.worker import SandboxUnavailable

__all__ = [
    "BACKENDS",
    "STATUSES",
    "ExecutionResult",
    "ForkServerSandbox",
    "Sandbox",
    "SandboxConfig",
    "SandboxLimits",
    "SandboxUnavailable",
    "bwrap_available",
    "make_sandbox",
]
