#!/usr/bin/env python3
"""The official `openai` Python SDK against a full-duplex model (`--model moshi`).

    python tests/python/openai_moshi.py --base-url http://127.0.0.1:PORT/v1

A client that streams microphone audio (here: silence, in real time) and never asks for a
response. The model decides to speak by itself: the SDK receives a response in the GA
lifecycle with Duet's `response.speak` extension event before the first audio, the model's
speech as `response.output_audio.delta` and its words as
`response.output_audio_transcript.delta`. Every event the SDK knows re-validates strictly
against its model; the extension events (`response.speak`, `response.listen`) are not in the
SDK's union, and the check is that the SDK still hands them over readable (`type`,
`response_id`, `item_id`). Then `response.cancel` through the SDK fences the model's output:
`response.done` cancelled, no more audio of that response.

Exits 0 on success; 1 with a message on any failure; 2 if the SDK is not installed.
"""

from __future__ import annotations

import asyncio
import base64
import sys
import time
from typing import Any

from openai_realtime import (
    OPENAI_VERSION,
    AsyncOpenAI,
    Events,
    Failure,
    assert_in_order,
    cancel_response,
    check,
    cli,
    silence,
)

EXTENSIONS = frozenset({"response.speak", "response.listen"})
# The model's speech to hear before cancelling it (each delta is one 80 ms model frame or less).
AUDIO_DELTAS = 10


async def stream_silence(conn: Any) -> None:
    """A live microphone in a quiet room: 100 ms of silence every 100 ms."""
    chunk = base64.b64encode(silence(0.1)).decode()
    t0 = time.monotonic()
    n = 0
    while True:
        await conn.input_audio_buffer.append(audio=chunk)
        n += 1
        await asyncio.sleep(max(0.0, t0 + n * 0.1 - time.monotonic()))


async def run(base_url: str) -> dict[str, Any]:
    summary: dict[str, Any] = {"openai": OPENAI_VERSION}
    client = AsyncOpenAI(api_key="test-key", base_url=base_url)
    t0 = time.monotonic()
    async with client.realtime.connect(model="moshi") as conn:
        ev = Events(conn, extensions=EXTENSIONS)
        created = await ev.next()
        check(created.type == "session.created", f"first event is {created.type}, not session.created")
        check(created.session.model == "moshi", f"session.model {created.session.model!r}")

        mic = asyncio.create_task(stream_silence(conn))
        try:
            # 1. The model speaks on its own: nobody sent response.create.
            opening = await ev.collect_until("response.speak")
            types = [e.type for e in opening]
            assert_in_order(
                types,
                ["response.created", "response.output_item.added", "conversation.item.added", "response.speak"],
            )
            rc = next(e for e in opening if e.type == "response.created")
            rid = rc.response.id
            item = next(e for e in opening if e.type == "response.output_item.added").item
            speak = opening[-1]
            check(speak.response_id == rid, f"response.speak.response_id {speak.response_id!r} != {rid!r}")
            check(speak.item_id == item.id, f"response.speak.item_id {speak.item_id!r} != {item.id!r}")
            summary["speak"] = (
                f"after {time.monotonic() - t0:.2f} s; the SDK hands it over as "
                f"{type(speak).__name__} with type {speak.type!r}"
            )

            # 2. Its speech and its words, in the SDK's typed events.
            audio: list[Any] = []
            words: list[str] = []
            while len(audio) < AUDIO_DELTAS:
                e = await ev.next()
                check(e.type != "error", f"unexpected error: {e.model_dump()}")
                if e.type == "response.output_audio.delta":
                    check(e.response_id == rid, "audio from another response")
                    audio.append(e)
                elif e.type == "response.output_audio_transcript.delta":
                    check(e.response_id == rid and e.item_id == item.id, "transcript of another item")
                    words.append(e.delta)
                elif e.type == "response.done":
                    raise Failure(f"the model's response ended before {AUDIO_DELTAS} audio deltas: {e.model_dump()}")
            audio_bytes = sum(len(base64.b64decode(e.delta)) for e in audio)
            check(audio_bytes > 0 and audio_bytes % 2 == 0, f"{audio_bytes} bytes of PCM16")
            summary["speech"] = (
                f"{len(audio)} audio deltas, {audio_bytes / 2 / 24_000:.2f} s; "
                f"transcript so far {''.join(words)!r}"
            )

            # 3. response.cancel through the SDK fences the model's output.
            _, done, reason = await cancel_response(conn, ev, rid)
            check(reason == "client_cancelled", f"status_details.reason {reason!r}")
            check(done.response.output[0].status == "incomplete", f"item status {done.response.output[0].status!r}")
            late = await ev.drain(0.6)
            late_audio = [e for e in late if e.type == "response.output_audio.delta" and e.response_id == rid]
            check(not late_audio, f"{len(late_audio)} audio deltas of the cancelled response after response.done")
            errors = [e.model_dump() for e in late if e.type == "error"]
            check(not errors, f"errors after cancel: {errors}")
            summary["cancel"] = f"cancelled ({reason}); {len(late)} events in the 0.6 s after, none its audio"
        finally:
            mic.cancel()

    summary["events"] = len(ev.log)
    summary["extension events"] = sorted({e.type for e in ev.log if e.type in EXTENSIONS})
    summary["seconds"] = round(time.monotonic() - t0, 2)
    if ev.extras:
        summary["fields unknown to the SDK"] = sorted(ev.extras)
    return summary


if __name__ == "__main__":
    sys.exit(cli(run, __doc__, "OK: openai SDK realtime client against a full-duplex model"))
