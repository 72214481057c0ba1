#!/usr/bin/env python3
"""`/v1/chat/completions` on Duet (proxied to a scripted OpenAI-compatible LLM the Rust test
started) with the official `openai` Python SDK:

    python tests/python/openai_chat.py --base-url http://127.0.0.1:PORT/v1

A plain completion with a tool offered, a streamed one with usage, an upstream 429 (the SDK's
RateLimitError), an upstream that hangs (HTTP 504 from Duet), and /v1/responses on an
upstream without it (HTTP 501). The Rust test checks what the upstream received and the
usage. Exits 0 on success; 1 with a message on any failure; 2 if the SDK is missing.
"""

from __future__ import annotations

import sys
import time
from typing import Any

from openai_realtime import Failure, check, cli

try:
    import openai
    from openai import AsyncOpenAI, __version__ as OPENAI_VERSION
except ImportError as exc:  # pragma: no cover
    from duet_testlib import missing_packages

    missing_packages(exc, "The official OpenAI SDK is needed")

TOOLS = [{"type": "function", "function": {"name": "get_time", "parameters": {"type": "object", "properties": {}}}}]


async def run(base_url: str) -> dict[str, Any]:
    summary: dict[str, Any] = {"openai": OPENAI_VERSION}
    client = AsyncOpenAI(api_key="test-key", base_url=base_url, max_retries=0)
    t0 = time.monotonic()
    messages = [{"role": "user", "content": "Say hello."}]

    plain = await client.chat.completions.create(model="gpt-4o", messages=messages, tools=TOOLS)
    check(plain.choices[0].message.content == "Hello there.", f"content {plain.choices[0].message.content!r}")
    check(plain.usage is not None and plain.usage.total_tokens == 12, f"usage {plain.usage!r}")

    stream = await client.chat.completions.create(
        model="gpt-4o", messages=messages, stream=True, stream_options={"include_usage": True}
    )
    text, usage = "", None
    async for chunk in stream:
        if chunk.choices and chunk.choices[0].delta.content:
            text += chunk.choices[0].delta.content
        if chunk.usage is not None:
            usage = chunk.usage
    check(text == "Hello streamed.", f"streamed {text!r}")
    check(usage is not None and usage.completion_tokens == 3, f"stream usage {usage!r}")

    try:
        await client.chat.completions.create(model="gpt-4o", messages=messages)
        raise Failure("an upstream 429 was not an error")
    except openai.RateLimitError as e:
        check(e.status_code == 429, f"status {e.status_code}")
        check("slow down" in str(e), f"message {e}")

    try:
        await client.chat.completions.create(model="gpt-4o", messages=messages)
        raise Failure("a hung upstream was not an error")
    except openai.APIStatusError as e:
        check(e.status_code == 504, f"status {e.status_code}")
        body = e.body if isinstance(e.body, dict) else {}
        check(body.get("code") == "llm_unavailable" or "llm_unavailable" in str(e), f"error {e}")

    try:
        await client.responses.create(model="gpt-4o", input="hello")
        raise Failure("/v1/responses on an upstream without it was not an error")
    except openai.APIStatusError as e:
        check(e.status_code == 501, f"status {e.status_code}")

    summary["seconds"] = round(time.monotonic() - t0, 2)
    return summary


if __name__ == "__main__":
    sys.exit(cli(run, __doc__, "OK: openai SDK chat completions through Duet"))
