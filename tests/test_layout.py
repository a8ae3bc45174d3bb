"""The package's shape: its modules import one another without a cycle, and never the repository's catalogue.

A cycle means two modules cannot be read, tested or moved apart; an import of
`fixtures` or `benchmarks` means the installed plugin fails in a user's project,
where neither exists (issue 35). Every import counts, also one inside a function
or under TYPE_CHECKING: a lazy import is a cycle put off, not removed.
"""

import ast
import graphlib
from collections.abc import Callable
from pathlib import Path

import pytest

import optbench

PACKAGE = Path(optbench.__file__).parent
REPOSITORY_ONLY = ("fixtures", "benchmarks", "tests")


def imported(path: Path, package: str) -> set[str]:
    """The absolute names of what `path`, a module of `package`, imports anywhere in its body (`optbench.x`,
    `torch`, ...)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package.rsplit(".", node.level - 1)[0] if node.level else ""
            module = ".".join(filter(None, [base, node.module]))
            names.add(module)
            # `from . import x` and `from optbench import x` may name modules, not only attributes.
            names.update(f"{module}.{alias.name}" for alias in node.names)
    return names


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def package_of(path: Path) -> str:
    return ".".join(path.parent.relative_to(PACKAGE.parent).parts)


def package_graph() -> dict[str, set[str]]:
    """Each optbench module and the optbench modules it imports (the package's own `__init__` left out: it
    re-exports lazily, and every module's import of `optbench.x` passes through it)."""
    modules = {module_name(path): path for path in PACKAGE.rglob("*.py")}
    return {
        name: {
            other
            for other in imported(path, package_of(path))
            if other in modules and other not in (name, PACKAGE.name)
        }
        for name, path in modules.items()
    }


def test_no_module_of_the_package_imports_another_that_imports_it_back():
    try:
        order = list(graphlib.TopologicalSorter(package_graph()).static_order())
    except graphlib.CycleError as cycle:
        pytest.fail(f"import cycle: {' -> '.join(cycle.args[1])}")
    assert "optbench.verdict.stats" in order and "optbench.plugin" in order


def test_the_package_never_imports_the_repositorys_catalogue_or_tests():
    assert offenders(lambda name: name.split(".")[0] in REPOSITORY_ONLY) == {}


def offenders(wrong: Callable[[str], bool]) -> dict[str, list[str]]:
    """Each package module and the names it imports that are `wrong`, where it imports any."""
    found = {
        module_name(path): sorted(filter(wrong, imported(path, package_of(path)))) for path in PACKAGE.rglob("*.py")
    }
    return {module: names for module, names in found.items() if names}


def private(name: str) -> bool:
    """A private module of torch or pytest-benchmark (a dotted part with a leading underscore)."""
    parts = name.split(".")
    return parts[0] in ("torch", "pytest_benchmark") and any(part.startswith("_") for part in parts[1:])


def test_private_torch_and_pytest_benchmark_apis_are_reached_only_through_internals():
    """internals.py guards each one and says what is lost when a release moves it; an import elsewhere would
    break instead. pytest-benchmark's session, a private attribute, is read there too."""
    assert list(offenders(private)) == ["optbench.internals"]
    readers = [path.name for path in PACKAGE.rglob("*.py") if "_benchmarksession" in path.read_text()]
    assert readers == ["internals.py"]


def test_the_graph_sees_relative_lazy_and_type_checking_imports(tmp_path):
    """The two tests above must be able to fail: each kind of import that hid a cycle or the catalogue is seen."""
    assert "optbench.measuring.in_effect" in package_graph()["optbench.measuring.case"]
    sample = tmp_path / "sample.py"
    sample.write_text(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from .case import Case\n"
        "def build():\n    from fixtures.models import inference_workload\n    from ..verdict import stats\n"
    )
    found = imported(sample, "optbench.measuring")
    assert {"optbench.measuring.case", "fixtures.models", "optbench.verdict.stats"} <= found
    assert private("torch.utils._pytree.tree_map") and private("torch._dynamo") and not private("torch.nn.functional")


def test_the_public_api_is_what_the_package_exports_and_each_name_resolves():
    """`from optbench import X` for every declared name, each from its home, and nothing undeclared."""
    assert sorted(optbench.__all__) == sorted(name for names in optbench._HOMES.values() for name in names)
    for name in optbench.__all__:
        assert getattr(optbench, name).__module__.startswith("optbench.") or name.isupper()
    with pytest.raises(AttributeError, match="no attribute 'stats'"):
        optbench.stats  # noqa: B018
