"""The RQ1 classifier: the deterministic rules on hand-made problems (one per kind of edit, domain and AI/ML
subcategory), the served-model path against a local OpenAI-compatible server with scripted answers
(the real client, prompts and parsing; invalid answers fall back to the rules), and its config checks.
No sandbox starts here.
"""

from __future__ import annotations

from http.server import BaseHTTPRequestHandler

import pytest
from conftest import JSONHandler, local_server

from core.entry import validate_overrides
from core.errors import ConfigError, UserError
from core.problems import Problem
from eval.audit import labels as L
from eval.audit.__main__ import APP
from eval.audit.classify import ClassifierConfig, classify
from eval.audit.classify_model import parse
from eval.audit.rules import classify_rules


def problem(before: str, after: str | None = None, instruction: str = "change it", **kw) -> Problem:
    return Problem(
        id=kw.pop("pid", "1"),
        name="p",
        before=before,
        after=before if after is None else after,
        tests=kw.pop("tests", ""),
        instructions={"descriptive": instruction},
        **kw,
    )


ADD = "def add(a, b):\n    return a + b\n"
TESTED = ADD + "\n\ndef test_add():\n    assert add(1, 2) == 3\n"

# (problem, intent, the start of its rule)
INTENTS = [
    pytest.param(
        problem(ADD, 'def add(a, b):\n    """Their sum."""\n    # plain addition\n    return a + b\n'),
        "docs",
        "diff: only comments or docstrings",
        id="docs-only edit",
    ),
    pytest.param(
        problem(ADD, "def add(a,b):\n\n    return (a + b)\n"),
        "style",
        "diff: the same syntax tree",
        id="layout",
    ),
    pytest.param(
        problem(TESTED, TESTED + "    assert add(-1, 1) == 0\n", "cover negative numbers too"),
        "test",
        "diff: only test functions",
        id="test-only edit",
    ),
    pytest.param(
        problem(
            "int add(int a, int b) { return a + b; }\n",
            "// sum\nint add(int a, int b) { return a + b; }\n",
            language="cpp",
        ),
        "docs",
        "diff: only comments change",
        id="cpp comment",
    ),  # fmt: skip
    pytest.param(
        problem(
            "const f = (s) => s.join(' ');\n",
            "const f = (s) =>\n  s.join('');\n",
            "Fix bugs in f.",
            language="js",
        ),
        "fix",
        "instruction: 'fix",
        id="js: a space inside a string is code, not layout",
    ),  # fmt: skip
    pytest.param(
        problem(ADD, "def add(a, b):\n    return a - b\n", "Fix the bug: add returns the wrong value"),
        "fix",
        "instruction: 'fix",
        id="bug-fix instruction",
    ),
    pytest.param(
        problem(ADD, ADD + "\n\ndef mul(a, b):\n    return a * b\n", "Add a mul function for products"),
        "feat",
        "instruction: 'add",
        id="new feature",
    ),
    pytest.param(problem(ADD, "x = 1\n", "Make it faster with caching"), "perf", "instruction:", id="perf"),
    pytest.param(
        problem(ADD, "x = 1\n", "Refactor add into a class"), "refactor", "instruction:", id="refactor"
    ),
    pytest.param(
        problem(ADD, "x = 1\n", "Write unit tests for add"), "test", "instruction:", id="test words"
    ),
    pytest.param(problem(ADD, "x = 1\n", "Bump the dependencies"), "chore", "instruction:", id="chore"),
    pytest.param(
        problem(ADD, "x = 1\n", "Fix the PEP8 violations"), "style", "instruction:", id="pep8 is style"
    ),
    pytest.param(
        problem(ADD, "", "arregla el error"), "fix", "instruction: 'arregl", id="spanish, no reference"
    ),
    pytest.param(
        problem(ADD, "x = 1\n", "use **", taxonomy={"change_kind": "corrective"}),
        "fix",
        "taxonomy.change_kind=corrective",
        id="canitedit change kind",
    ),
    pytest.param(
        problem(ADD, "x = 1\n", "speed it up", taxonomy={"intent": "refac"}),
        "refactor",
        "taxonomy.intent",
        id="carried label, the paper's spelling",
    ),
    pytest.param(problem(ADD, "x = 1\n", "hmm"), "other", "no rule matched", id="nothing matches"),
]


@pytest.mark.parametrize(("p", "intent", "rule"), INTENTS)
def test_intent_rules(p, intent, rule):
    label = classify_rules(p)["intent"]
    assert (label.value, label.rule[: len(rule)]) == (intent, rule)


FLASK = (
    "from flask import Flask\napp = Flask(__name__)\n\n@app.route('/items')\ndef items():\n    return []\n"
)
SKLEARN = (
    "from sklearn.linear_model import LogisticRegression\n\n"
    "def train(X, y):\n    model = LogisticRegression()\n    model.fit(X, y)\n    return model\n"
)
CONFUSION = (
    "import matplotlib.pyplot as plt\nfrom sklearn.metrics import confusion_matrix\n\n"
    "def show(y_true, y_pred):\n    plt.imshow(confusion_matrix(y_true, y_pred))\n"
)
CHAT = "import openai\n\ndef ask(q):\n    return openai.chat.completions.create(model='m', messages=[q])\n"

# (problem, domain, AI/ML subcategory, the start of the domain's rule)
DOMAINS = [
    pytest.param(problem(FLASK), L.BACKEND, None, "imports flask", id="flask route"),
    pytest.param(problem(SKLEARN), L.AI_ML, L.TRADITIONAL_ML, "imports sklearn", id="sklearn training"),
    pytest.param(problem(CONFUSION), L.AI_ML, L.ML_ADJACENT, "imports sklearn", id="ml plot"),
    pytest.param(problem(CHAT), L.AI_ML, L.AI_NATIVE, "imports openai", id="llm sdk"),
    pytest.param(problem("import pygame\nSPEED = 4\n"), L.GAME, None, "imports pygame", id="pygame"),
    pytest.param(
        problem("import React from 'react';\nexport const A = () => null;\n", language="js"),
        L.FRONTEND,
        None,
        "imports react",
        id="react",
    ),
    pytest.param(
        problem("document.getElementById('x').textContent = 'hi';\n", language="js"),
        L.FRONTEND,
        None,
        "code DOM access",
        id="dom",
    ),
    pytest.param(
        problem("import pandas as pd\ndf = pd.read_csv('a.csv')\n"),
        L.DATA,
        None,
        "imports pandas",
        id="pandas",
    ),
    pytest.param(
        problem("name = input('name? ')\nprint(name)\n"), L.USER_INTERACTION, None, "code reads", id="input()"
    ),
    pytest.param(
        problem("def play(board):\n    pass\n", instruction="the player must not leave the maze"),
        L.GAME,
        None,
        "keywords: maze, player",
        id="game keywords",
    ),
    pytest.param(problem(ADD), L.ALGORITHM, None, "default", id="plain function"),
]


@pytest.mark.parametrize(("p", "domain", "subcategory", "rule"), DOMAINS)
def test_domain_and_subcategory_rules(p, domain, subcategory, rule):
    labels = classify_rules(p)
    assert labels["domain"].value == domain and labels["domain"].rule.startswith(rule), labels["domain"]
    assert labels["ai_subcategory"].value == subcategory, labels["ai_subcategory"]


def test_language_is_read_from_the_problem():
    assert classify_rules(problem(ADD, language="js"))["language"].value == "JavaScript"
    labels, summary = classify([problem(ADD, pid="1"), problem(SKLEARN, pid="2", language="python")])
    assert summary["source"] == "rules" and summary["languages"] == {"Python": 2}
    assert summary["domains"] == {L.ALGORITHM: 1, L.AI_ML: 1} and summary["ai_subcategories"] == {
        L.TRADITIONAL_ML: 1
    }
    assert labels["2"].as_row()["labelled_by"]["domain"] == "imports sklearn"


# ------------------------------------------------------------------------------------ the served model
class _Scripted(JSONHandler, BaseHTTPRequestHandler):
    replies: list[str] = []
    calls: list[dict] = []

    def do_POST(self):  # noqa: N802  (http.server's naming)
        type(self).calls.append(self.read_json())
        self.reply_json({"choices": [{"message": {"content": type(self).replies.pop(0)}}]})


@pytest.fixture
def endpoint():
    _Scripted.calls = []
    with local_server(_Scripted) as url:
        yield f"{url}/v1"


def _config(*overrides: str) -> ClassifierConfig:
    return validate_overrides(APP, ["benchmark=fixtures", *overrides]).classifier


def test_the_model_labels_and_falls_back_to_the_rules(endpoint):
    cfg = _config("classifier.model=judge", f"classifier.base_url={endpoint}", "classifier.api_key_env=NONE",
                  "classifier.concurrency=1", "classifier.max_retries=0")  # fmt: skip
    problems = [
        problem(SKLEARN, pid="1", instruction="Restructure train into a pipeline"),
        problem(FLASK, pid="2", instruction="Add a route that lists users"),
    ]
    _Scripted.replies = [
        # problem 1: intent in the prompt's own spelling, domain as a bare name, subcategory in a fence
        '{"task_type": "refac", "confidence": "high", "reasoning": "no new behaviour"}',
        "Artificial Intelligence and Machine Learning.",
        '```json\n{"classification": "TRADITIONAL-ML-DEV", "confidence": "high", "evidence": "fit"}\n```',
        # problem 2: neither answer is a label
        "I would call this a feature",
        '{"category": "Web Stuff"}',
    ]
    labels, summary = classify(problems, cfg)
    one, two = labels["1"], labels["2"]
    assert (one.intent, one.domain, one.ai_subcategory) == ("refactor", L.AI_ML, L.TRADITIONAL_ML)
    assert set(one.by.values()) == {"model judge", "Problem.language=python"}
    assert (two.intent, two.domain, two.ai_subcategory) == ("feat", L.BACKEND, None)
    assert two.by["intent"].startswith("rules (model answer not a label): instruction: 'add")
    assert two.by["domain"] == "rules (model answer not a label): imports flask"
    assert summary["source"] == "model" and summary["fallbacks"] == {"intent": 1, "domain": 1}
    assert summary["fallback_answers"]["2"]["domain"] == '{"category": "Web Stuff"}'
    assert not _Scripted.replies and len(_Scripted.calls) == 5  # no subcategory asked for a non-AI/ML problem
    first = _Scripted.calls[0]
    assert first["model"] == "judge" and first["temperature"] == 0.0
    assert "Restructure train into a pipeline" in first["messages"][0]["content"]
    assert "Conventional Commits" in first["messages"][0]["content"]
    assert _Scripted.calls[1]["messages"][0]["role"] == "system"  # the domain prompt's system message


def test_an_unreachable_model_is_a_user_error():
    cfg = ClassifierConfig(model="m", base_url="http://127.0.0.1:9/v1", max_retries=0, api_key_env="NONE")
    with pytest.raises(UserError, match="classifier.model=m"):
        classify([problem(ADD)], cfg)


@pytest.mark.parametrize(
    ("reply", "field", "label"),
    [
        ('{"task_type": "sty"}', "intent", "style"),
        ("fix", "intent", "fix"),
        ("`Backend Development and APIs`", "domain", L.BACKEND),
        ('{"classification": "AI-NATIVE-APPLICATION-DEV"}', "ai_subcategory", L.AI_NATIVE),
        ('{"task_type": "bugfix"}', "intent", None),
        ("", "domain", None),
    ],
)
def test_parse_reads_json_or_a_bare_label(reply, field, label):
    assert parse(reply, field) == label


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["classifier.base_url=http://localhost:8000/v1"], "classifier.model is not"),
        (["classifier.model=m", "classifier.base_url=localhost:8000"], "not an http"),
        (["classifier.model=m", "classifier.concurrency=0"], "concurrency >= 1"),
    ],
)
def test_classifier_config_errors(overrides, message):
    with pytest.raises(ConfigError, match=message):
        _config(*overrides)
    assert _config().model is None  # the default: the rules
