"""Move the kernel line numbers that lit tests check (`attention_sm90.cu":961:3`) to where those lines sit after an
edit of the kernel: lines are matched between the kernel at a git revision and the working tree's (difflib), and
every lit file under lit_tests/ is rewritten at once, or none is when a checked line was edited or removed.

    python3 scripts/remap_lit_lines.py cubridge/runtime/kernels/attention_sm90.cu [--base HEAD]
"""

import argparse
import difflib
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def line_map(old: str, new: str) -> dict[int, int]:
    """1-based old line -> new line, for the lines the edit kept unchanged."""
    matcher = difflib.SequenceMatcher(None, old.splitlines(), new.splitlines(), autojunk=False)
    return {block.a + i + 1: block.b + i + 1 for block in matcher.get_matching_blocks() for i in range(block.size)}


def remap(texts: dict[Path, str], kernel_name: str, lines: dict[int, int]) -> tuple[dict[Path, str], list[str]]:
    """The texts whose references `<kernel_name>[\"]:LINE` moved, rewritten, and one error per reference to a line
    that is not in `lines` (`file:line: ...`)."""
    reference = re.compile(rf'(?<![\w.]){re.escape(kernel_name)}("?:)(\d+)')
    changed, errors = {}, []
    for path, text in texts.items():
        def moved(match: re.Match, path=path, text=text) -> str:
            old = int(match.group(2))
            if old not in lines:
                where = text.count("\n", 0, match.start()) + 1
                errors.append(f"{path}:{where}: {kernel_name} line {old} was edited or removed; update this check")
                return match.group(0)
            return f"{kernel_name}{match.group(1)}{lines[old]}"
        new_text = reference.sub(moved, text)
        if new_text != text:
            changed[path] = new_text
    return changed, errors


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("kernel", type=Path, help="the edited kernel, e.g. cubridge/runtime/kernels/attention_sm90.cu")
    parser.add_argument("--base", default="HEAD", help="the git revision whose kernel the lit tests were written for")
    args = parser.parse_args()
    kernel = args.kernel.resolve()
    if not kernel.is_file():
        print(f"remap_lit_lines: {args.kernel}: no such file", file=sys.stderr)
        return 2
    shown = subprocess.run(["git", "show", f"{args.base}:{kernel.relative_to(ROOT)}"], cwd=ROOT, capture_output=True,
                           text=True)
    if shown.returncode != 0:
        print(f"remap_lit_lines: {args.kernel} at {args.base}: {shown.stderr.strip()}", file=sys.stderr)
        return 2
    texts = {path: path.read_text()
             for suffix in ("*.mlir", "*.cu", "*.py") for path in (ROOT / "lit_tests").rglob(suffix)}
    changed, errors = remap(texts, kernel.name, line_map(shown.stdout, kernel.read_text()))
    if errors:
        print("\n".join(errors), file=sys.stderr)
        return 1
    for path, text in changed.items():
        path.write_text(text)
        print(f"remapped {path.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
