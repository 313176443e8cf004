"""The transfer finds the attention skeleton by dataflow, not by names: renaming every
kernel argument and SSA value of a reference program changes only names in its output."""

import re

import pytest
from xdsl.dialects.builtin import ArrayAttr, ModuleOp, StringAttr

from cubridge.dialect.cuir import KernelOp
from cubridge.frontends.spec import load_spec
from cubridge.interpreter import ProblemShape, verify
from cubridge.passes.transfer import TransferPass

from transfer_helpers import PROGRAMS, ROOT, SPECS, load_program, spec_path

SSA_NAME = re.compile(r"%([A-Za-z_][\w$.]*)")


def renamed(text: str) -> tuple[str, dict[str, str]]:
    """`text` with every SSA name (kernel arguments included) replaced by a meaningless one, in
    order of first appearance; returns it with the map from new names back to the old ones."""
    fresh: dict[str, str] = {}

    def rename(match: re.Match) -> str:
        return "%" + fresh.setdefault(match.group(1), f"zz{len(fresh)}")

    return SSA_NAME.sub(rename, text), {new: old for old, new in fresh.items()}


def transferred(program: str, spec: str, text: str | None = None) -> ModuleOp:
    ctx, module = load_program(program, text)
    TransferPass(spec).apply(ctx, module)
    return module


def restore_argument_names(module: ModuleOp, original: dict[str, str]) -> None:
    """Bind the kernel's arguments by their original names again (arguments the transfer added keep theirs)."""
    for kernel in module.walk():
        if isinstance(kernel, KernelOp):
            names = [original.get(n.data, n.data) for n in kernel.arg_names.data]
            kernel.arg_names = ArrayAttr([StringAttr(n) for n in names])


def printed_without_names(module: ModuleOp) -> str:
    """The module's text with every value numbered instead of named (kernel arguments print their launch names)."""
    for op in module.walk():
        for result in op.results:
            result.name_hint = None
        for region in op.regions:
            for block in region.blocks:
                for argument in block.args:
                    argument.name_hint = None
    return str(module)


def reference_text(program: str) -> str:
    return (ROOT / "examples" / "ir" / f"attention_{program}.mlir").read_text()


def test_renaming_reaches_every_name():
    text, original = renamed(reference_text("sm90"))
    assert "softmax_scale" not in text and "%q" not in text and len(original) > 100


@pytest.mark.parametrize("program", PROGRAMS)
@pytest.mark.parametrize("name", SPECS)
def test_transfer_output_is_unchanged_up_to_names(name, program):
    expected = printed_without_names(transferred(program, spec_path(name)))
    text, original = renamed(reference_text(program))
    module = transferred(program, spec_path(name), text)
    restore_argument_names(module, original)
    assert printed_without_names(module) == expected


@pytest.mark.parametrize("program, name", [("sm90", "document_mask"), ("sm80", "sliding_window")])
def test_transfer_of_a_renamed_program_verifies(program, name):
    text, original = renamed(reference_text(program))
    module = transferred(program, spec_path(name), text)
    restore_argument_names(module, original)
    shape = ProblemShape(1, 2, 1, 200, 300, 128)
    result = verify(module, load_spec(spec_path(name)), shapes=[shape], seeds=(0,), schedules=1)
    assert result.ok, result.summary()
