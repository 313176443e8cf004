"""cuir-opt: parse, verify, transform and print CuIR, with mlir-opt conventions.

Every user error (bad IR, unknown op or pass, missing file, a failing pass)
is one `file:line:col: error: ...` line on stderr and a non-zero exit; with
`--verify-diagnostics` the diagnostic goes to stdout and the exit is 0, so
lit tests can FileCheck it. With `--split-input-file` every chunk runs: the
ones that succeed are printed even when another fails, as mlir-opt does.
Output goes to `-o` only once every chunk has succeeded, through a
temporary file renamed into place.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import inspect
import sys
from collections.abc import Sequence
from io import StringIO
from pathlib import Path

from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass, PassPipeline
from xdsl.printer import Printer
from xdsl.utils.exceptions import ArgSpecParseError, DiagnosticException
from xdsl.xdsl_opt_main import xDSLOptMain

from cubridge.diagnostics import CuBridgeError, parse_module, refuse_cuda_input, verify_module
from cubridge.files import write_atomically
from cubridge.llm import session as llm_session
from cubridge.passes import PASS_FACTORIES

CHUNK_SEPARATOR = "// -----"
# xDSL's passes that apply to CuIR (its arith, math and scf code and any op);
# the others, for xDSL's other dialects, stay registered but are not listed.
XDSL_PASSES_FOR_CUIR = ("canonicalize", "cse", "dce", "licm", "constant-fold-interp", "scf-for-loop-range-folding")


class _ChunksFailed(Exception):
    """Some `--split-input-file` chunks failed; their errors are already printed."""


class _Once(argparse.Action):
    """An option that may be given once."""

    def __call__(self, parser, namespace, values, option_string=None):
        if getattr(namespace, self.dest) is not None:
            raise CuBridgeError(f"{option_string} given twice ('{getattr(namespace, self.dest)}' and '{values}')")
        setattr(namespace, self.dest, values)


class CuirOptMain(xDSLOptMain):
    version_format = "cuir-opt (CuBridge) built on xdsl {xdsl_version}"

    def register_all_dialects(self) -> None:
        super().register_all_dialects()
        if "cuir" not in self.ctx.registered_dialect_names:
            from cubridge.universe import CUBRIDGE_UNIVERSE

            for name, factory in CUBRIDGE_UNIVERSE.all_dialects.items():
                self.ctx.register_dialect(name, factory)

    def register_all_passes(self) -> None:
        super().register_all_passes()
        for name, factory in PASS_FACTORIES.items():
            self.register_pass(name, factory)

    def register_all_arguments(self, arg_parser: argparse.ArgumentParser) -> None:
        super().register_all_arguments(arg_parser)
        arg_parser.add_argument(
            "--load-pass-plugin",
            action="append",
            default=[],
            metavar="FILE.py",
            help="load a Python file and register every ModulePass it defines, by name",
        )
        arg_parser.add_argument(
            "--lift",
            nargs="?",
            const="",
            metavar="ENTRY",
            help="the input is a CUDA kernel: lift entry point ENTRY (default: the file's first, named in a note "
            "on stderr) into CuIR before the pipeline",
        )
        arg_parser.add_argument(
            "--lift-profile",
            default="cubridge",
            metavar="NAME|FILE.toml",
            help="the lifting profile of the kernel's vocabulary (default: cubridge; docs/lifting-profiles.md)",
        )
        arg_parser.add_argument(
            "--transfer",
            action=_Once,
            metavar="SPEC.py",
            help="append the transfer pass for this attention spec to the pipeline",
        )
        output = arg_parser.add_mutually_exclusive_group()
        output.add_argument(
            "--lower",
            action="store_true",
            help="after the pipeline, print CUDA instead of CuIR: the kernel's reference source patched "
            "where the IR changed (docs/lowering.md)",
        )
        output.add_argument(
            "--emit-diff",
            action="store_true",
            help="like --lower, but print the patch against the reference source as a unified diff",
        )
        llm_session.add_llm_arguments(arg_parser)
        self._list_passes(arg_parser)

    def _list_passes(self, arg_parser: argparse.ArgumentParser) -> None:
        """`--help` lists CuIR's passes with their options, then xDSL's passes for CuIR."""
        passes = next(action for action in arg_parser._actions if "--passes" in action.option_strings)
        passes.help = "comma-separated pass pipeline, e.g. 'transfer{spec=\"SPEC.py\"},canonicalize,cse' (passes below)"
        lines = ["CuIR passes:"]
        for name, factory in PASS_FACTORIES.items():
            pass_class = factory()
            options = " ".join(f"{field.name}=..." for field in dataclasses.fields(pass_class))
            summary = (inspect.getdoc(pass_class) or "").splitlines()[0]
            lines += [f"  {name}{{{options}}}" if options else f"  {name}", f"      {summary}"]
        lines += ["", "xDSL passes that run on CuIR:", "  " + ", ".join(XDSL_PASSES_FOR_CUIR)]
        arg_parser.epilog = "\n".join(lines)
        arg_parser.formatter_class = argparse.RawDescriptionHelpFormatter

    def setup_pipeline(self) -> None:
        llm_session.current().configure(llm_session.flags_from(self.args), self.args.output_file)
        if self.args.transfer is not None:
            transfer = f'transfer{{spec="{self.args.transfer}"}}'
            self.args.passes = ",".join(p for p in (self.args.passes, transfer) if p)
        for path in self.args.load_pass_plugin:
            for pass_class in load_pass_plugin(path):
                self.register_pass(pass_class.name, lambda cls=pass_class: cls)

        def verify_after(previous: ModulePass | None, module: ModuleOp, _next) -> None:
            if previous is not None and not self.args.disable_verify:
                verify_module(module)

        try:
            self.pipeline = PassPipeline.parse_spec(
                self.available_passes, self.args.passes, verify_after
            )
        except (Exception, ArgSpecParseError) as error:  # unknown passes, bad options, bad syntax
            detail = str(error)
            if isinstance(error, ArgSpecParseError):
                # "Error parsing ...", "pass-pipeline:1:COL", the spec, a caret, the message
                lines = [line.strip() for line in detail.splitlines() if line.strip()]
                detail = f"{lines[-1]} (column {lines[1].rsplit(':', 1)[-1]})"
            raise CuBridgeError(f"bad pass pipeline '{self.args.passes}': {detail}") from None

    def run(self) -> None:
        self._check_output_directory()
        if self.args.lift is not None:
            self._write_output(self._transform(self._lift()))
            return
        text = self._read_input()
        chunks = self._split(text)
        output = StringIO()
        failed = False
        for index, (chunk, line_offset) in enumerate(chunks):
            if index:
                output.write(CHUNK_SEPARATOR + "\n")
            try:
                output.write(self._process(chunk, line_offset))
            except CuBridgeError as error:
                if not self.args.verify_diagnostics and len(chunks) == 1:
                    raise
                failed |= self._report(error)
        if failed:
            self._write_partial_output(output.getvalue())
        self._write_output(output.getvalue())

    def _report(self, error: CuBridgeError) -> bool:
        """Print a chunk's error (to stdout under --verify-diagnostics); whether it fails the run."""
        if self.args.verify_diagnostics:
            print(error)
            return False
        print(error, file=sys.stderr)
        return True

    def _write_partial_output(self, text: str) -> None:
        """The chunks that succeeded go to stdout (never to -o); the run fails."""
        if self.args.output_file is None:
            sys.stdout.write(text)
        raise _ChunksFailed()

    def get_input_name(self) -> str:
        # stdin is "<stdin>" in diagnostics (as in cuir-run), whether given as "-" or not at all
        path = self.args.input_file
        return "<stdin>" if path is None or path == "-" else path

    def _check_output_directory(self) -> None:
        """An -o whose directory is missing fails before any work, not after the lift."""
        path = self.args.output_file
        if path is None or Path(path).resolve().parent.is_dir():
            return
        raise CuBridgeError("cannot write output: No such file or directory", path)

    def _read_input(self) -> str:
        path = self.args.input_file
        refuse_cuda_input(path, "--lift reads it into CuIR")
        try:
            if path is None or path == "-":
                return sys.stdin.buffer.read().decode("utf-8")
            with open(path, encoding="utf-8") as stream:
                return stream.read()
        except OSError as error:
            raise CuBridgeError(f"cannot read input: {error.strerror}", path) from None
        except UnicodeDecodeError as error:
            raise CuBridgeError(
                f"cannot read input: not UTF-8 text (byte {error.start})",
                self.get_input_name(),
            ) from None

    def _split(self, text: str) -> list[tuple[str, int]]:
        if not self.args.split_input_file:
            return [(text, 0)]
        # a separator is a line of its own, not "// -----" inside another comment
        chunks, current, offset = [], [], 0
        for number, line in enumerate(text.splitlines(keepends=True)):
            if line.strip() == CHUNK_SEPARATOR:
                chunks.append(("".join(current), offset))
                current, offset = [], number + 1
            else:
                current.append(line)
        chunks.append(("".join(current), offset))
        return chunks

    def _lift(self) -> ModuleOp:
        from cubridge.frontends.cuda import lift_cuda_file

        path, entry = self.args.input_file, self.args.lift or None
        if path is None and entry is not None and Path(entry).is_file():  # `--lift KERNEL.cu`: no entry named
            path, entry = entry, None
        if path is None or path == "-" or self.args.split_input_file:
            raise CuBridgeError("--lift reads one CUDA file (not stdin, not --split-input-file)")
        result = lift_cuda_file(path, entry, self.args.lift_profile)
        if result.note is not None:
            print(result.note, file=sys.stderr)
        if not self.args.disable_verify:
            verify_module(result.module)
        return result.module

    def _process(self, chunk: str, line_offset: int) -> str:
        module = parse_module(self.ctx, chunk, self.get_input_name(), line_offset)
        if not self.args.disable_verify:
            verify_module(module)
        return self._transform(module)

    def _transform(self, module: ModuleOp) -> str:
        """The pipeline on `module`, then its printed form or (--lower, --emit-diff) its CUDA."""
        reference = module.clone() if self.args.lower or self.args.emit_diff else None
        pairs = None
        if reference is not None:
            from cubridge.lowering import cloned_pairs

            pairs = cloned_pairs(module, reference)
        try:
            self.apply_passes(module)
        except CuBridgeError:
            raise
        except DiagnosticException as error:
            message = str(error.args[0]) if error.args else str(error)
            raise CuBridgeError(message, self.get_input_name()) from None
        except Exception as error:  # a pass that crashes is one error line too
            lines = str(error).strip().splitlines()
            detail = f": {lines[0]}" if lines else ""
            raise CuBridgeError(f"a pass failed: {type(error).__name__}{detail}", self.get_input_name()) from None
        if reference is None:
            return self._print(module)
        from cubridge.lowering import lower_module

        variant = Path(self.args.transfer).stem if self.args.transfer else "variant"
        lowered = lower_module(reference, module, variant, pairs=pairs)
        return lowered.diff() if self.args.emit_diff else lowered.source

    def _print(self, module: ModuleOp) -> str:
        stream = StringIO()
        printer = Printer(
            stream=stream,
            print_generic_format=self.args.print_op_generic,
            print_debuginfo=self.args.print_debuginfo,
        )
        printer.print_op(module)
        stream.write("\n")
        return stream.getvalue()

    def _write_output(self, text: str) -> None:
        path = self.args.output_file
        if path is None:
            sys.stdout.write(text)
            return
        try:
            write_atomically(path, text)
        except OSError as error:
            raise CuBridgeError(f"cannot write output: {error.strerror}", path) from None


def load_pass_plugin(path: str) -> list[type[ModulePass]]:
    """Import `path` and return the ModulePass classes it defines (not those it imports)."""
    file = Path(path)
    if not file.is_file():
        raise CuBridgeError("cannot read pass plugin: no such file", path)
    spec = importlib.util.spec_from_file_location(f"cuir_plugin_{file.stem}", file)
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except Exception as error:
        raise CuBridgeError(f"pass plugin failed to import: {error}", path) from None
    passes = [
        value
        for value in vars(module).values()
        if inspect.isclass(value)
        and issubclass(value, ModulePass)
        and value.__module__ == module.__name__
    ]
    if not passes:
        raise CuBridgeError("pass plugin defines no ModulePass", path)
    return passes


def main(argv: Sequence[str] | None = None) -> int:
    session = llm_session.begin()
    try:
        CuirOptMain(description="CuIR optimizer driver", args=argv).run()
    except CuBridgeError as error:
        print(error, file=sys.stderr)
        return 1
    except _ChunksFailed:
        return 1
    finally:
        for line in session.report():
            print(line, file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
