#!/usr/bin/env python3
"""`/v1/chat/completions` on Duet answered by its embedded LLM (SmolLM2-135M-Instruct from
`--llm-model-dir`) with the official `openai` Python SDK:

    python tests/python/openai_chat_embedded.py --base-url http://127.0.0.1:PORT/v1

A plain completion (a factual answer, usage, the model's name), the same question streamed
(with usage: the prompt's tokens come from the kept KV cache), an answer cut by max_tokens
(finish_reason "length"), a forced tool call and its result given back, a conversation too
long for the model (HTTP 400 context_length_exceeded), and /v1/responses (HTTP 501). Exits 0
on success; 1 with a message on any failure; 2 if the SDK is missing.
"""

from __future__ import annotations

import json
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

MODEL = "smollm2-135m-instruct"
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_time",
            "description": "The user's local time",
            "parameters": {"type": "object", "properties": {}},
        },
    }
]
QUESTION = [
    {"role": "system", "content": "You are a helpful assistant. Answer in one short sentence."},
    {"role": "user", "content": "What is the capital of France?"},
]


async def run(base_url: str) -> dict[str, Any]:
    summary: dict[str, Any] = {"openai": OPENAI_VERSION}
    client = AsyncOpenAI(api_key="test-key", base_url=base_url, max_retries=0)
    t0 = time.monotonic()

    plain = await client.chat.completions.create(model="anything", messages=QUESTION)
    answer = plain.choices[0].message.content or ""
    check("Paris" in answer, f"content {answer!r}")
    check(plain.model == MODEL, f"model {plain.model!r}")
    check(plain.choices[0].finish_reason == "stop", f"finish {plain.choices[0].finish_reason!r}")
    check(plain.usage is not None and plain.usage.prompt_tokens > 20, f"usage {plain.usage!r}")
    summary["plain"] = answer

    stream = await client.chat.completions.create(
        model="anything", messages=QUESTION, stream=True, stream_options={"include_usage": True}
    )
    text, usage, finish = "", None, None
    async for chunk in stream:
        if chunk.choices and chunk.choices[0].delta.content:
            text += chunk.choices[0].delta.content
        if chunk.choices and chunk.choices[0].finish_reason:
            finish = chunk.choices[0].finish_reason
        if chunk.usage is not None:
            usage = chunk.usage
    check(text == answer, f"streamed {text!r}, plain {answer!r} (greedy: the same)")
    check(finish == "stop", f"stream finish {finish!r}")
    check(usage is not None, "no usage chunk")
    cached = usage.prompt_tokens_details.cached_tokens if usage.prompt_tokens_details else 0
    check(cached and cached >= usage.prompt_tokens - 1, f"cached {cached} of {usage.prompt_tokens}")

    cut = await client.chat.completions.create(model="anything", messages=QUESTION, max_tokens=2)
    check(cut.choices[0].finish_reason == "length", f"finish {cut.choices[0].finish_reason!r}")
    check(cut.usage.completion_tokens == 2, f"usage {cut.usage!r}")

    asked = [{"role": "user", "content": "What time is it?"}]
    call = await client.chat.completions.create(
        model="anything",
        messages=asked,
        tools=TOOLS,
        tool_choice={"type": "function", "function": {"name": "get_time"}},
    )
    msg = call.choices[0].message
    check(call.choices[0].finish_reason == "tool_calls", f"finish {call.choices[0].finish_reason!r} {msg!r}")
    check(msg.tool_calls and msg.tool_calls[0].function.name == "get_time", f"message {msg!r}")
    json.loads(msg.tool_calls[0].function.arguments)  # valid JSON arguments
    asked.append(msg.model_dump(exclude_none=True))
    asked.append({"role": "tool", "tool_call_id": msg.tool_calls[0].id, "content": "It is 10:30 in the morning."})
    after = await client.chat.completions.create(model="anything", messages=asked, tools=TOOLS)
    spoken = after.choices[0].message.content or ""
    check(spoken.strip() != "", f"no answer after the tool result: {after!r}")
    summary["after_tool"] = spoken

    try:
        huge = [{"role": "system", "content": "word " * 9000}, {"role": "user", "content": "hi"}]
        await client.chat.completions.create(model="anything", messages=huge)
        raise Failure("a conversation longer than the context was answered")
    except openai.BadRequestError as e:
        check(e.code == "context_length_exceeded", f"error code {e.code!r}: {e}")

    try:
        await client.responses.create(model="anything", input="hello")
        raise Failure("/v1/responses on the embedded LLM was not an error")
    except openai.APIStatusError as e:
        check(e.status_code == 501, f"status {e.status_code}")

    summary["seconds"] = round(time.monotonic() - t0, 2)
    return summary


if __name__ == "__main__":
    sys.exit(cli(run, __doc__, "OK: openai SDK chat completions on the embedded LLM"))
