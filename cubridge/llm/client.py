"""Chat completions from an OpenAI-compatible endpoint, cached on disk, with retries and accounting.

A reply is cached under sha256 of (endpoint, model, messages, sampling
parameters, sample index), so a rerun asks nothing and gets the same
replies; offline, a miss is an error. Timeouts, 429 and 5xx are retried
with exponential backoff (a server's Retry-After wins when it is longer);
any other HTTP error ends the request at once.
"""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import dataclass, field
from pathlib import Path

from cubridge.diagnostics import CuBridgeError
from cubridge.files import write_atomically
from cubridge.llm.settings import OFFLINE_VARIABLE, LLMSettings

RETRY_AFTER_LIMIT = 60.0


@dataclass(frozen=True)
class Reply:
    """One sampled reply: its text, whether it came from the cache, and the failed tries before it."""

    text: str
    cached: bool
    retries: tuple[str, ...] = ()


@dataclass
class Ledger:
    """Requests, cache hits, retries and tokens of a run, for the line printed at its end."""

    requests: int = 0
    cache_hits: int = 0
    retries: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    prices: set[tuple[float, float] | None] = field(default_factory=set)

    def summary(self) -> str | None:
        """One line, or None when nothing was asked."""
        if not self.requests:
            return None
        line = (
            f"llm: {self.requests} request(s), {self.cache_hits} from cache, "
            f"{self.retries} retried, {self.prompt_tokens} prompt + "
            f"{self.completion_tokens} completion tokens"
        )
        if not self.prices:
            return line + ", nothing spent (every reply from the cache)"
        if None in self.prices or len(self.prices) != 1:
            return line + ", cost unknown (set CUBRIDGE_LLM_PRICE=IN,OUT in USD per million tokens)"
        prompt_price, completion_price = next(iter(self.prices))
        cost = (self.prompt_tokens * prompt_price + self.completion_tokens * completion_price) / 1e6
        return line + f", ${cost:.4f}"


class ChatClient:
    """Asks one model; every reply goes through the on-disk cache."""

    def __init__(self, settings: LLMSettings, ledger: Ledger, what: str):
        self.settings = settings
        self.ledger = ledger
        self.what = what
        self._client = None

    def complete(self, messages: list[dict], temperature: float, sample: int) -> Reply:
        """Sample `sample` (0, 1, ...) of the reply to `messages`."""
        request = {
            "endpoint": self.settings.base_url,
            "model": self.settings.model,
            "messages": messages,
            "temperature": temperature,
            "sample": sample,
        }
        path = self._cache_path(request)
        self.ledger.requests += 1
        if path.is_file():
            self.ledger.cache_hits += 1
            return Reply(json.loads(path.read_text())["reply"], cached=True)
        if self.settings.offline:
            raise CuBridgeError(
                f"{self.what}: offline replay (--llm-offline or {OFFLINE_VARIABLE}) and no cached "
                f"reply for this request to {self.settings.model}; run once online to record it"
            )
        text, retries = self._ask(messages, temperature)
        write_atomically(path, json.dumps({"request": request, "reply": text}, indent=1), make_directories=True)
        return Reply(text, cached=False, retries=retries)

    def _cache_path(self, request: dict) -> Path:
        key = hashlib.sha256(json.dumps(request, sort_keys=True).encode()).hexdigest()
        return self.settings.cache_dir / key[:2] / f"{key}.json"

    def _ask(self, messages: list[dict], temperature: float) -> tuple[str, tuple[str, ...]]:
        openai = _import_openai()
        client = self._openai_client(openai)
        self.ledger.prices.add(self.settings.price)
        failures: list[str] = []
        for attempt in range(self.settings.retries + 1):
            try:
                response = client.chat.completions.create(
                    model=self.settings.model, messages=messages, temperature=temperature
                )
            except openai.APITimeoutError:
                failures.append(f"timed out after {self.settings.timeout:g}s")
                delay = None
            except openai.APIConnectionError as error:
                failures.append(f"connection failed: {error}")
                delay = None
            except openai.APIStatusError as error:
                status = error.status_code
                if status != 429 and status < 500:
                    raise CuBridgeError(
                        f"{self.what}: {self.settings.base_url} refused the request: "
                        f"HTTP {status}: {_error_message(error)}"
                    ) from None
                failures.append(f"HTTP {status}")
                delay = _retry_after(error.response.headers.get("retry-after"))
            else:
                self._account(response)
                return _content(response), tuple(failures)
            if attempt < self.settings.retries:
                self.ledger.retries += 1
                backoff = self.settings.backoff * 2**attempt
                time.sleep(max(backoff, delay or 0.0))
        raise CuBridgeError(
            f"{self.what}: no reply from {self.settings.base_url} after "
            f"{len(failures)} tries ({', '.join(failures)})"
        )

    def _openai_client(self, openai):
        if self._client is None:
            self._client = openai.OpenAI(
                base_url=self.settings.base_url,
                api_key=self.settings.api_key,
                timeout=self.settings.timeout,
                max_retries=0,
            )
        return self._client

    def _account(self, response) -> None:
        usage = response.usage
        if usage is not None:
            self.ledger.prompt_tokens += usage.prompt_tokens or 0
            self.ledger.completion_tokens += usage.completion_tokens or 0


def _import_openai():
    try:
        import openai
    except ImportError:
        raise CuBridgeError("the LLM passes need the openai package: pip install openai") from None
    return openai


def _content(response) -> str:
    if not response.choices:
        return ""
    return response.choices[0].message.content or ""


def _retry_after(header: str | None) -> float | None:
    try:
        return min(float(header), RETRY_AFTER_LIMIT) if header else None
    except ValueError:
        return None  # an HTTP date: the exponential backoff applies


def _error_message(error) -> str:
    """The server's own message (the body's error.message), else openai's, on one line."""
    body = error.body
    text = body.get("message") if isinstance(body, dict) else None
    return " ".join(str(text or error.message).split())
