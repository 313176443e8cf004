"""The package's layers: the spec frontend loads specs and needs none of the passes that consume them."""

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "cubridge"


def module_file(module: str) -> Path | None:
    """The source of a `cubridge...` module or package, if it is one."""
    path = PACKAGE.parent.joinpath(*module.split("."))
    for candidate in (path.with_suffix(".py"), path / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def imported_modules(module: str) -> set[str]:
    """The cubridge modules that importing `module` runs, directly: every import statement in it (those in
    functions too), with the packages that hold each imported module."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(module_file(module).read_text())):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            assert node.level == 0, f"{module}: the package uses absolute imports only"
            names = [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
        else:
            continue
        for name in names:
            parts = name.split(".")
            found |= {".".join(parts[:i]) for i in range(1, len(parts) + 1)}
    return {name for name in found if name.startswith("cubridge") and module_file(name) is not None}


def reachable(start: str) -> set[str]:
    """Modules `start` can import. The root package's only import is `cubridge.attention`'s, on first access
    of that attribute (its module-level `__getattr__`), so the walk does not follow it."""
    seen, pending = set(), [start]
    while pending:
        module = pending.pop()
        if module not in seen:
            seen.add(module)
            pending += imported_modules(module) if module != "cubridge" else []
    return seen


def test_the_root_package_imports_only_on_attribute_access():
    tree = ast.parse((PACKAGE / "__init__.py").read_text())
    assert not any(isinstance(node, ast.Import | ast.ImportFrom) for node in tree.body)


def test_the_graph_sees_imports_inside_functions():
    assert "cubridge.passes.transfer_match" in reachable("cubridge.interpreter.inputs")


def test_frontends_import_nothing_from_passes():
    frontends = sorted(f"cubridge.frontends.{p.stem}" for p in (PACKAGE / "frontends").glob("*.py"))
    assert len(frontends) > 3
    for module in frontends:
        passes = sorted(name for name in reachable(module) if name.startswith("cubridge.passes"))
        assert passes == [], f"{module} imports {passes}"
