"""Where the model is and how to call it: pass options, then command-line flags, then environment.

| variable | flag | meaning |
|---|---|---|
| CUBRIDGE_LLM_BASE_URL | --llm-base-url | OpenAI-compatible endpoint, e.g. http://localhost:8000/v1 (required) |
| CUBRIDGE_LLM_MODEL | --llm-model | model name the endpoint serves (required) |
| CUBRIDGE_LLM_API_KEY | --llm-api-key | bearer key (local servers need none) |
| CUBRIDGE_LLM_OFFLINE=1 | --llm-offline | replay replies from the cache only |
| CUBRIDGE_LLM_CACHE_DIR | | reply cache (default ~/.cache/cubridge/llm) |
| CUBRIDGE_LLM_TIMEOUT | | seconds per request (default 120) |
| CUBRIDGE_LLM_RETRIES | | retries after a timeout, 429 or 5xx (default 4) |
| CUBRIDGE_LLM_BACKOFF | | first retry delay in seconds, doubled each retry (default 1) |
| CUBRIDGE_LLM_PRICE | | "IN,OUT": USD per million prompt / completion tokens, for the cost line |
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from cubridge.diagnostics import CuBridgeError

BASE_URL_VARIABLE = "CUBRIDGE_LLM_BASE_URL"
MODEL_VARIABLE = "CUBRIDGE_LLM_MODEL"
API_KEY_VARIABLE = "CUBRIDGE_LLM_API_KEY"
OFFLINE_VARIABLE = "CUBRIDGE_LLM_OFFLINE"
CACHE_DIR_VARIABLE = "CUBRIDGE_LLM_CACHE_DIR"
TIMEOUT_VARIABLE = "CUBRIDGE_LLM_TIMEOUT"
RETRIES_VARIABLE = "CUBRIDGE_LLM_RETRIES"
BACKOFF_VARIABLE = "CUBRIDGE_LLM_BACKOFF"
PRICE_VARIABLE = "CUBRIDGE_LLM_PRICE"

# local servers (vLLM, SGLang) accept any key, but the openai client insists on one
NO_KEY = "no-key"


@dataclass(frozen=True)
class LLMSettings:
    """One endpoint and model, with the request policy of every call to it."""

    base_url: str
    model: str
    api_key: str
    offline: bool
    cache_dir: Path
    timeout: float
    retries: int
    backoff: float
    price: tuple[float, float] | None


@dataclass(frozen=True)
class LLMFlags:
    """What the command line said (None: not given), between pass options and environment."""

    base_url: str | None = None
    model: str | None = None
    api_key: str | None = None
    offline: bool = False


def resolve_settings(
    what: str, flags: LLMFlags, base_url: str | None = None, model: str | None = None
) -> LLMSettings:
    """Settings for `what` (a pass or tool name); a missing endpoint or model is one clear error."""
    base_url = base_url or flags.base_url or os.environ.get(BASE_URL_VARIABLE)
    if not base_url:
        raise CuBridgeError(
            f"{what} needs an OpenAI-compatible endpoint: set {BASE_URL_VARIABLE} "
            f"or pass --llm-base-url (or the pass option base_url=...)"
        )
    model = model or flags.model or os.environ.get(MODEL_VARIABLE)
    if not model:
        raise CuBridgeError(
            f"{what} needs a model name: set {MODEL_VARIABLE} "
            f"or pass --llm-model (or the pass option model=...)"
        )
    return LLMSettings(
        base_url=base_url,
        model=model,
        api_key=flags.api_key or os.environ.get(API_KEY_VARIABLE) or NO_KEY,
        offline=flags.offline or os.environ.get(OFFLINE_VARIABLE, "") not in ("", "0"),
        cache_dir=_cache_dir(),
        timeout=_number(TIMEOUT_VARIABLE, 120.0),
        retries=int(_number(RETRIES_VARIABLE, 4)),
        backoff=_number(BACKOFF_VARIABLE, 1.0),
        price=_price(),
    )


def _cache_dir() -> Path:
    configured = os.environ.get(CACHE_DIR_VARIABLE)
    return Path(configured) if configured else Path.home() / ".cache" / "cubridge" / "llm"


def _number(variable: str, default: float) -> float:
    text = os.environ.get(variable)
    if not text:
        return default
    try:
        value = float(text)
    except ValueError:
        raise CuBridgeError(f"{variable}={text!r} is not a number") from None
    if value < 0:
        raise CuBridgeError(f"{variable}={text!r} is negative")
    return value


def _price() -> tuple[float, float] | None:
    text = os.environ.get(PRICE_VARIABLE)
    if not text:
        return None
    try:
        prompt, completion = (float(part) for part in text.split(","))
    except ValueError:
        raise CuBridgeError(
            f"{PRICE_VARIABLE}={text!r}: expected 'IN,OUT', USD per million prompt and completion tokens"
        ) from None
    return prompt, completion
