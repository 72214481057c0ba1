#!/usr/bin/env python3
"""The Realtime tool loop with the official `openai` Python SDK against `duet serve --model
cascade` (its LLM a scripted OpenAI-compatible server the Rust test started):

    python tests/python/openai_tools.py --base-url http://127.0.0.1:PORT/v1

session.update (instructions, a function tool, text output, manual turns) -> a user text
item -> response.create -> the exact GA sequence of a function call, every event parsed and
strictly re-validated by the SDK's own models -> a function_call_output with the call's
call_id -> response.create -> the answer text. What the upstream received is checked by the
Rust test. Exits 0 on success; 1 with a message on any failure; 2 if the SDK is missing.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from typing import Any

from openai_realtime import Events, Failure, check, cli

try:
    from openai import AsyncOpenAI, __version__ as OPENAI_VERSION
except ImportError as exc:  # pragma: no cover
    from duet_testlib import missing_packages

    missing_packages(exc, "The official OpenAI SDK is needed")

TOOL = {
    "type": "function",
    "name": "get_time",
    "description": "The time now in a time zone",
    "parameters": {"type": "object", "properties": {"tz": {"type": "string"}}, "required": ["tz"]},
}

CALL_SEQUENCE = [
    "response.created",
    "response.output_item.added",
    "conversation.item.added",
    "response.function_call_arguments.delta",
    "response.function_call_arguments.done",
    "response.output_item.done",
    "conversation.item.done",
    "response.done",
]


def collapsed(types: list[str]) -> list[str]:
    """Consecutive repeats as one (the argument deltas are a run of any length)."""
    out: list[str] = []
    for t in types:
        if not out or out[-1] != t:
            out.append(t)
    return out


async def run(base_url: str) -> dict[str, Any]:
    summary: dict[str, Any] = {"openai": OPENAI_VERSION}
    client = AsyncOpenAI(api_key="test-key", base_url=base_url)
    t0 = time.monotonic()
    async with client.realtime.connect(model="cascade") as conn:
        ev = Events(conn)
        created = await ev.next()
        check(created.type == "session.created", f"first event {created.type}")
        await conn.session.update(
            session={
                "type": "realtime",
                "instructions": "You tell the time.",
                "output_modalities": ["text"],
                "audio": {"input": {"turn_detection": None}},
                "tools": [TOOL],
                "tool_choice": "auto",
            }
        )
        updated = await ev.until("session.updated")
        check(len(updated.session.tools or []) == 1, f"tools echoed: {updated.session.tools!r}")

        await conn.conversation.item.create(
            item={"type": "message", "role": "user", "content": [{"type": "input_text", "text": "What time is it in UTC?"}]}
        )
        await ev.until("conversation.item.done")

        # 1. The model calls the tool.
        await conn.response.create()
        start = len(ev.log)
        done = await ev.until("response.done")
        types = [e.type for e in ev.log[start:]]
        check(collapsed(types) == CALL_SEQUENCE, f"call sequence: {types}")
        check(done.response.status == "completed", f"status {done.response.status}")
        output = done.response.output or []
        check(len(output) == 1 and output[0].type == "function_call", f"output {output!r}")
        call = output[0]
        check(call.name == "get_time", f"name {call.name!r}")
        check(json.loads(call.arguments) == {"tz": "UTC"}, f"arguments {call.arguments!r}")
        deltas = "".join(e.delta for e in ev.log[start:] if e.type == "response.function_call_arguments.delta")
        check(deltas == call.arguments, f"deltas {deltas!r} vs {call.arguments!r}")
        args_done = next(e for e in ev.log[start:] if e.type == "response.function_call_arguments.done")
        check(args_done.call_id == call.call_id and args_done.item_id == call.id, "ids of arguments.done")
        summary["call_id"] = call.call_id

        # 2. The client runs the tool and answers; the model speaks from the result.
        result = json.dumps({"time": "10:00"})
        await conn.conversation.item.create(
            item={"type": "function_call_output", "call_id": call.call_id, "output": result}
        )
        added = await ev.until("conversation.item.added")
        check(added.item.type == "function_call_output", f"added {added.item.type}")
        await conn.response.create()
        done = await ev.until("response.done")
        check(done.response.status == "completed", f"status {done.response.status}")
        message = (done.response.output or [None])[0]
        check(message is not None and message.type == "message", f"output {done.response.output!r}")
        text = message.content[0].text
        check(text == "It is ten o'clock.", f"answer {text!r}")
        summary["answer"] = text
    summary["events"] = len(ev.log)
    summary["seconds"] = round(time.monotonic() - t0, 2)
    return summary


if __name__ == "__main__":
    sys.exit(cli(run, __doc__, "OK: openai SDK tool loop against the Duet cascade"))
