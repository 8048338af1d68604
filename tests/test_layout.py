"""The package's layout: the pipeline's stages are folders, and imports only run downwards.

core <- wiki <- results <- {verify, site, agents} <- cli. `results/` is what a run leaves and what readers
need (record and store formats, series statistics, judge, trace, standing, the read side of ladders);
`verify/` is the pipeline that writes it. verify, site and agents are siblings: none imports another, so
the site and the agents read results/ and never load the pipeline. Every import counts: at the top of a
module, inside a function, under TYPE_CHECKING, and a module named in a string (importlib). Inside a
stage, imports form no cycle. The library never prints or parses arguments (that is the CLI's job).

`python tests/test_layout.py` prints the report: each stage's modules and lines, the largest module, the
stages it imports, and the cycles and upward edges found (none).
"""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "kwiki"
# fleet: the Ray backend of the pipeline (an Executor of kwiki.verify), used only by the CLI's `verify --ray`
LAYERS = {"core": 0, "wiki": 1, "results": 2, "verify": 3, "site": 3, "agents": 3, "fleet": 3.5, "cli": 4}
# the one CLI module that may not load the pipeline although the CLI may: `kwiki check` reads results/
READERS = {"cli/check.py"}
MODULE_STRING = re.compile(r"kwiki(?:\.\w+)+(?::\w+)?")


def _modules(package: Path = PACKAGE) -> list[Path]:
    return sorted(p for p in package.rglob("*.py") if "__pycache__" not in p.parts)


def _name(path: Path, package: Path = PACKAGE) -> str:
    rel = path.relative_to(package.parent).with_suffix("")
    parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
    return ".".join(parts)


def _stage_of(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if len(parts) > 2 or (len(parts) == 2 and parts[1] in LAYERS) else None


def _stage(path: Path, package: Path = PACKAGE) -> str | None:
    rel = path.relative_to(package).parts
    return rel[0] if len(rel) > 1 else None


def _docstrings(tree: ast.AST) -> set[int]:
    """ids of the string constants that are docstrings (prose, not imports)."""
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                out.add(id(first.value))
    return out


def _resolve(module: str, name: str | None, package: Path) -> str:
    """`from kwiki.verify import ladders` imports the module kwiki.verify.ladders; `from kwiki.verify.run import
    RunOutcome` the module kwiki.verify.run."""
    if name is not None:
        candidate = package.parent.joinpath(*module.split("."), name)
        if candidate.with_suffix(".py").is_file() or (candidate / "__init__.py").is_file():
            return f"{module}.{name}"
    return module


def imports(path: Path, package: Path = PACKAGE) -> list[tuple[int, str, str]]:
    """(line, module, how) of every kwiki module `path` imports: 'import' (anywhere in the file, inside
    functions too) or 'string' (a module named in a string that is not a docstring, as importlib takes it)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docs = _docstrings(tree)
    own = _name(path, package).split(".")
    out: list[tuple[int, str, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = own if path.name == "__init__.py" else own[:-1]
                anchor = anchor[:len(anchor) - node.level + 1]
                base = ".".join([*anchor, *([base] if base else [])])
            if base.split(".")[0] == "kwiki":
                out += [(node.lineno, _resolve(base, a.name, package), "import") for a in node.names]
        elif isinstance(node, ast.Import):
            out += [(node.lineno, a.name, "import") for a in node.names if a.name.split(".")[0] == "kwiki"]
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs:
            if MODULE_STRING.fullmatch(node.value):
                out.append((node.lineno, node.value.split(":")[0], "string"))
    return out


def upward_edges(package: Path = PACKAGE) -> list[str]:
    """One line per import that does not run downwards: into a stage above, or into a sibling stage."""
    out = []
    for path in _modules(package):
        stage = _stage(path, package)
        if stage is None:
            continue
        rel = path.relative_to(package).as_posix()
        for line, module, how in imports(path, package):
            other = _stage_of(module)
            if other is None or other not in LAYERS:
                continue
            if other == stage and not (rel in READERS and other == "cli"):
                continue
            wrong = LAYERS[other] >= LAYERS[stage] or (rel in READERS and other == "verify")
            if wrong:
                kind = " (in a string)" if how == "string" else ""
                out.append(f"kwiki/{rel}:{line}: {stage} imports {module}{kind}, which sits above or beside it")
    return list(dict.fromkeys(out))


def graph(package: Path = PACKAGE) -> dict[str, set[str]]:
    """module -> the modules of its own stage it imports (every import counted)."""
    names = {_name(p, package): p for p in _modules(package)}
    out: dict[str, set[str]] = {}
    for name, path in names.items():
        stage = _stage(path, package)
        edges = {m for _, m, _ in imports(path, package)
                 if m in names and m != name and _stage_of(m) == stage and stage is not None}
        out[name] = edges
    return out


def cycles(package: Path = PACKAGE) -> list[list[str]]:
    """The import cycles inside a stage: each strongly connected set of more than one module (Tarjan)."""
    g = graph(package)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(g[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            scc = []
            while True:
                w = stack.pop()
                on.discard(w)
                scc.append(w)
                if w == v:
                    break
            if len(scc) > 1:
                found.append(sorted(scc))

    for v in sorted(g):
        if v not in index:
            visit(v)
    return sorted(found)


def report(package: Path = PACKAGE) -> str:
    """The layout as text: per stage (lowest first) its modules, lines, largest module and the stages it
    imports; then the upward edges and cycles (both should read 'none')."""
    lines = ["stage     layer modules  lines  largest module                 imports"]
    by_stage: dict[str, list[Path]] = {}
    for path in _modules(package):
        if path.name != "__init__.py" or path.stat().st_size > 200:
            by_stage.setdefault(_stage(path, package) or "kwiki", []).append(path)
    for stage in sorted(by_stage, key=lambda s: (LAYERS.get(s, -1), s)):
        paths = by_stage[stage]
        sizes = {p: len(p.read_text(encoding="utf-8").splitlines()) for p in paths}
        big = max(paths, key=lambda p: sizes[p])
        uses = sorted({st for p in paths for _, m, _ in imports(p, package)
                       if (st := _stage_of(m)) is not None and st != stage},
                      key=lambda s: (LAYERS.get(s, -1), s))
        lines.append(f"{stage:<9} {LAYERS.get(stage, '-')!s:>5} {len(paths):>7} {sum(sizes.values()):>6}  "
                     f"{big.relative_to(package).as_posix() + f' ({sizes[big]})':<30} {', '.join(uses) or '-'}")
    up, cyc = upward_edges(package), cycles(package)
    lines.append("upward edges: " + ("none" if not up else "\n  " + "\n  ".join(up)))
    lines.append("cycles inside a stage: " + ("none" if not cyc else "; ".join(" -> ".join(c) for c in cyc)))
    return "\n".join(lines)


def test_every_module_lives_in_a_stage_folder() -> None:
    loose = [p.name for p in PACKAGE.glob("*.py") if p.name != "__init__.py"]
    assert loose == [], f"modules outside a stage folder: {loose}"
    assert {p.name for p in PACKAGE.iterdir() if p.is_dir() and p.name != "__pycache__"} == set(LAYERS)


def test_imports_only_run_downwards() -> None:
    assert upward_edges() == []


def test_no_import_cycle_inside_a_stage() -> None:
    assert cycles() == [], "import cycles inside a stage (imports inside functions count)"


def test_results_sit_below_the_pipeline_and_the_readers_import_them() -> None:
    stages = {s: {st for p in _modules() if _stage(p) == s for _, m, _ in imports(p) if (st := _stage_of(m))}
              for s in LAYERS}
    assert "results" in stages["verify"] and "verify" not in stages["results"]
    for reader in ("site", "agents"):
        assert "results" in stages[reader] and "verify" not in stages[reader], reader
    assert not any(_stage_of(m) == "verify" for _, m, _ in imports(PACKAGE / "cli" / "check.py"))


# ---------------------------------------------------------------- the checks themselves can fail


def _package(tmp_path: Path, files: dict[str, str]) -> Path:
    root = tmp_path / "kwiki"
    for stage in LAYERS:
        (root / stage).mkdir(parents=True)
        (root / stage / "__init__.py").write_text("")
    (root / "__init__.py").write_text("")
    for rel, text in files.items():
        (root / rel).write_text(text)
    return root


def test_the_layout_test_catches_an_upward_import(tmp_path: Path) -> None:
    root = _package(tmp_path, {"results/a.py": "from kwiki.verify.run import x\n",
                               "site/b.py": "def f():\n    from kwiki.verify import run\n",
                               "verify/run.py": "x = 1\n"})
    found = upward_edges(root)
    assert len(found) == 2 and "kwiki/results/a.py:1: results imports kwiki.verify.run" in found[0], found
    assert "kwiki/site/b.py:2: site imports kwiki.verify.run" in found[1], found


def test_the_layout_test_catches_a_string_import_of_a_higher_layer(tmp_path: Path) -> None:
    root = _package(tmp_path, {"wiki/schema.py": '"""Models by name (kwiki.agents.outputs)."""\n'
                                                 'SCHEMAS = {"x.json": "kwiki.agents.outputs:X"}\n'})
    assert upward_edges(root) == ["kwiki/wiki/schema.py:2: wiki imports kwiki.agents.outputs (in a string), "
                                  "which sits above or beside it"]


def test_the_layout_test_catches_a_cycle_through_an_import_inside_a_function(tmp_path: Path) -> None:
    root = _package(tmp_path, {"verify/build.py": "def one():\n    from kwiki.verify.pyartifact import check\n",
                               "verify/pyartifact.py": "from kwiki.verify.build import one\n",
                               "verify/plan.py": "from kwiki.verify import build\n"})
    assert cycles(root) == [["kwiki.verify.build", "kwiki.verify.pyartifact"]]


@pytest.mark.parametrize("path", [p for p in _modules() if _stage(p) not in (None, "cli")],
                         ids=lambda p: str(p.relative_to(PACKAGE)))
def test_library_code_neither_prints_nor_parses_arguments(path: Path) -> None:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "print":
            pytest.fail(f"kwiki/{path.relative_to(PACKAGE)}:{node.lineno}: print() outside kwiki/cli/")
        if isinstance(node, ast.Import) and any(a.name == "argparse" for a in node.names):
            pytest.fail(f"kwiki/{path.relative_to(PACKAGE)}:{node.lineno}: argparse outside kwiki/cli/")


if __name__ == "__main__":
    sys.stdout.write(report() + "\n")
