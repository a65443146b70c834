"""HumanEvalFix (HumanEvalPack, Muennighoff et al. 2023) as bigcode's harness runs it: one split per
language (Python in the interpreter harness; JavaScript, C++ and Java through their toolchains)."""

from core.benchmarks.humanevalfix import HumanEvalFixOptions
from eval.benchmarks.programs import ProgramKind
from eval.languages import check_languages


class HumanEvalFix(ProgramKind):
    name = "humanevalfix"
    options = HumanEvalFixOptions

    def check(self, options: HumanEvalFixOptions, key: str = "benchmark") -> None:
        check_languages(options.languages, key)
        super().check(options, key)


KIND = HumanEvalFix()
