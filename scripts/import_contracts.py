"""An import-linter contract type: no import circle among the modules of some packages.

import-linter's own ``acyclic_siblings`` contract looks at siblings only (the children of one
package, their descendants squashed into them), so it also fails on two sibling packages that
import each other without any module circle, and it cannot say which modules form one. This
contract looks at modules: it fails on every strongly connected component of more than one
module in the graph of direct imports among the modules of ``containers`` -- every import
statement, wherever it sits (inside a function, under ``if TYPE_CHECKING:``), as grimp records
them -- and prints, for each component, its modules and one circle through it with the line of
every import on the way.

An import of one of the importer's own ancestor packages is not an edge: Python has imported the
ancestors before the module runs, so such an import never decides an order.

Registered in ``pyproject.toml`` (``[tool.importlinter] contract_types``)::

    [[tool.importlinter.contracts]]
    name = "..."
    type = "no_circles"
    containers = ["scheduler", "api"]
    ignore_imports = ["scheduler.a -> scheduler.b"]   # optional; unmatched ones are errors
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Mapping

import grimp
from importlinter.application import contract_utils, output
from importlinter.application.contract_utils import AlertLevel
from importlinter.domain import fields
from importlinter.domain.contract import Contract, ContractCheck

Graph = Mapping[str, frozenset[str]]


def _inside(module: str, containers: Iterable[str]) -> bool:
    return any(module == c or module.startswith(c + ".") for c in containers)


def _own_ancestor(importer: str, imported: str) -> bool:
    return importer.startswith(imported + ".")


def import_graph(graph: grimp.ImportGraph, containers: Iterable[str]) -> dict[str, frozenset[str]]:
    """Module -> the modules of ``containers`` it imports directly (no own ancestors)."""
    containers = tuple(containers)
    modules = {m for m in graph.modules if _inside(m, containers)}
    return {
        m: frozenset(
            n
            for n in graph.find_modules_directly_imported_by(m)
            if n in modules and n != m and not _own_ancestor(m, n)
        )
        for m in modules
    }


def circles(edges: Graph) -> list[list[str]]:
    """The strongly connected components of more than one module, each sorted, sorted
    (Tarjan's algorithm, iterative: a deep chain of imports cannot overflow the stack)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    found: list[list[str]] = []
    counter = 0
    for root in sorted(edges):
        if root in index:
            continue
        work = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, successors = work[-1]
            advanced = False
            for succ in successors:
                if succ not in index:
                    index[succ] = low[succ] = counter
                    counter += 1
                    stack.append(succ)
                    on_stack.add(succ)
                    work.append((succ, iter(sorted(edges[succ]))))
                    advanced = True
                    break
                if succ in on_stack:
                    low[node] = min(low[node], index[succ])
            if advanced:
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return sorted(found)


def one_circle(edges: Graph, component: list[str]) -> list[str]:
    """A shortest circle through the component's first module: ``[a, b, ..., a]``."""
    members = set(component)
    start = component[0]
    previous: dict[str, str] = {}
    queue = deque([start])
    while queue:
        node = queue.popleft()
        for succ in sorted(edges[node] & members):
            if succ == start:
                path = [node]
                while path[-1] != start:
                    path.append(previous[path[-1]])
                return [start, *reversed(path[:-1]), start] if node != start else [start, start]
            if succ not in previous:
                previous[succ] = node
                queue.append(succ)
    raise AssertionError(f"{start} is in no circle of {component}")  # a component has one


class NoCirclesContract(Contract):
    """No import circle among the modules of ``containers`` (see the module docstring)."""

    type_name = "no_circles"

    containers = fields.ListField(subfield=fields.StringField())
    ignore_imports = fields.SetField(subfield=fields.ImportExpressionField(), required=False)

    def check(self, graph: grimp.ImportGraph, verbose: bool) -> ContractCheck:
        removal = contract_utils.remove_ignored_imports_and_report(
            graph=graph,
            ignore_imports=self.ignore_imports,  # type: ignore[arg-type]
            unmatched_alerting=AlertLevel.ERROR,
        )
        containers: list[str] = list(self.containers)  # type: ignore[call-overload]
        missing = [c for c in containers if c not in graph.modules]
        if missing:
            raise ValueError(f"no_circles: no such package in the graph: {', '.join(missing)}")
        edges = import_graph(graph, containers)
        found = circles(edges)
        rendered = []
        for component in found:
            path = one_circle(edges, component)
            steps = []
            for importer, imported in zip(path, path[1:], strict=False):
                details = graph.get_import_details(importer=importer, imported=imported)
                lines = ", ".join(f"l.{d['line_number']}" for d in details) or "?"
                steps.append(f"{importer} -> {imported} ({lines})")
            rendered.append((component, steps))
        output.verbose_print(verbose, f"{len(edges)} modules, {len(found)} import circle(s)")
        return ContractCheck(
            kept=not found,
            warnings=list(removal.warnings),
            ignored_import_count=removal.ignored_import_count,
            metadata={"circles": rendered},
        )

    def render_broken_contract(self, check: ContractCheck) -> None:
        for component, steps in check.metadata["circles"]:
            output.print_error(f"Import circle of {len(component)} modules:")
            output.print_error(", ".join(component), bold=False)
            output.print_error("for example:", bold=False)
            for step in steps:
                output.indent_cursor()
                output.print_error(step, bold=False)
            output.new_line()
