"""The LLM side of one command run: its flags, its request ledger and its transcript file.

A tool calls `begin` as it starts, `configure` with its flags and output
path once it has parsed them, and prints `report()` at the end. The transcript of a run with `-o OUT` is
`OUT.llm.json`; without `-o` it goes to `transcripts/` in the reply cache
directory, and `report()` says where.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path

from cubridge.files import write_atomically
from cubridge.llm.client import ChatClient, Ledger
from cubridge.llm.settings import (
    API_KEY_VARIABLE,
    BASE_URL_VARIABLE,
    MODEL_VARIABLE,
    OFFLINE_VARIABLE,
    LLMFlags,
    LLMSettings,
    resolve_settings,
)


@dataclass
class Session:
    flags: LLMFlags = field(default_factory=LLMFlags)
    output_path: str | None = None
    ledger: Ledger = field(default_factory=Ledger)
    runs: list[dict] = field(default_factory=list)
    transcript_path: Path | None = None

    def configure(self, flags: LLMFlags, output_path: str | None) -> None:
        """Take the command's --llm-* flags; transcripts go beside `output_path`."""
        self.flags = flags
        self.output_path = output_path

    def settings(self, what: str, base_url: str | None = None, model: str | None = None) -> LLMSettings:
        return resolve_settings(what, self.flags, base_url, model)

    def client(self, what: str, settings: LLMSettings) -> ChatClient:
        return ChatClient(settings, self.ledger, what)

    def record(self, run: dict, settings: LLMSettings) -> Path:
        """Add one loop's transcript and rewrite the transcript file; returns its path."""
        if self.transcript_path is None:
            self.transcript_path = self._transcript_path(settings)
        self.runs.append(run)
        write_atomically(self.transcript_path, json.dumps({"runs": self.runs}, indent=1), make_directories=True)
        return self.transcript_path

    def report(self) -> list[str]:
        """The ledger's line and the transcript's path, when anything was asked."""
        lines = []
        summary = self.ledger.summary()
        if summary is not None:
            lines.append(summary)
        if self.transcript_path is not None:
            lines.append(f"llm: transcript in {self.transcript_path}")
        return lines

    def _transcript_path(self, settings: LLMSettings) -> Path:
        if self.output_path is not None:
            return Path(f"{self.output_path}.llm.json")
        stamp = time.strftime("%Y%m%dT%H%M%S")
        return settings.cache_dir / "transcripts" / f"{stamp}-{os.getpid()}.llm.json"


_current = Session()


def current() -> Session:
    """The session of the running command (a default one for library use)."""
    return _current


def begin() -> Session:
    """Start a fresh session (new ledger, no transcript yet) and make it current."""
    global _current
    _current = Session()
    return _current


def add_llm_arguments(parser: argparse.ArgumentParser) -> None:
    """The --llm-* flags; each overrides its environment variable."""
    group = parser.add_argument_group("LLM passes (see docs/llm.md)")
    group.add_argument("--llm-base-url", metavar="URL", help=f"OpenAI-compatible endpoint (${BASE_URL_VARIABLE})")
    group.add_argument("--llm-model", metavar="NAME", help=f"model name (${MODEL_VARIABLE})")
    group.add_argument("--llm-api-key", metavar="KEY", help=f"API key (${API_KEY_VARIABLE}, preferred)")
    group.add_argument(
        "--llm-offline", action="store_true",
        help=f"replay replies from the cache only; a miss is an error (${OFFLINE_VARIABLE}=1)",
    )


def flags_from(args: argparse.Namespace) -> LLMFlags:
    return LLMFlags(args.llm_base_url, args.llm_model, args.llm_api_key, args.llm_offline)
