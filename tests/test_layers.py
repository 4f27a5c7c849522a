"""The package's shape, from its imports: layers one way down, no circle, no private name shared.

`LAYERS` is the one place the layer order is written. A module may import
from its own layer and from the layers below it, never from one above; no
module takes part in an import circle, whether the import is at the top of
the file, inside a function or under ``TYPE_CHECKING`` (a circle dodged by
an import inside a function is still a circle); and no module imports a
``_private`` name of another module, nor reaches one as ``module._name``
(a concern that needs several files is a package whose private modules
share public names); and a private module (``_name.py``) is imported only
from inside the package that holds it: the rest of xbot reaches a package
through its face, the package's ``__init__``.

Every failure names the import with its file and line. The walk reads the
source (`ast`): nothing is imported, so it is quick and sees every import,
whichever branch it sits in.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterator
from pathlib import Path

import attrs
import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "xbot"
# The stand-ins live beside the product, in a package of their own, placed in the same
# table: above the bot they run, below the demo, the one product module that imports them.
STANDINS = PACKAGE.parent / "standins"

# Top to bottom. An entry is a module or a package (with everything under it);
# a module belongs to its longest entry. The bare "xbot" is the package's own
# __init__ only (__version__), never a catch-all: a new module or package
# fails `test_every_module_has_a_layer` until it is placed here.
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    # The command line: starts the bot, the demo or an operator command.
    ("entry points", ("xbot.__main__", "xbot.cli", "xbot.demo")),
    # Test doubles of the services the bot talks to, and the harness that runs the
    # real bot against them (`standins/`, beside `xbot/`). Only the demo above imports
    # them; product code never (`test_only_the_demo_imports_the_standins`).
    ("stand-ins", ("standins",)),
    # The running bot: starts what the root wires, supervised by systemd, stopped cleanly.
    ("runtime", ("xbot.runtime",)),
    # The composition root: the one place that builds and wires the services.
    ("composition root", ("xbot.app",)),
    # The operator's side that the runtime or the CLI calls: doctor, the queue and cache
    # commands, the instance lock, systemd's notify protocol, the metrics listener.
    ("operator", ("xbot.ops",)),
    # Telegram updates in, durable tasks out.
    ("handlers", ("xbot.handlers",)),
    # What the handlers use: their typed PTB context, who may do what, inline fetches.
    ("services", ("xbot.services",)),
    # Updates coming in: the durable poller, the webhook listener, how an update came
    # in (the handlers ask `intake` whether Telegram sends it again).
    ("receiving", ("xbot.receiving",)),
    # The task kinds and the worker that runs them.
    ("tasks", ("xbot.tasks",)),
    # Where a post comes from, and what goes to Telegram.
    ("sources, sending", ("xbot.sources", "xbot.sending")),
    # The SQLite file, and a post's media (pixiv's ugoira frames into an MP4 by ffmpeg among
    # them: below the delivery that sends it and the pixiv source that checks its frames).
    ("storage, media", ("xbot.storage", "xbot.media", "xbot.media.ugoira")),
    # What every layer shares: values and pure functions with no I/O of their own.
    (
        "base values",
        (
            "xbot",
            "xbot.clock",  # the clock pair and the time line every layer reads `now` from
            "xbot.config",
            "xbot.durations",  # a span of seconds in the operator's words
            "xbot.errors",
            "xbot.i18n",
            "xbot.links",
            "xbot.logs",
            "xbot.metrics",
            "xbot.periodic",  # the loop that runs a step every few seconds (sweep, canary...)
            "xbot.tls",  # the one TLS context the HTTP clients share
            "xbot.versions",
        ),
    ),
)


@attrs.frozen
class Import:
    """One import of an xbot module by another, where it is written."""

    importer: str
    imported: str
    path: Path
    line: int
    names: tuple[str, ...]  # what a ``from … import`` takes from ``imported``

    def where(self) -> str:
        taken = f" ({', '.join(self.names)})" if self.names else ""
        return f"{_shown(self.path)}:{self.line}: {self.importer} imports {self.imported}{taken}"


def _shown(path: Path) -> str:
    """``path`` from its package's directory on (``xbot/links/__init__.py``)."""
    text = path.as_posix()
    return text[max(text.rfind("/xbot/"), text.rfind("/standins/")) + 1 :]


def modules(root: Path = PACKAGE) -> dict[str, Path]:
    """Every module of the package by dotted name (a package by its ``__init__``)."""
    found = {}
    for path in sorted(root.rglob("*.py")):
        parts = path.relative_to(root.parent).with_suffix("").parts
        found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def _base(importer: str, path: Path, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    package = importer.split(".") if path.name == "__init__.py" else importer.split(".")[:-1]
    package = package[: len(package) - (node.level - 1)]
    return ".".join([*package, *([node.module] if node.module else [])])


def imports(found: dict[str, Path]) -> Iterator[Import]:
    """Every import between the package's modules, wherever in a file it is written.

    ``from xbot.a import b`` is an import of the module ``xbot.a.b`` when there is
    one, else of ``xbot.a`` (taking the name ``b``).
    """
    for importer, path in found.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name in found:
                        yield Import(importer, alias.name, path, node.lineno, ())
            elif isinstance(node, ast.ImportFrom):
                base = _base(importer, path, node)
                names = []
                for alias in node.names:
                    if f"{base}.{alias.name}" in found:
                        yield Import(importer, f"{base}.{alias.name}", path, node.lineno, ())
                    else:
                        names.append(alias.name)
                if names and base in found:
                    yield Import(importer, base, path, node.lineno, tuple(names))


def layer_of(module: str) -> int | None:
    """The index in `LAYERS` of the longest entry that holds ``module``; None if none does."""
    best: tuple[int, int] | None = None  # (entry length, layer)
    for index, (_, entries) in enumerate(LAYERS):
        for entry in entries:
            holds = module == entry or (entry != "xbot" and module.startswith(entry + "."))
            if holds and (best is None or len(entry) > best[0]):
                best = (len(entry), index)
    return None if best is None else best[1]


def upward(found: dict[str, Path]) -> list[str]:
    """Each import of a module in a higher layer than the importer's."""
    bad = []
    for imp in imports(found):
        low, high = layer_of(imp.importer), layer_of(imp.imported)
        if low is not None and high is not None and high < low:
            bad.append(f"{imp.where()}: up from {LAYERS[low][0]} to {LAYERS[high][0]}")
    return bad


def folder_of(module: str) -> str:
    """The folder (first-level package) ``module`` lives in; a top-level module is its own."""
    return ".".join(module.split(".")[:2])


def circles(
    found: dict[str, Path], unit: Callable[[str], str] = lambda module: module
) -> list[list[Import]]:
    """The import circles: each strongly connected set of units (modules, or with `unit`
    e.g. `folder_of`, what holds them), as one circle through it, each step an import."""
    edges: dict[str, dict[str, Import]] = {}
    for imp in imports(found):
        importer, imported = unit(imp.importer), unit(imp.imported)
        if importer != imported:
            edges.setdefault(importer, {}).setdefault(imported, imp)
    # Tarjan's strongly connected components, iteratively (no recursion limit).
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []
    for start in sorted({unit(module) for module in found}):
        if start in index:
            continue
        work = [(start, iter(sorted(edges.get(start, {}))))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, successors = work[-1]
            for nxt in successors:
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(edges.get(nxt, {})))))
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        components.append(sorted(component))
    return [_circle_through(set(c), edges) for c in components]


def _circle_through(members: set[str], edges: dict[str, dict[str, Import]]) -> list[Import]:
    """One circle inside a strongly connected set, from its first module back to it."""
    start = min(members)
    paths: dict[str, list[Import]] = {start: []}
    frontier = [start]
    while frontier:  # breadth first: the shortest way back to the start
        later = []
        for node in frontier:
            for nxt, imp in sorted(edges.get(node, {}).items()):
                if nxt == start:
                    return [*paths[node], imp]
                if nxt in members and nxt not in paths:
                    paths[nxt] = [*paths[node], imp]
                    later.append(nxt)
        frontier = later
    raise AssertionError(f"no circle through {sorted(members)}")  # pragma: no cover


def private_names(found: dict[str, Path]) -> list[str]:
    """Each ``_name`` a module takes from another: imported, or reached as ``module._name``."""
    bad = []
    for imp in imports(found):
        rel = _shown(imp.path)
        for name in imp.names:
            if name.startswith("_") and not name.startswith("__"):
                bad.append(f"{rel}:{imp.line}: {imp.importer} imports {imp.imported}.{name}")
    for importer, path in found.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        aliases = _module_aliases(importer, path, tree, found)
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Name)
                and node.value.id in aliases
                and node.attr.startswith("_")
                and not node.attr.startswith("__")
            ):
                rel = _shown(path)
                owner = aliases[node.value.id]
                bad.append(f"{rel}:{node.lineno}: {importer} reaches {owner}.{node.attr}")
    return bad


def private_modules(found: dict[str, Path]) -> list[str]:
    """Each import of a ``_private`` module from outside the package that holds it."""
    bad = []
    for imp in imports(found):
        parts = imp.imported.split(".")
        hidden = [i for i, part in enumerate(parts) if part.startswith("_")]
        hidden = [i for i in hidden if not parts[i].startswith("__")]
        if hidden:
            package = ".".join(parts[: hidden[0]])
            if imp.importer != package and not imp.importer.startswith(package + "."):
                bad.append(f"{imp.where()}: a private module of {package}, from outside it")
    return bad


def _module_aliases(
    importer: str, path: Path, tree: ast.AST, found: dict[str, Path]
) -> dict[str, str]:
    """The local names that stand for another xbot module in ``tree``."""
    aliases = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name in found and alias.asname:
                    aliases[alias.asname] = alias.name
        elif isinstance(node, ast.ImportFrom):
            base = _base(importer, path, node)
            for alias in node.names:
                if f"{base}.{alias.name}" in found:
                    aliases[alias.asname or alias.name] = f"{base}.{alias.name}"
    return aliases


# --- the package as it is ------------------------------------------------------------------------

FOUND = {**modules(), **modules(STANDINS)}


def test_the_walk_finds_the_package() -> None:
    assert {"xbot", "xbot.app", "xbot.storage.queue", "xbot.handlers.messages"} <= set(FOUND)
    edges = {(i.importer, i.imported) for i in imports(FOUND)}
    assert ("xbot.app", "xbot.storage.queue") in edges


def test_only_the_demo_imports_the_standins() -> None:
    """The product never needs a stand-in; `xbot demo` is the one command that runs them."""
    assert "standins.botapi" in FOUND
    bad = [
        imp.where()
        for imp in imports(FOUND)
        if imp.importer.startswith("xbot")
        and imp.importer != "xbot.demo"
        and imp.imported.split(".")[0] == "standins"
    ]
    assert bad == [], "product modules importing the stand-ins:\n" + "\n".join(bad)


def test_the_tests_reach_the_standins_through_their_face() -> None:
    """Tests and bench/ import `standins` or its public modules, never a ``_private`` one."""
    bad = []
    for folder in ("tests", "bench"):
        for path in sorted((PACKAGE.parent / folder).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.ImportFrom) and not node.level:
                    named = [node.module or ""]
                    if node.module == "standins":  # from standins import _mediabytes
                        named = [f"standins.{alias.name}" for alias in node.names]
                elif isinstance(node, ast.Import):
                    named = [alias.name for alias in node.names]
                else:
                    continue
                for name in named:
                    parts = name.split(".")
                    if parts[0] == "standins" and any(p.startswith("_") for p in parts[1:]):
                        bad.append(f"{path.relative_to(PACKAGE.parent)}:{node.lineno}: {name}")
    assert bad == [], "private modules of the stand-ins imported:\n" + "\n".join(bad)


def test_every_module_has_a_layer() -> None:
    unplaced = [m for m in FOUND if layer_of(m) is None]
    assert unplaced == [], f"place these in LAYERS (tests/test_layers.py): {unplaced}"


def test_imports_run_down_the_layers() -> None:
    bad = upward(FOUND)
    assert bad == [], "imports up the layers:\n" + "\n".join(bad)


def test_no_import_circle() -> None:
    found = ["\n".join(i.where() for i in circle) for circle in circles(FOUND)]
    assert found == [], "import circles:\n" + "\n\n".join(found)


def test_no_folder_is_above_and_below_another() -> None:
    """The folders follow the layers: none imports a folder that imports it back."""
    found = ["\n".join(i.where() for i in circle) for circle in circles(FOUND, folder_of)]
    assert found == [], "folders importing each other:\n" + "\n\n".join(found)


def test_no_private_name_crosses_a_module() -> None:
    bad = private_names(FOUND)
    assert bad == [], "private names imported across modules:\n" + "\n".join(bad)


def test_a_private_module_is_reached_only_from_its_package() -> None:
    bad = private_modules(FOUND)
    assert bad == [], "private modules imported from outside their package:\n" + "\n".join(bad)


# --- the checks see what they are for --------------------------------------------------------


def _package(tmp_path: Path, files: dict[str, str]) -> dict[str, Path]:
    for name, text in files.items():
        path = tmp_path / "xbot" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return modules(tmp_path / "xbot")


@pytest.mark.parametrize(
    ("files", "expected"),
    [
        (
            {"__init__.py": "", "links.py": "from xbot.storage import db\n", "storage/db.py": ""},
            ["xbot/links.py:1: xbot.links imports xbot.storage.db: up from base values to"],
        ),
        (
            {
                "__init__.py": "",
                "sending/__init__.py": "",
                "sending/sender.py": "def f():\n    from xbot.tasks.payloads import SentItem\n",
                "tasks/payloads.py": "",
            },
            ["xbot/sending/sender.py:2: xbot.sending.sender imports xbot.tasks.payloads (Sent"],
        ),
        (
            {
                "__init__.py": "",
                "tasks/__init__.py": "",
                "tasks/worker.py": "from ..handlers import answers\n",
                "handlers/__init__.py": "",
                "handlers/answers.py": "",
            },
            ["xbot/tasks/worker.py:1: xbot.tasks.worker imports xbot.handlers.answers: up"],
        ),
    ],
    ids=["base-to-storage", "inside-a-function", "relative"],
)
def test_the_check_sees_an_upward_import(
    tmp_path: Path, files: dict[str, str], expected: list[str]
) -> None:
    found = upward(_package(tmp_path, files))
    assert [line[: len(expected[0])] for line in found] == expected


def test_the_check_sees_a_circle(tmp_path: Path) -> None:
    found = _package(
        tmp_path,
        {
            "__init__.py": "",
            "a.py": "import xbot.b\n",
            "b.py": "import typing\nif typing.TYPE_CHECKING:\n    from xbot.c import C\n",
            "c.py": "def f():\n    from xbot import a\n",
            "d.py": "import xbot.a\n",
        },
    )
    assert [[i.where() for i in circle] for circle in circles(found)] == [
        [
            "xbot/a.py:1: xbot.a imports xbot.b",
            "xbot/b.py:3: xbot.b imports xbot.c (C)",
            "xbot/c.py:2: xbot.c imports xbot.a",
        ]
    ]


def test_the_check_sees_folders_importing_each_other(tmp_path: Path) -> None:
    found = _package(
        tmp_path,
        {
            "__init__.py": "",
            "ops/__init__.py": "",
            "ops/cli.py": "from xbot import app\n",
            "ops/notify.py": "",
            "app.py": "from xbot.ops import notify\n",
        },
    )
    assert circles(found) == []  # module by module, no circle
    assert [[i.where() for i in circle] for circle in circles(found, folder_of)] == [
        [
            "xbot/app.py:1: xbot.app imports xbot.ops.notify",
            "xbot/ops/cli.py:1: xbot.ops.cli imports xbot.app",
        ]
    ]


def test_the_check_sees_a_private_name(tmp_path: Path) -> None:
    found = _package(
        tmp_path,
        {
            "__init__.py": "",
            "a.py": "_X = 1\ndef _f(): ...\n",
            "b.py": "from xbot.a import _X, __doc__\nfrom xbot import a\nprint(a._f, a.__name__)\n",
        },
    )
    assert private_names(found) == [
        "xbot/b.py:1: xbot.b imports xbot.a._X",
        "xbot/b.py:3: xbot.b reaches xbot.a._f",
    ]


def test_the_check_sees_a_private_module_reached_from_outside(tmp_path: Path) -> None:
    found = _package(
        tmp_path,
        {
            "__init__.py": "",
            "pkg/__init__.py": "from xbot.pkg._part import X\n",
            "pkg/_part.py": "X = 1\n",
            "pkg/inner/__init__.py": "from xbot.pkg import _part\n",
            "user.py": (
                "from xbot.pkg._part import X\nimport xbot.pkg._part\nfrom xbot.pkg import X\n"
            ),
        },
    )
    assert private_modules(found) == [
        "xbot/user.py:1: xbot.user imports xbot.pkg._part (X): a private module of xbot.pkg,"
        " from outside it",
        "xbot/user.py:2: xbot.user imports xbot.pkg._part: a private module of xbot.pkg,"
        " from outside it",
    ]
