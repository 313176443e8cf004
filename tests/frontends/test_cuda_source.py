"""The tree-sitter layer of the lifter: located syntax errors and the `#pragma unroll` pitfall."""

from pathlib import Path

import pytest

from cubridge.diagnostics import CuBridgeError
from cubridge.frontends.cuda.source import parse_cuda, parse_cuda_file
from cubridge.runtime.primitives import HEADER_DIR

KERNELS = Path(__file__).resolve().parents[2] / "cubridge" / "runtime" / "kernels"

NESTED_UNROLL = b"""__device__ void f(float* x) {
  for (int i = 0; i < 4; ++i)
#pragma unroll
    for (int j = 0; j < 2; ++j) x[j] += 1.f;
  x[0] = 2.f;
}
"""


def _outer_for(source):
    body = source.root.named_children[0].child_by_field_name("body")
    return body.named_children[0]


def test_pragma_between_for_header_and_body_keeps_the_body():
    source = parse_cuda(NESTED_UNROLL, "nested.cu")
    outer = _outer_for(source)
    inner = outer.child_by_field_name("body")
    assert inner.type == "for_statement"
    assert inner.child_by_field_name("body").type == "expression_statement"
    assert source.pragma_before(inner) == "#pragma unroll"
    assert source.pragma_before(outer) is None
    # every later statement keeps its position: the blanked pragma changes no line or column
    statements = source.root.named_children[0].child_by_field_name("body").named_children
    assert [str(source.location(s)) for s in statements] == ["nested.cu:2:3", "nested.cu:5:3"]


def test_raw_tree_sitter_drops_that_body():
    """The pitfall itself, so that the workaround is dropped once the grammar no longer needs it."""
    import tree_sitter_cuda
    from tree_sitter import Language, Parser

    tree = Parser(Language(tree_sitter_cuda.language())).parse(NESTED_UNROLL)
    outer = tree.root_node.named_children[0].child_by_field_name("body").named_children[0]
    assert outer.child_by_field_name("body").type == "expression_statement"
    assert outer.child_by_field_name("body").children[0].is_missing


@pytest.mark.parametrize(
    "text, message",
    [
        (b"__global__ void k(int n) {\n  int x = ;\n}\n", "bad.cu:2:9: error: syntax error at `=`"),
        (b"__global__ void k(int n) {\n  int x = n\n}\n", "bad.cu:2:12: error: syntax error: expected `;`"),
    ],
)
def test_syntax_errors_are_one_located_line(text, message):
    with pytest.raises(CuBridgeError) as error:
        parse_cuda(text, "bad.cu")
    assert str(error.value) == message


def test_missing_file_is_a_one_line_error(tmp_path):
    with pytest.raises(CuBridgeError) as error:
        parse_cuda_file(tmp_path / "absent.cu")
    assert str(error.value).endswith("absent.cu: error: cannot read CUDA source: No such file or directory")


@pytest.mark.parametrize(
    "path", sorted(KERNELS.glob("*.cu")) + sorted(HEADER_DIR.glob("*.cuh")), ids=lambda path: path.name
)
def test_project_sources_parse_without_errors(path):
    """Entry-point macro invocations (no `;`) and `__align__` are accepted; nothing else is an error."""
    source = parse_cuda_file(path)
    assert source.root.type == "translation_unit"
