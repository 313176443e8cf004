"""Paths and reply builders shared by the LLM tests."""

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
FLASH_ATTENTION = ROOT.parent / "shared" / "thirdparty" / "flash-attention-2.8.0"
FA2_KERNEL = FLASH_ATTENTION / "csrc" / "flash_attn" / "src" / "flash_fwd_kernel.h"
FA3_MAINLOOP = FLASH_ATTENTION / "hopper" / "mainloop_fwd_sm90_tma_gmma_ws.hpp"
MODEL = "scripted-model"
TIMEOUT = 0.5


def mlir_reply(path: Path, note: str = "Here is the kernel.") -> str:
    return f"{note}\n\n```mlir\n{path.read_text()}```\n"
