"""Deterministic RQ1 labels: a problem's language, edit intent, application domain and AI/ML subcategory
decided by fixed rules, each label with the rule that decided it, so a reader can check any label.

The published audit labelled with an LLM (its Appendix A prompts); these rules need no model and give
estimates. Each label is the first rule that fires, in this order:

- language: `Problem.language` (read, not guessed; the paper took languages from the benchmarks' repos).
- intent: a label the problem carries (`taxonomy.intent`); then the diff (Python: the same syntax tree
  once docstrings are dropped -> docs, or style when comments and docstrings are the same too; only
  lines of `test*` functions/classes or top-level asserts change -> test; other languages: only
  `//` and `/* */` comments change -> docs, only whitespace -> style); then the instruction's words
  (test, docs, ci, build, chore, style, perf); then the benchmark's own change kind where it names a
  fix or a feature (CanItEdit: corrective -> fix, adaptive -> feat); then the instruction's fix and
  refactor words (with a few words of the Spanish, Russian, Chinese and Polish instructions EDIT-Bench
  has for fix and feat); then CanItEdit's perfective -> feat (most of its perfective edits add
  behaviour: the paper finds 47.6% feat) and HumanEvalFix's bug type -> fix; then feat words; else
  `other`.
- domain: a carried `taxonomy.domain`; then the modules the code imports, in the order AI/ML, game,
  frontend, backend, data, user interaction (flask -> backend, torch -> AI/ML, pygame -> game, ...);
  then calls (DOM access or JSX -> frontend, `input()` -> user interaction, `open(...)` -> data);
  then keywords of the instruction (counting twice) and the code's identifiers, the domain with most
  (at least 2); else Algorithm Design and Problem Solving (self-contained computation).
- AI/ML subcategory (AI/ML problems only): an LLM SDK or orchestration import or LLM words -> AI-Native
  Application Dev; training words (epoch, loss, optimizer, fit, layers, ...) -> Traditional ML Dev; a
  pre-trained model library without training -> AI-Native Application Dev; else ML-Adjacent Tooling.
"""

from __future__ import annotations

import ast
import difflib
import io
import re
import tokenize
from collections.abc import Iterable
from dataclasses import dataclass

from core.problems import Problem
from core.sandbox.declared import imported_roots
from eval.audit import labels as L


@dataclass(frozen=True)
class Label:
    value: str | None
    rule: str


# ------------------------------------------------------------------------------------------- text
def instruction_text(p: Problem) -> str:
    return "\n".join(p.instructions.values())


def code_text(p: Problem) -> str:
    return f"{p.before}\n{p.after}"


def _words(code: str) -> str:
    """The code's identifiers as lowercase words (`binarySearch`, `binary_search` -> "binary search")."""
    spaced = re.sub(r"([a-z0-9])([A-Z])", r"\1 \2", code)
    return " ".join(re.findall(r"[a-z0-9]+", spaced.lower()))


def _any(words: Iterable[str]) -> re.Pattern[str]:
    return re.compile(r"\b(?:" + "|".join(re.escape(w) for w in words) + r")\b")


_JS_IMPORT = re.compile(r"""(?:require\(\s*|\bfrom\s+|^\s*import\s+)['"]([^'"]+)['"]""", re.M)
_DOTTED_IMPORT = re.compile(r"^\s*(?:import|using)\s+(?:static\s+)?([A-Za-z_][\w.]*)", re.M)
_INCLUDE = re.compile(r"^\s*#\s*include\s*[<\"]([^>\"]+)[>\"]", re.M)


def modules(p: Problem) -> set[str]:
    """The modules the problem's code imports, lowercase: Python's top-level names; for other languages
    the package (`react-dom/client` -> also `react-dom`), each prefix of a dotted name (`javax.swing.JFrame`
    -> `javax`, `javax.swing`, ...) and included headers without their extension."""
    code = code_text(p)
    if p.language == "python":
        return {m.lower() for m in imported_roots(p.before, p.after)}
    found: set[str] = set()
    for spec in _JS_IMPORT.findall(code):
        spec = spec.lower()
        parts = spec.split("/")
        found |= {spec, "/".join(parts[:2]) if spec.startswith("@") else parts[0]}
    for dotted in _DOTTED_IMPORT.findall(code):
        parts = dotted.lower().split(".")
        found |= {".".join(parts[: i + 1]) for i in range(len(parts))}
    for header in _INCLUDE.findall(code):
        stem = header.lower().rsplit(".", 1)[0]
        found |= {stem, stem.split("/")[0]}
    return found


# ------------------------------------------------------------------------------------------ language
def language(p: Problem) -> Label:
    return Label(L.LANGUAGE_NAMES.get(p.language.lower(), p.language), f"Problem.language={p.language}")


# -------------------------------------------------------------------------------------------- intent
def _docstring_free(tree: ast.AST) -> str:
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if (
            isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
            and body
            and isinstance(body[0], ast.Expr)
            and isinstance(body[0].value, ast.Constant)
            and isinstance(body[0].value.value, str)
        ):
            node.body = body[1:] or [ast.Pass()]
    return ast.dump(tree)


def _comments(src: str) -> list[str]:
    try:
        return [
            t.string
            for t in tokenize.generate_tokens(io.StringIO(src).readline)
            if t.type == tokenize.COMMENT
        ]
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return []


def _docstrings(tree: ast.AST) -> list[str | None]:
    return [
        ast.get_docstring(n, clean=False)
        for n in ast.walk(tree)
        if isinstance(n, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
    ]


def _test_lines(tree: ast.Module) -> set[int]:
    """Lines of `test*` functions and `Test*` classes (decorators included) and of top-level asserts."""
    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(
            node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
        ) and node.name.lower().startswith("test"):
            first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
            lines.update(range(first, (node.end_lineno or node.lineno) + 1))
    for node in tree.body:
        if isinstance(node, ast.Assert):
            lines.update(range(node.lineno, (node.end_lineno or node.lineno) + 1))
    return lines


def _changed(before: str, after: str) -> tuple[set[int], set[int]]:
    """1-based non-blank lines removed from `before` and added in `after`."""
    a, b = before.splitlines(), after.splitlines()
    removed, added = set(), set()
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if tag != "equal":
            removed.update(i + 1 for i in range(i1, i2) if a[i].strip())
            added.update(j + 1 for j in range(j1, j2) if b[j].strip())
    return removed, added


# a string literal (kept whole), a // or /* */ comment, or any other token of a C-like language
_C_TOKEN = re.compile(
    r"""("(?:\\.|[^"\\\n])*"|'(?:\\.|[^'\\\n])*'|`(?:\\.|[^`\\])*`)|(//[^\n]*|/\*.*?\*/)|(\w+|[^\s\w])""",
    re.S,
)


def _c_tokens(src: str) -> tuple[list[str], list[str]]:
    """(code tokens, comments) of C-like source: layout is dropped, string literals are not split."""
    tokens, comments = [], []
    for m in _C_TOKEN.finditer(src):
        if m.group(2):
            comments.append(m.group(2))
        else:
            tokens.append(m.group(1) or m.group(3))
    return tokens, comments


def _diff_intent(p: Problem) -> Label | None:
    if not p.after.strip() or p.before == p.after:
        return None  # EDIT-Bench has no reference edit; nothing changed: nothing to read
    if p.language != "python":
        (code, notes), (code_after, notes_after) = _c_tokens(p.before), _c_tokens(p.after)
        if code == code_after:
            if notes != notes_after:
                return Label("docs", "diff: only comments change")
            return Label("style", "diff: only whitespace changes")
        return None
    try:
        trees = [ast.parse(p.before), ast.parse(p.after)]
    except (SyntaxError, ValueError):
        return None
    docs = [_docstrings(t) for t in trees]
    if _docstring_free(ast.parse(p.before)) == _docstring_free(ast.parse(p.after)):
        if docs[0] != docs[1] or _comments(p.before) != _comments(p.after):
            return Label("docs", "diff: only comments or docstrings change")
        return Label("style", "diff: the same syntax tree, docstrings and comments; only the layout changes")
    removed, added = _changed(p.before, p.after)
    if (removed or added) and removed <= _test_lines(trees[0]) and added <= _test_lines(trees[1]):
        return Label("test", "diff: only test functions/classes or top-level asserts change")
    return None


_FIX_OTHER = r"|arregl|corrig|fallar|исправ|ошиб|修复|修正|错误|napraw|błąd|popraw"
_FEAT_OTHER = r"|agreg|añad|добав|添加|增加|实现|dodaj"
INTENT_WORDS: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (label, re.compile(pattern))
    for label, pattern in (
        ("test", r"\b(?:unit tests?|test cases?|test suite|tests for|pytest|unittest|test coverage|"
                 r"(?:add|write|create|extend|improve)\w*\s+(?:a\s+|an\s+|some\s+|more\s+|the\s+)?(?:unit\s+)?tests?)\b"),
        ("docs", r"\b(?:docstrings?|documentation|readme|jsdoc|javadoc|document (?:the|this|each|all|every)|"
                 r"(?:add|write|update|improve)\w*\s+(?:a\s+|the\s+|some\s+|more\s+)?(?:inline\s+|helpful\s+)?comments?)\b"),
        ("ci", r"\b(?:ci/cd|continuous integration|github actions?|gitlab[- ]ci|travis|jenkins|circleci|"
               r"ci (?:pipeline|workflow|job))\b"),
        ("build", r"(?:setup\.py|pyproject|makefile|cmake|dockerfile|webpack|package\.json|requirements\.txt|"
                  r"tsconfig|\bbuild (?:script|system|config\w*)\b)"),
        ("chore", r"\b(?:(?:bump|upgrade|update)\w*\s+(?:the\s+)?(?:dependenc\w+|packages?|librar\w+|versions?)|"
                  r"deprecat\w+|housekeeping|unused imports?|dead code|config(?:uration)? cleanup)\b"),
        ("style", r"\b(?:pep ?8|lint\w*|flake8|pylint|eslint|prettier|reformat\w*|code formatting|format the code|"
                  r"code style|coding style|naming conventions?|snake[_ ]case|camel ?case|"
                  r"(?:fix|remove|strip|normali[sz]e|clean)\w*\s+(?:the\s+|all\s+)?(?:trailing\s+)?whitespace|"
                  r"trailing (?:spaces|whitespace|newlines?))\b"),
        ("perf", r"\b(?:faster|speed\w*\s+up|speedup|performan\w+|optimi[sz](?:e|es|ed|ing|ation)|efficien\w+|"
                 r"memory (?:usage|footprint)|time complexity|vectori[sz]\w*|memoi[sz]\w*|caching|parallel\w*|slow)\b"),
        ("fix", r"(?:\b(?:fix\w*|bugs?|buggy|errors?|wrong|incorrect\w*|broken|crash\w*|failing tests?|"
                r"doesn'?t work|does not work|not work\w*|exceptions?|typo|mistakes?|should (?:return|be|not|raise)|"
                r"off[- ]by[- ]one|infinite loop|edge cases?|not (?:correct|right)|misses|prevent\w*|don'?t let|"
                r"handle (?:a |an |the )?(?:empty|constant|missing|none|null|zero|negative|invalid)\w*)\b"
                + _FIX_OTHER + ")"),
        ("refactor", r"\b(?:refactor\w*|restructur\w*|reorgani[sz]\w*|clean\s?up|simplif\w*|readab\w*|re-?write|"
                     r"renam\w*|extract\w*\s+(?:a\s+|the\s+)?(?:method|function|class|helper)|split\s+\w+\s+into|"
                     r"decoupl\w*|modulari[sz]\w*|duplicat\w+ code|more pythonic)\b"),
    )
)  # fmt: skip
FEAT_WORDS = re.compile(
    r"(?:\b(?:add\w*|implement\w*|create|introduce|support\w*|new|allow\w*|enable|extend\w*|include|"
    r"generali[sz]e|make it (?:possible|able)|write a (?:function|method|class))\b" + _FEAT_OTHER + ")"
)
CHANGE_KINDS = {"corrective": "fix", "adaptive": "feat", "perfective": "feat"}


def _quote(match: re.Match[str]) -> str:
    return repr(match.group(0).strip())


def intent(p: Problem) -> Label:
    carried = L.normalise(p.taxonomy.get("intent"), L.INTENTS, L.INTENT_ALIASES)
    if carried:
        return Label(carried, "taxonomy.intent")
    by_diff = _diff_intent(p)
    if by_diff:
        return by_diff
    text = instruction_text(p).lower()
    kind = str(p.taxonomy.get("change_kind") or "").lower()
    for label, pattern in INTENT_WORDS:
        if label == "fix" and kind in ("corrective", "adaptive"):  # the benchmark's own label of the edit
            return Label(CHANGE_KINDS[kind], f"taxonomy.change_kind={kind}")
        found = pattern.search(text)
        if found:
            return Label(label, f"instruction: {_quote(found)}")
    if kind in CHANGE_KINDS:
        return Label(CHANGE_KINDS[kind], f"taxonomy.change_kind={kind}")
    if p.taxonomy.get("bug_type"):
        return Label("fix", "taxonomy.bug_type (a bug to fix)")
    found = FEAT_WORDS.search(text)
    if found:
        return Label("feat", f"instruction: {_quote(found)}")
    return Label("other", "no rule matched")


# -------------------------------------------------------------------------------------------- domain
AI_NATIVE_LIBS = L.EMERGING | {
    "ollama", "cohere", "mistralai", "groq", "huggingface_hub", "tiktoken", "chromadb", "pinecone", "vertexai",
    "replicate", "llama_cpp", "gpt4all", "g4f", "@anthropic-ai/sdk", "@langchain/core", "@huggingface/inference",
}  # fmt: skip
PRETRAINED_LIBS = frozenset(
    {"transformers", "diffusers", "sentence_transformers", "whisper", "ultralytics", "timm", "open_clip", "clip",
     "@xenova/transformers", "mediapipe"}
)  # fmt: skip
ML_LIBS = frozenset(
    {"torch", "torchvision", "torchaudio", "torchtext", "tensorflow", "keras", "sklearn", "jax", "flax", "xgboost",
     "lightgbm", "catboost", "peft", "trl", "accelerate", "spacy", "nltk", "gensim", "onnx", "onnxruntime",
     "tensorboard", "wandb", "mlflow", "optuna", "pytorch_lightning", "lightning", "@tensorflow/tfjs", "brain.js",
     "ml5", "faiss"}
)  # fmt: skip
DOMAIN_LIBS: tuple[tuple[str, frozenset[str]], ...] = (
    (L.AI_ML, AI_NATIVE_LIBS | PRETRAINED_LIBS | ML_LIBS),
    (L.GAME, frozenset({"pygame", "arcade", "pyglet", "panda3d", "ursina", "pymunk", "phaser", "sfml", "raylib",
                        "pyray", "kaboom", "pixi.js"})),
    (L.FRONTEND, frozenset({"tkinter", "customtkinter", "pyqt5", "pyqt6", "pyside2", "pyside6", "kivy", "wx",
                            "streamlit", "gradio", "dash", "flet", "nicegui", "toga", "gi", "react", "react-dom",
                            "vue", "@angular/core", "svelte", "jquery", "next", "styled-components", "@mui/material",
                            "tailwindcss", "bootstrap", "d3", "javax.swing", "java.awt", "javafx", "qtwidgets"})),
    (L.BACKEND, frozenset({"flask", "django", "fastapi", "starlette", "aiohttp", "tornado", "bottle", "sanic",
                           "falcon", "pyramid", "quart", "sqlalchemy", "sqlite3", "psycopg2", "psycopg", "pymysql",
                           "mysql", "pymongo", "motor", "redis", "celery", "grpc", "requests", "httpx", "urllib",
                           "urllib3", "uvicorn", "gunicorn", "boto3", "botocore", "telegram", "telebot", "aiogram",
                           "discord", "slack_sdk", "websockets", "socket", "smtplib", "http", "express", "koa",
                           "mongoose", "sequelize", "pg", "mysql2", "axios", "node-fetch", "https", "socket.io",
                           "ws", "java.sql", "org.springframework", "javax.servlet", "jakarta.servlet"})),
    (L.DATA, frozenset({"pandas", "polars", "csv", "openpyxl", "xlrd", "xlsxwriter", "pyarrow", "h5py", "pickle",
                        "shutil", "glob", "zipfile", "tarfile", "json", "yaml", "toml", "xml", "lxml", "bs4",
                        "docx", "pypdf", "pypdf2", "fitz", "matplotlib", "seaborn", "plotly", "statsmodels", "fs",
                        "papaparse", "xlsx", "csv-parse"})),
    (L.USER_INTERACTION, frozenset({"argparse", "click", "typer", "curses", "getpass", "readline", "prompt_toolkit",
                                    "inquirer", "questionary", "readline-sync", "prompts", "fire", "cmd", "msvcrt",
                                    "keyboard", "pynput"})),
)  # fmt: skip
DOMAIN_CALLS: tuple[tuple[str, re.Pattern[str], str], ...] = (
    (L.FRONTEND, re.compile(r"\bdocument\.\w+|\bwindow\.\w+|\baddEventListener\s*\(|className=|<div\b|\buseState\s*\("),
     "DOM access or JSX"),
    (L.USER_INTERACTION, re.compile(r"(?<![\w.])input\s*\(|\bprompt\s*\(|readline\.question|Scanner\s*\(\s*System\.in|"
                                    r"\bcin\s*>>"), "reads the user's input"),
    (L.DATA, re.compile(r"(?<![\w.])open\s*\(|\bfs\.(?:read|write)File|\bFile(?:Reader|Writer)\b|\b[io]fstream\b"),
     "reads or writes files"),
)  # fmt: skip
DOMAIN_KEYWORDS: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (domain, _any(words))
    for domain, words in (
        (L.AI_ML, ["neural", "machine learning", "deep learning", "train", "training", "epochs",
                   "classifier", "embedding", "embeddings", "llm", "gpt", "chatbot", "model inference", "tokenizer",
                   "dropout", "fine tune", "finetune", "backprop", "gradient descent", "perceptron"]),
        (L.GAME, ["game", "games", "player", "players", "enemy", "enemies", "sprite", "sprites", "paddle", "chess",
                  "tictactoe", "tic tac toe", "maze", "dice", "blackjack", "poker", "simulation", "simulate",
                  "collision", "velocity", "gravity", "particle", "particles"]),
        (L.FRONTEND, ["ui", "gui", "button", "buttons", "widget", "widgets", "css", "html", "dom", "frontend",
                      "ui component", "react component", "jsx", "navbar", "modal", "dropdown", "tooltip",
                      "stylesheet", "web page", "webpage"]),
        (L.BACKEND, ["api", "endpoint", "endpoints", "route", "routes", "server", "database", "sql", "http",
                     "rest api", "backend", "middleware", "authentication", "webhook", "bot", "microservice"]),
        (L.DATA, ["csv", "excel", "xlsx", "dataframe", "file", "files", "json", "spreadsheet", "directory", "folder",
                  "log file", "serialize", "deserialize", "yaml", "xml"]),
        (L.USER_INTERACTION, ["user input", "prompt the user", "ask the user", "menu", "command line", "cli",
                              "keyboard", "stdin", "interactive", "console input"]),
        (L.ALGORITHM, ["algorithm", "sort", "sorting", "binary search", "search", "graph", "tree", "prime", "primes",
                       "fibonacci", "factorial", "recursion", "recursive", "dynamic programming", "matrix",
                       "permutation", "permutations", "gcd", "palindrome", "shortest path", "dijkstra", "bfs", "dfs",
                       "heap", "stack", "queue", "linked list", "interval", "intervals"]),
    )
)  # fmt: skip


def domain(p: Problem) -> Label:
    carried = L.normalise(p.taxonomy.get("domain"), L.DOMAINS)
    if carried:
        return Label(carried, "taxonomy.domain")
    imported = modules(p)
    for name, libraries in DOMAIN_LIBS:
        hits = sorted(imported & libraries)
        if hits:
            return Label(name, f"imports {', '.join(hits[:3])}")
    code = code_text(p)
    for name, pattern, what in DOMAIN_CALLS:
        found = pattern.search(code)
        if found:
            return Label(name, f"code {what}: {_quote(found)}")
    text, words = instruction_text(p).lower(), _words(code)
    best, best_score, best_hits = None, 0, []
    for name, pattern in DOMAIN_KEYWORDS:
        said = set(pattern.findall(text))
        seen = set(pattern.findall(words)) - said
        score = 2 * len(said) + len(seen)
        if score > best_score:
            best, best_score, best_hits = name, score, sorted(said) + sorted(seen)
    if best is not None and best_score >= 2:
        return Label(best, f"keywords: {', '.join(best_hits[:5])}")
    return Label(L.ALGORITHM, "default: no domain library, call or keyword (self-contained computation)")


# -------------------------------------------------------------------------------------- AI/ML subcategory
LLM_WORDS = _any(["llm", "llms", "gpt", "chatgpt", "chatbot", "prompt template", "system prompt", "rag",
                  "retrieval augmented", "langchain", "ollama", "claude", "openai", "api key", "chat completion",
                  "chat completions"])  # fmt: skip
TRAINING_WORDS = _any(["train", "training", "trainer", "epoch", "epochs", "loss", "optimizer", "backward", "fit",
                       "dropout", "layer", "layers", "conv", "conv1d", "conv2d", "lstm", "rnn", "cnn", "nn",
                       "learning rate", "scheduler", "dataloader", "dataset", "train test split", "cross val score",
                       "hyperparameter", "hyperparameters", "fine tune", "finetune", "lora", "grid search"])  # fmt: skip


def ai_subcategory(p: Problem, domain_label: str | None) -> Label:
    if domain_label != L.AI_ML:
        return Label(None, "not AI/ML")
    carried = L.normalise(p.taxonomy.get("ai_subcategory"), L.AI_SUBCATEGORIES, L.SUBCATEGORY_ALIASES)
    if carried:
        return Label(carried, "taxonomy.ai_subcategory")
    imported = modules(p)
    hits = sorted(imported & AI_NATIVE_LIBS)
    if hits:
        return Label(L.AI_NATIVE, f"imports {', '.join(hits[:3])} (an LLM SDK or orchestration framework)")
    text = f"{instruction_text(p).lower()}\n{_words(code_text(p))}"
    found = LLM_WORDS.search(text)
    if found:
        return Label(L.AI_NATIVE, f"LLM words: {_quote(found)}")
    trained = sorted(set(TRAINING_WORDS.findall(text)))
    if trained:
        return Label(L.TRADITIONAL_ML, f"training words: {', '.join(trained[:4])}")
    hits = sorted(imported & PRETRAINED_LIBS)
    if hits:
        return Label(
            L.AI_NATIVE,
            f"imports {', '.join(hits[:3])} without training (a pre-trained model as a component)",
        )
    return Label(L.ML_ADJACENT, "AI/ML code that neither trains models nor calls them as a service")


def classify_rules(p: Problem) -> dict[str, Label]:
    """The four RQ1 labels of `p` by the rules (see the module docstring)."""
    d = domain(p)
    return {
        "language": language(p),
        "intent": intent(p),
        "domain": d,
        "ai_subcategory": ai_subcategory(p, d.value),
    }
