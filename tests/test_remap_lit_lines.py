"""scripts/remap_lit_lines.py: a lit check of a kernel line follows the line through an edit, or is named."""

import importlib.util
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "remap_lit_lines.py"
spec = importlib.util.spec_from_file_location("remap_lit_lines", SCRIPT)
remap_lit_lines = importlib.util.module_from_spec(spec)
spec.loader.exec_module(remap_lit_lines)

OLD = "a\nb\nc\nd\n"
NEW = "a\ninserted\nb\nc2\nd\n"  # b moves down one, c is edited, d moves down one


def test_kept_lines_map_to_where_they_moved():
    assert remap_lit_lines.line_map(OLD, NEW) == {1: 1, 2: 3, 4: 5}


def test_checks_of_moved_lines_are_rewritten_and_others_left():
    lit = Path("t.mlir")
    text = ('// CHECK: loc("{{.*}}k.cu":2:5 at "{{.*}}k.cu":4:1)\n'
            "// CHECK: k.cu:4: note\n"
            '// CHECK: loc("{{.*}}other_k.cu":2:5) and "k.cuh":2:1\n')
    changed, errors = remap_lit_lines.remap({lit: text}, "k.cu", remap_lit_lines.line_map(OLD, NEW))
    assert errors == []
    assert changed[lit] == ('// CHECK: loc("{{.*}}k.cu":3:5 at "{{.*}}k.cu":5:1)\n'
                            "// CHECK: k.cu:5: note\n"
                            '// CHECK: loc("{{.*}}other_k.cu":2:5) and "k.cuh":2:1\n')


def test_a_check_of_an_edited_line_is_an_error_naming_where_it_is():
    lit = Path("t.mlir")
    changed, errors = remap_lit_lines.remap({lit: '// RUN: x\n// CHECK: "k.cu":3:1\n'}, "k.cu",
                                            remap_lit_lines.line_map(OLD, NEW))
    assert changed == {} and errors == ["t.mlir:2: k.cu line 3 was edited or removed; update this check"]
