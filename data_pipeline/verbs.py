"""The imperative verbs a commit subject may start with.

CommitPackFT kept commits whose subject starts with an imperative verb ("Fix parser on
empty input", not "Fixed ..." or "Parser fix"). This is our list: the base forms of verbs
that commonly start commit subjects, chosen by reading commit logs of Python projects.
Words that are also common nouns or past participles in subjects ("test", "update",
"release") are included when their imperative use dominates. Matching is on the first
word, lower-cased, with trailing punctuation removed.
"""

from __future__ import annotations

IMPERATIVE_VERBS: frozenset[str] = frozenset(
    """
    abort abstract accept access account accumulate activate adapt add address adjust allow
    annotate append apply archive arrange assert assign attach augment authenticate automate
    avoid backport batch bind block bootstrap break bring buffer build bump bundle burn cache
    calculate call cancel capitalize capture cast catch centralize change check choose clamp
    clarify clean cleanup clear clone close collapse collect combine comment commit compare
    compile complete compress compute concatenate condense configure confirm connect consolidate
    constrain construct consume contain continue convert copy correct count cover create crop
    customize cut debug declare decode decouple decorate decrease deduplicate default defer
    define delay delegate delete deprecate derive describe detach detect determine disable
    disallow discard disconnect display distinguish divide document downgrade drop dump
    duplicate echo edit eliminate emit enable encapsulate encode enforce enhance ensure enter
    escape evaluate exclude execute expand expect expire explain export expose extend extract
    factor fail fetch fill filter finalize find finish fix flag flatten flip flush fold follow
    force format forward free freeze generalize generate get guard halt handle harden hash hide
    highlight hook hoist identify ignore implement import improve include increase increment
    indent index inherit initialize inject inline insert inspect install instantiate integrate
    introduce invalidate invert invoke isolate iterate join keep kill label launch lazy-load
    let lift limit link lint list load localize lock log lookup loosen lower lowercase maintain
    make manage map mark match maximize measure memoize merge migrate minimize mirror mock
    modernize modify monitor mount move mute name narrow negate normalize notify nuke obey
    obtain omit open optimize order organize output override overwrite pack pad paginate parse
    pass patch pause permit persist pick pin place plot point poll polish populate port post
    precompute prefer prefix prepare prepend present preserve prevent print prioritize process
    produce profile prohibit promote prompt propagate protect provide prune publish pull purge
    push put query queue quote raise randomize rationalize read rearrange rebase rebuild
    recalculate receive reconnect record recover recreate redirect redo reduce refactor
    reference refine reformat refresh regenerate register reimplement reindent reject relax
    release reload remove rename render reorder reorganize repair repeat rephrase replace report
    represent request require rerun rescue reset reshape resize resolve respect restore
    restrict restructure retain retry return reuse revert review revise rewrite rework round
    route run sanitize save scale scan schedule scope search secure select send separate
    serialize set setup shift shorten show shrink shuffle silence simplify skip slice sort split
    squash stabilize stage standardize start stop store stream strengthen strip structure stub
    style subclass submit substitute subtract suppress support swap switch sync synchronize
    tag take teach test throttle throw tidy tighten time toggle track train transform translate
    transpose trigger trim truncate try tune turn tweak type unblock uncomment undo unify
    uninstall unlock unpack unpin unregister unset unskip untangle unwrap update upgrade upload
    use utilize validate vectorize verify version visualize wait warn watch whitelist widen
    wire work wrap write yield
    """.split()
)


def first_word(subject: str) -> str:
    words = subject.strip().split(maxsplit=1)
    return words[0].lower().rstrip(".,:;!?") if words else ""


def starts_with_imperative(subject: str) -> bool:
    return first_word(subject) in IMPERATIVE_VERBS
