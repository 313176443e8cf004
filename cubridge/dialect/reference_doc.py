"""The CuIR reference (docs/cuir.md), generated from the dialect itself: each type's and op's docstring, its
operands, properties, results and regions from the IRDL definition, its declarative assembly format where it
has one, and its first use in the example programs (examples/ir/*.mlir).

    python3 scripts/cuir_reference.py   (tests/docs/test_cuir_reference.py checks the file is current)
"""

from __future__ import annotations

import inspect
import re
from pathlib import Path

from cubridge.dialect import cuir
from cubridge.dialect import types as cuir_types

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = sorted((ROOT / "examples" / "ir").glob("*.mlir"))
HEADER = """# CuIR reference

Generated from the dialect's definitions (`cubridge/dialect/cuir.py`, `cubridge/dialect/types.py`) by
`python3 scripts/cuir_reference.py`; do not edit by hand. The architecture of the dialect (roles, async
completion, the op-to-primitive table) is in docs/architecture.md.
"""


def render() -> str:
    """The whole reference as markdown."""
    examples = _example_lines()
    sections = [HEADER, "## Types", ""]
    for type_class in _types():
        sections += [f"### `!{type_class.name}`", "", _doc(type_class), ""]
    sections += ["## Operations", ""]
    for op in cuir.CUIR_OPS:
        sections += _op_section(op, examples)
    return "\n".join(sections).rstrip() + "\n"


def _types() -> list[type]:
    return [value for value in vars(cuir_types).values()
            if inspect.isclass(value) and str(getattr(value, "name", "")).startswith("cuir.")
            and value.__module__ == cuir_types.__name__]


def _doc(cls: type) -> str:
    return inspect.getdoc(cls) or "(undocumented)"


def _op_section(op: type, examples: dict[str, str]) -> list[str]:
    definition = op.get_irdl_definition()
    lines = [f"### `{op.name}`", "", _doc(op), ""]
    rows = [(kind, name, _describe(field)) for kind, fields in (("operand", definition.operands),
                                                                 ("result", definition.results))
            for name, field in fields]
    rows += [("property", name, _describe(field))
             for name, field in definition.properties.items() if name != "operandSegmentSizes"]
    rows += [("attribute", name, _describe(field))
             for name, field in definition.attributes.items()]
    rows += [("region", name, type(field).__name__.removesuffix("Def")) for name, field in definition.regions]
    if rows:
        lines += ["| | name | constraint |", "|---|---|---|"]
        lines += [f"| {kind} | `{name}` | {text} |" for kind, name, text in rows]
        lines.append("")
    if definition.assembly_format:
        lines += [f"Format: `{definition.assembly_format}`", ""]
    example = examples.get(op.name)
    if example:
        lines += ["Example:", "", "```mlir", example, "```", ""]
    return lines


def _describe(field) -> str:
    kind = type(field).__name__
    prefix = "variadic " if kind.startswith("Var") else "optional " if kind.startswith("Opt") else ""
    return prefix + _constraint(getattr(field, "constr", None))


def _constraint(constraint) -> str:
    """A readable constraint: attribute names (`!cuir.tile`) for base constraints, `a or b` for unions."""
    if constraint is None:
        return "any"
    kind = type(constraint).__name__
    if kind in ("RangeLengthConstraint", "RangeOf", "SingleOf"):
        inner = getattr(constraint, "constraint", None) or getattr(constraint, "constr", None)
        if inner is not None and inner is not constraint:
            return _constraint(inner)
    if kind == "ArrayOfConstraint":
        return f"array of {_constraint(getattr(constraint, 'elem_range_constraint', None))}"
    if kind == "ParamAttrConstraint":
        base = getattr(constraint.base_attr, "name", constraint.base_attr.__name__)
        parameters = [c.attr for c in constraint.param_constrs if type(c).__name__ == "EqAttrConstraint"]
        return f"`{base}<{', '.join(map(str, parameters))}>`" if parameters else f"`{base}`"
    if kind == "BaseAttr":
        attribute = constraint.attr
        name = getattr(attribute, "name", attribute.__name__)
        return f"`!{name}`" if name.startswith("cuir.") else f"`{name}`"
    if kind == "AnyOf":
        return " or ".join(_constraint(c) for c in constraint.attr_constrs)
    if kind == "AnyAttr":
        return "any"
    if kind == "EqAttrConstraint":
        return f"`{constraint.attr}`"
    return kind


def _example_lines() -> dict[str, str]:
    """Each op's first line in the example programs (with the op's name as its operation)."""
    found: dict[str, str] = {}
    pattern = re.compile(r"^(?:\s*%[\w#:, %]+=)?\s*(cuir\.\w+)\b")
    for path in EXAMPLES:
        for line in path.read_text().splitlines():
            match = pattern.match(line)
            if match and match[1] not in found:
                found[match[1]] = line.strip()
    return found
