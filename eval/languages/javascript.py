"""JavaScript (node): HumanEvalPack's tests as a command, or split (the tests in a node process of
their own, docs/sandbox.md); density and c8 coverage."""

from __future__ import annotations

import json
import re
import shutil

from core.problems import Problem
from core.sandbox import Sandbox, SandboxLimits
from eval.languages.base import CommandJob, Language, runner_source
from eval.languages.lines import LineCoverage, shifted

# HumanEvalPack's JavaScript tests use console.assert, which only prints on failure; and one
# solution (JavaScript/162) requires the npm package js-md5, served here by node's own crypto.
# The tests call `__editforge_assert` instead: a constant of the module scope, which a program can
# neither assign nor redeclare (a SyntaxError), unlike the console object and its methods.
JS_PRELUDE = runner_source("prelude.js")
JS_RUNNER = runner_source("editforge_run.js")  # reads and deletes main.js, then compiles it
JS_TOKEN = runner_source("token_epilogue.js")  # after the tests: the run token from descriptor 3 to 4
# JavaScript split runs (docs/sandbox.md): the tests in a node process of their own that runs no line
# of the program (split_trusted.js), the program in another (split_candidate.js), plain data between
# them (split_channel.js, which both sides start with). The trusted side's code and the tests reach it
# on its stdin, never on a disk the program sees.
JS_CHANNEL = runner_source("split_channel.js")
JS_TRUSTED = runner_source("split_trusted.js")
JS_CANDIDATE = runner_source("split_candidate.js")
JS_TRUSTED_ARGV = [
    "node",
    "-e",
    "const fs = require('fs'); const payload = JSON.parse(fs.readFileSync(0, 'utf8'));"
    " new Function('payload', 'require', payload.runner)(payload, require);",
]


class JavaScript(Language):
    name = "js"
    tool = "node"
    test_functions = re.compile(
        r"\b(?:const|let|var)\s+test\w*\s*=\s*(?:async\s*)?(?:\([^()]*\)|[\w$]+)\s*=>"
        r"|\bfunction\s*\*?\s*test\w*\s*\("
        r"|(?<![\w.$])(?:test|it)\s*\(\s*[\"'`]"
    )
    assertions = re.compile(r"(?<![\w$])(?:console\.)?assert(?:\.\w+)?\s*\(|(?<![\w.$])expect\s*\(")

    def job(self, program: str, tests: str, helpers: str = "", split: bool = False) -> CommandJob:
        if split:  # ``helpers``: benchmark text the tests call, bound on their side
            payload = json.dumps({"runner": JS_CHANNEL + JS_TRUSTED, "tests": tests, "helpers": helpers})
            files = {"main.js": program, "editforge_candidate.js": JS_CHANNEL + JS_CANDIDATE}
            argv = ["node", "editforge_candidate.js"]
            return CommandJob(
                argv, files, run_token=False, trusted_argv=JS_TRUSTED_ARGV, trusted_input=payload
            )
        source = program + "\n" + tests.replace("console.assert(", "__editforge_assert(") + JS_TOKEN
        return CommandJob(
            ["node", "editforge_run.js"], {"main.js": JS_PRELUDE + source, "editforge_run.js": JS_RUNNER}
        )

    def coverage_unavailable(self) -> str | None:
        return "c8 is not installed (npm install -g c8)" if shutil.which("c8") is None else None

    def coverage_of(self, problem: Problem, sandbox: Sandbox, limits: SandboxLimits) -> LineCoverage | str:
        """c8 (V8's coverage) reports every line of a block as a statement; its line counts, as reported."""
        job = self.job(problem.program(problem.after), problem.tests)
        argv = [
            "sh",
            "-c",
            "c8 --reporter=json --report-dir=cov node main.js >&2 && cat cov/coverage-final.json",
        ]
        result = sandbox.run_command(argv, job.files, limits=limits)
        if not result.passed:
            return f"coverage failed: the reference did not pass under c8 ({result.status})"
        try:
            report = next(iter(json.loads(result.stdout).values()))
        except (ValueError, StopIteration):
            return "coverage failed: c8 wrote no report"
        executable, covered = set(), set()
        for key, span in report["statementMap"].items():
            for line in range(span["start"]["line"], span["end"]["line"] + 1):
                executable.add(line)
                if report["s"].get(key):
                    covered.add(line)
        return shifted(problem, executable, covered, JS_PRELUDE.count("\n"))


LANGUAGE = JavaScript()
