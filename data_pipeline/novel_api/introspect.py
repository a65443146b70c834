"""List an installed package's API as JSON on stdout.

Standard library only: it runs inside the library's own virtualenv, under whichever Python that is.

    python -I introspect.py PACKAGE [--dist DISTRIBUTION]   the API (see `introspect`)
    python -I introspect.py --top-level DISTRIBUTION         the distribution's top-level import names

Every module of the package is imported; one that fails is recorded in `failed_modules` with its
error, so a caller never mistakes "could not import" for "has no API", and is then read statically
(`static_apis`: its source's AST, with `__all__`, top-level functions and classes, their methods and
the names it re-exports), listed in `static_modules`. What imported code prints goes to stderr:
stdout carries only the JSON.
"""

from __future__ import annotations

import ast
import functools
import importlib
import importlib.machinery
import importlib.metadata
import importlib.util
import inspect
import json
import os
import pkgutil
import re
import sys
import warnings

# Importing `pkg.__main__` would run the package's command line.
SKIP_MODULES = ("__main__",)
# A warn(...) call whose arguments name DeprecationWarning or PendingDeprecationWarning (one level
# of nested parentheses inside the call).
WARN_DEPRECATION = re.compile(r"\bwarn\s*\((?:[^()]|\([^()]*\))*?\b(?:Pending)?DeprecationWarning\b")
DEPRECATED_DECORATOR = re.compile(r"^\s*@\s*[\w.]*deprecated\b", re.IGNORECASE | re.MULTILINE)
CLASS_STATEMENT = re.compile(r"^\s*class\s", re.MULTILINE)
DEPRECATED_NOTE = re.compile(r"^\s*(?:\.\.\s+deprecated::|deprecated\b)", re.IGNORECASE | re.MULTILINE)
# Functions of a module Cython compiled (falcon's wheels): `inspect.isfunction` says no to them.
COMPILED_FUNCTIONS = ("cython_function_or_method", "fused_cython_function")


def one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def import_modules(package: str) -> tuple[dict[str, object], dict[str, str]]:
    """Import the package and every submodule (pkgutil.walk_packages' walk, keeping each error)."""
    modules: dict[str, object] = {}
    failed: dict[str, str] = {}

    def load(name: str):
        try:
            modules[name] = importlib.import_module(name)
        except (Exception, SystemExit) as exc:  # a module calling sys.exit() at import fails too
            failed[name] = one_line(exc)
            return None
        return modules[name]

    stack = [load(package)]
    while stack:
        module = stack.pop()
        path = getattr(module, "__path__", None)
        if module is None or path is None:
            continue
        for info in sorted(pkgutil.iter_modules(path, module.__name__ + "."), key=lambda i: i.name):
            if info.name.rsplit(".", 1)[-1] in SKIP_MODULES or info.name in modules or info.name in failed:
                continue
            sub = load(info.name)
            if info.ispkg:
                stack.append(sub)
    return modules, failed


def is_public_path(name: str) -> bool:
    return not any(part.startswith("_") for part in name.split("."))


def namespace(module) -> tuple[dict[str, object], set[str]]:
    """The module's names and which of them are public: exactly `__all__` when it defines one;
    else those without a leading underscore, in a plain module (not a package's `__init__`) only
    those it defines: what it imports are its working names, not exports (the typing spec's
    re-export convention; `pandas.io.sql` imports `DataFrame`, `flask.app` imports `App`)."""
    names = dict(vars(module))
    exported = getattr(module, "__all__", None)
    if isinstance(exported, (list, tuple, set, frozenset)):
        public = {n for n in exported if isinstance(n, str)}
        for name in public - names.keys():  # a lazy attribute (module __getattr__)
            try:
                names[name] = getattr(module, name)
            except Exception:
                continue
    else:
        package = hasattr(module, "__path__")
        public = {
            n
            for n, obj in names.items()
            if not n.startswith("_")
            and (package or getattr(obj, "__module__", module.__name__) == module.__name__)
        }
    return names, public


class Found:
    """One object of the package and every path that reaches it."""

    def __init__(self, obj: object, kind: str, owner: type | None = None, attr: str = ""):
        self.obj, self.kind, self.owner, self.attr = obj, kind, owner, attr
        self.paths: set[str] = set()  # public access paths
        self.hidden: set[str] = set()  # the others


def defined_in(obj: object, package: str) -> bool:
    module = getattr(obj, "__module__", None)
    return isinstance(module, str) and (module == package or module.startswith(package + "."))


def collect(package: str, modules: dict[str, object]) -> list[Found]:
    """Functions and classes of every module namespace, then the methods of every class found."""
    found: dict[int, Found] = {}
    for modname in sorted(modules):
        names, public = namespace(modules[modname])
        public_module = is_public_path(modname)
        for name, obj in sorted(names.items()):
            if inspect.isclass(obj):
                kind = "class"
            elif is_function(obj) or inspect.isbuiltin(obj):
                kind = "function"
            else:
                continue
            if not defined_in(obj, package):
                continue  # re-exported from the standard library or a dependency
            entry = found.setdefault(id(obj), Found(obj, kind))
            path = f"{modname}.{name}"
            (entry.paths if public_module and name in public else entry.hidden).add(path)
    for entry in [e for e in found.values() if e.kind == "class"]:
        for name, owner, func in methods(entry.obj, package):
            method = found.setdefault(id(func), Found(func, "method", owner, name))
            for cls_path in entry.paths:
                (method.paths if not name.startswith("_") else method.hidden).add(f"{cls_path}.{name}")
            method.hidden.update(f"{p}.{name}" for p in entry.hidden)
    return list(found.values())


def external_paths(package: str, modules: dict[str, object]) -> list[str]:
    """Public paths at which the package re-exports a class or function of a dependency, with the
    public attributes of such a class: `pydantic.AnyUrl.build` was a path users wrote when
    `AnyUrl` was pydantic-core's `Url`, so a later `AnyUrl.build` of pydantic's own is not new."""
    paths: set[str] = set()
    for modname in sorted(modules):
        if not is_public_path(modname):
            continue
        names, public = namespace(modules[modname])
        for name in sorted(public & names.keys()):
            obj = names[name]
            # a typing alias (pydantic 2.5's `PostgresDsn = Annotated[MultiHostUrl, ...]`) passes
            # attribute access on to its class: `PostgresDsn.build` was a path too
            origin = safe(lambda o=obj: o.__origin__)  # Annotated[X, ...] -> X (get_origin: Annotated)
            cls = obj if inspect.isclass(obj) else origin if inspect.isclass(origin) else None
            if cls is None and not (is_function(obj) or inspect.isbuiltin(obj)):
                continue
            if defined_in(cls or obj, package):
                continue
            paths.add(f"{modname}.{name}")
            if cls is not None:
                attrs = safe(lambda c=cls: dir(c), []) or []
                paths.update(f"{modname}.{name}.{a}" for a in attrs if not a.startswith("_"))
    return sorted(paths)


def unlisted_method_paths(found: list[Found], package: str) -> list[str]:
    """Paths of the package's classes' methods that `methods` does not list: routines that are no
    Python or Cython function (a C or Cython class's `method_descriptor`), or whose function a
    decorator from elsewhere made (`contextlib`'s wrapper around numpy 1.26's
    `SeedSequence.generate_state`). They exist, so a later version's same method is not new when
    it became a listed one (numpy 1.26's `Generator.beta` is a method descriptor, 2.1's a Cython
    function). Public paths of public methods, inherited ones included, and every own method's
    defining path."""

    def unlisted(raw: object) -> bool:  # an attribute's own lookups may raise anything (a LocalProxy)
        def check() -> bool:
            func = getattr(raw, "__func__", raw)
            routine = func is not None and inspect.isroutine(func)
            return routine and not (is_function(func) and defined_in(func, package))

        return bool(safe(check, False))

    paths: set[str] = set()
    for entry in found:
        if entry.kind != "class":
            continue
        cls = entry.obj
        defining = f"{safe(lambda c=cls: c.__module__, '')}.{safe(lambda c=cls: c.__qualname__, '')}"
        own = safe(lambda c=cls: dict(vars(c)), None) or {}
        for name, raw in own.items():
            if isinstance(name, str) and unlisted(raw):
                paths.add(f"{defining}.{name}")
        for name in safe(lambda c=cls: list(dir(c)), None) or []:
            if (
                isinstance(name, str)
                and not name.startswith("_")
                and unlisted(safe(lambda c=cls, n=name: inspect.getattr_static(c, n)))
            ):
                paths.update(f"{p}.{name}" for p in entry.paths)
    return sorted(paths)


def methods(cls: type, package: str):
    """(name, defining class, function) for each non-dunder method, inherited ones included."""
    try:
        names = sorted(dir(cls))
    except Exception:
        return
    for name in names:
        if name.startswith("__") and name.endswith("__"):
            continue
        owner = next((k for k in getattr(cls, "__mro__", ()) if name in vars(k)), None)
        if owner is None:
            continue
        raw = vars(owner)[name]
        if isinstance(raw, (staticmethod, classmethod)):
            raw = raw.__func__
        if is_function(raw) and defined_in(raw, package):
            yield name, owner, raw


def is_function(obj: object) -> bool:
    return inspect.isfunction(obj) or type(obj).__name__ in COMPILED_FUNCTIONS


def safe(call, default=None):
    try:
        return call()
    except Exception:
        return default


def source_text(obj: object) -> str:
    text = safe(lambda: inspect.getsource(obj), "") or ""
    if not text and (found := safe(lambda: compiled_definition(obj))):
        text = found[2]
    return text


def compiled_definition(obj: object) -> tuple[str, int, str] | None:
    """(file, line, source) of an object whose module is compiled (a Cython extension) but ships
    its `.py` beside the extension file, as falcon's wheels do; `inspect` reads no source there."""
    module = sys.modules.get(getattr(obj, "__module__", None) or "")
    file = getattr(module, "__file__", None) or ""
    if not file.endswith(tuple(importlib.machinery.EXTENSION_SUFFIXES)):
        return None
    path = os.path.join(os.path.dirname(file), os.path.basename(file).split(".", 1)[0] + ".py")
    tree = _parsed(path)
    qualname = safe(lambda: obj.__qualname__)
    if tree is None or not isinstance(qualname, str):
        return None
    node: ast.AST = tree
    for part in qualname.split("."):
        node = next(
            (
                n
                for n in getattr(node, "body", [])
                if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and n.name == part
            ),
            None,
        )
        if node is None:
            return None
    first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
    lines = read_text(path).splitlines(keepends=True)[first - 1 : node.end_lineno]
    return path, first, "".join(lines)


@functools.lru_cache(maxsize=64)
def _parsed(path: str) -> ast.Module | None:
    """The source beside a compiled module, parsed once (every object of the module asks)."""
    return safe(lambda: ast.parse(read_text(path))) if os.path.isfile(path) else None


def is_deprecated(entry: Found, doc: str | None) -> bool:
    obj = entry.obj
    if safe(lambda: getattr(obj, "__deprecated__", None)):  # PEP 702's @warnings.deprecated
        return True
    if doc and says_deprecated(doc):
        return True
    text = source_text(obj)
    if entry.kind == "class":  # its decorators and its constructor, not every method's body
        statement = CLASS_STATEMENT.search(text)
        text = text[: statement.start()] if statement else ""
        for name in ("__init__", "__new__"):
            raw = vars(obj).get(name)
            raw = getattr(raw, "__func__", raw)
            if is_function(raw):
                text += source_text(raw)
    return bool(DEPRECATED_DECORATOR.search(text) or WARN_DEPRECATION.search(text))


def says_deprecated(doc: str) -> bool:
    """A `.. deprecated::` note, a line that opens with "Deprecated", or the word in the summary
    paragraph; not a mention elsewhere (pandas' `DataFrame.map`: "applymap was deprecated and
    renamed to DataFrame.map")."""
    if DEPRECATED_NOTE.search(doc):
        return True
    summary = inspect.cleandoc(doc).split("\n\n", 1)[0]
    return "deprecated" in summary.lower()


def has_inherited_doc(entry: Found, doc: str | None) -> bool:
    """The doc is a base class's: the same-named attribute's for a method, a base's own for a class."""
    if doc is None:
        return False
    if entry.kind == "class":
        bases = entry.obj.__mro__[1:]
        return any(b is not object and safe(lambda b=b: inspect.getdoc(b)) == doc for b in bases)
    if entry.kind == "method" and entry.owner is not None:
        for base in entry.owner.__mro__[1:]:
            raw = vars(base).get(entry.attr)
            if raw is not None and safe(lambda r=raw: inspect.getdoc(getattr(r, "__func__", r))) == doc:
                return True
    return False


def describe(entry: Found) -> dict:
    obj = entry.obj
    doc = safe(lambda: inspect.getdoc(obj))
    source_file = safe(lambda: inspect.getsourcefile(obj))
    lineno = safe(lambda: inspect.getsourcelines(obj)[1])
    if not source_file and (found := safe(lambda: compiled_definition(obj))):
        source_file, lineno = found[0], found[1]
    signature = safe(lambda: str(inspect.signature(obj)))
    qualname = getattr(obj, "__qualname__", getattr(obj, "__name__", "?"))
    return {
        "kind": entry.kind,
        "canonical": f"{obj.__module__}.{qualname}",
        "module": obj.__module__,
        "paths": sorted(entry.paths),
        "signature": signature,
        "doc": doc,
        "has_source": bool(source_file) and source_file.endswith(".py"),
        "source_file": source_file,
        "lineno": lineno,
        "deprecated": is_deprecated(entry, doc),
        "inherited_doc": has_inherited_doc(entry, doc),
    }


def package_dir(package: str) -> str | None:
    """Where the package's files are, found without executing it."""
    spec = safe(lambda: importlib.util.find_spec(package))
    if spec is None:
        return None
    locations = list(spec.submodule_search_locations or [])
    return locations[0] if locations else None


def unread_files(package: str, modules: dict[str, object], failed: dict[str, str]) -> dict[str, str]:
    """Module name -> source file of every module under a failed one that was not imported."""
    root = package_dir(package)
    if root is None:
        return {}
    found: dict[str, str] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(
            d
            for d in dirnames
            if d != "__pycache__" and os.path.isfile(os.path.join(dirpath, d, "__init__.py"))
        )
        rel = os.path.relpath(dirpath, root)
        parts = [package] + ([] if rel == "." else rel.split(os.sep))
        for filename in sorted(filenames):
            if not filename.endswith(".py"):
                continue
            stem = filename[:-3]
            name = ".".join(parts if stem == "__init__" else [*parts, stem])
            if stem in SKIP_MODULES or name in modules:
                continue
            if any(name == f or name.startswith(f + ".") for f in failed):
                found[name] = os.path.join(dirpath, filename)
    return found


def _literal_all(tree: ast.Module) -> set[str] | None:
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets
        ):
            value = safe(lambda node=node: ast.literal_eval(node.value))
            if isinstance(value, (list, tuple, set)):
                return {v for v in value if isinstance(v, str)}
    return None


def static_apis(modname: str, path: str) -> list[dict] | None:
    """What a module that could not be imported defines and re-exports, from its AST: enough to
    tell whether a newer version's API existed here (paths, canonical, module), never to run it.
    None when its source does not parse either."""
    tree = safe(lambda: ast.parse(read_text(path)))
    if tree is None:
        return None
    exported = _literal_all(tree)
    public_module = is_public_path(modname)

    def public(name: str) -> bool:
        return public_module and (name in exported if exported is not None else not name.startswith("_"))

    package = modname if path.endswith("__init__.py") else modname.rpartition(".")[0]
    found = []
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            kind = "class" if isinstance(node, ast.ClassDef) else "function"
            paths = [f"{modname}.{node.name}"] if public(node.name) else []
            found.append(_static(f"{modname}.{node.name}", modname, kind, paths))
            if isinstance(node, ast.ClassDef):
                for item in node.body:
                    if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)) and not item.name.startswith(
                        "__"
                    ):
                        method_paths = (
                            [f"{p}.{item.name}" for p in paths] if not item.name.startswith("_") else []
                        )
                        found.append(
                            _static(f"{modname}.{node.name}.{item.name}", modname, "method", method_paths)
                        )
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: from the package, `level - 1` packages up
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - (node.level - 1)]
                source = ".".join([*anchor, *([node.module] if node.module else [])])
            else:
                source = node.module or ""
            for alias in node.names:
                local = alias.asname or alias.name
                if alias.name != "*" and public(local) and source.split(".")[0] == modname.split(".")[0]:
                    found.append(
                        _static(f"{source}.{alias.name}", source, "reexport", [f"{modname}.{local}"])
                    )
    return found


def submodule_exports(package: str, modules: dict[str, object]) -> dict:
    """The package's public first-level submodules and those its `__all__` names (None: no `__all__`)."""
    subs = sorted({m.split(".")[1] for m in modules if m.count(".") >= 1 and is_public_path(m.split(".")[1])})
    exported = getattr(modules.get(package), "__all__", None)
    if not isinstance(exported, (list, tuple, set, frozenset)):
        return {"public": subs, "exported": None}
    return {"public": subs, "exported": sorted(set(subs) & {n for n in exported if isinstance(n, str)})}


def read_text(path: str) -> str:
    with open(path, encoding="utf-8") as f:
        return f.read()


def _static(canonical: str, module: str, kind: str, paths: list[str]) -> dict:
    return {"kind": kind, "canonical": canonical, "module": module, "paths": sorted(paths), "static": True}


def licence(dist: str | None) -> tuple[str | None, list[str]]:
    """The licence expression or License field (first line of a pasted text), else the classifiers."""
    meta = safe(lambda: importlib.metadata.metadata(dist)) if dist else None
    if meta is None:
        return None, []
    classifiers = [
        c.split("::")[-1].strip() for c in meta.get_all("Classifier") or [] if c.startswith("License ::")
    ]
    text = (meta.get("License-Expression") or meta.get("License") or "").strip()
    if text.upper() == "UNKNOWN":
        text = ""
    if text and ("\n" in text or len(text) > 100) and classifiers:
        text = ""  # a whole licence text pasted into the field: the classifiers say it better
    return (text.splitlines()[0][:100] if text else "; ".join(classifiers) or None), classifiers


def distribution_of(package: str, given: str | None) -> str | None:
    names = safe(lambda: importlib.metadata.packages_distributions().get(package), None) or []
    return names[0] if names else given


def introspect(package: str, dist: str | None) -> dict:
    warnings.simplefilter("ignore")
    modules, failed = import_modules(package)
    dist = distribution_of(package, dist)
    text, classifiers = licence(dist)
    entries = collect(package, modules)
    apis = [describe(e) for e in entries]
    read: list[str] = []
    for name, path in unread_files(package, modules, failed).items():
        found = static_apis(name, path)
        if found is not None:
            apis += found
            read.append(name)
    apis.sort(key=lambda a: (a["canonical"], a["kind"]))
    return {
        "package": package,
        "distribution": dist,
        "version": safe(lambda: importlib.metadata.version(dist)) if dist else None,
        "python": sys.version.split()[0],
        "license": text,
        "license_classifiers": classifiers,
        "modules": sorted(modules),
        "submodules": submodule_exports(package, modules),
        # paths that exist without being an API of this listing: a dependency's objects the package
        # re-exports, its compiled classes' other methods
        "other_paths": sorted({*external_paths(package, modules), *unlisted_method_paths(entries, package)}),
        "failed_modules": dict(sorted(failed.items())),
        "static_modules": sorted(read),
        "apis": apis,
    }


def top_level(dist: str) -> list[str]:
    """Import names the distribution provides (packages_distributions, names compared normalised)."""
    norm = re.sub(r"[-_.]+", "-", dist).lower()
    mapping = importlib.metadata.packages_distributions()
    return sorted(
        n for n, ds in mapping.items() if any(re.sub(r"[-_.]+", "-", d).lower() == norm for d in ds)
    )


def main(argv: list[str]) -> int:
    sys.stdout.flush()
    out = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(2, 1)  # whatever imported code prints (Python or C level) goes to stderr
    if len(argv) == 2 and argv[0] == "--top-level":
        result: object = top_level(argv[1])
    elif len(argv) in (1, 3) and not argv[0].startswith("-") and (len(argv) == 1 or argv[1] == "--dist"):
        result = introspect(argv[0], argv[2] if len(argv) == 3 else None)
    else:
        print(__doc__, file=sys.stderr)
        return 2
    json.dump(result, out, default=str)
    out.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
