#!/usr/bin/env python3
"""A transcription session with the official `openai` Python SDK against Duet.

    DUET_TEST_SPEECH_PCM=speech.pcm python tests/python/openai_transcription.py --base-url http://127.0.0.1:PORT/v1

Connects with `intent=transcription` as the SDK documents, configures the session with
`session.update` (`type: "transcription"`, server VAD, logprobs included), appends the 24 kHz
PCM16 speech in DUET_TEST_SPEECH_PCM (followed by silence), and reads the events through the
SDK's own types: `session.created`/`session.updated` carry a transcription session, the
turn is committed, `conversation.item.input_audio_transcription.delta` and `.completed` come
with the words of DUET_TEST_SPEECH_TEXT, and no `response.*` event ever does. Exits 0 when
every check passed, 1 with `FAIL:` lines otherwise, 2 if a package is missing.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import os
import sys
import time

from duet_testlib import check, missing_packages, summary

try:
    from openai import AsyncOpenAI
    from openai.types.realtime import (
        ConversationItemInputAudioTranscriptionCompletedEvent,
        ConversationItemInputAudioTranscriptionDeltaEvent,
        InputAudioBufferCommittedEvent,
        SessionCreatedEvent,
        SessionUpdatedEvent,
    )
except ImportError as e:
    missing_packages(e, "the openai SDK is needed")


async def run(base_url: str, pcm: bytes, words: list[str]) -> None:
    client = AsyncOpenAI(api_key="unused", base_url=base_url)
    async with client.realtime.connect(extra_query={"intent": "transcription"}) as conn:
        created = await asyncio.wait_for(conn.recv(), 10)
        check(isinstance(created, SessionCreatedEvent), "the first event is session.created", created.type)
        check(created.session.type == "transcription", "it is a transcription session", str(created.session.type))
        await conn.session.update(
            session={
                "type": "transcription",
                "audio": {
                    "input": {
                        "format": {"type": "audio/pcm", "rate": 24000},
                        "transcription": {"model": "gpt-4o-transcribe", "language": "en"},
                        "turn_detection": {"type": "server_vad", "silence_duration_ms": 500},
                    }
                },
                "include": ["item.input_audio_transcription.logprobs"],
            }
        )
        chunk = 4800 * 2  # 200 ms
        for i in range(0, len(pcm), chunk):
            await conn.input_audio_buffer.append(audio=base64.b64encode(pcm[i : i + chunk]).decode())
        await conn.input_audio_buffer.append(audio=base64.b64encode(bytes(24000 * 2)).decode())

        updated = committed = delta = completed = None
        responses = []
        deadline = time.monotonic() + 30
        while completed is None and time.monotonic() < deadline:
            ev = await asyncio.wait_for(conn.recv(), 30)
            if isinstance(ev, SessionUpdatedEvent):
                updated = ev
            elif isinstance(ev, InputAudioBufferCommittedEvent):
                committed = ev
            elif isinstance(ev, ConversationItemInputAudioTranscriptionDeltaEvent):
                delta = delta or ev
            elif isinstance(ev, ConversationItemInputAudioTranscriptionCompletedEvent):
                completed = ev
            elif ev.type.startswith("response."):
                responses.append(ev.type)
            elif ev.type == "error":
                check(False, "no error", str(ev))
        check(updated is not None and updated.session.type == "transcription", "session.updated: a transcription session")
        check(committed is not None, "server VAD committed the speech")
        check(delta is not None and bool(delta.delta), "a transcription delta arrived")
        check(completed is not None, "the transcription completed")
        if completed is None:
            return
        check(committed is not None and completed.item_id == committed.item_id, "for the committed item")
        text = completed.transcript.lower()
        print(f"transcript: {completed.transcript!r}")
        for w in words:
            check(w in text, f"the transcript has {w!r}", completed.transcript)
        check(completed.usage.type == "duration" and completed.usage.seconds > 0.5, "usage is the audio's duration", str(completed.usage))
        check(bool(completed.logprobs) and all(p.logprob <= 0 for p in completed.logprobs), "logprobs as included", str(completed.logprobs)[:200])
        # Nothing answers in a transcription session.
        try:
            while True:
                ev = await asyncio.wait_for(conn.recv(), 1.0)
                if ev.type.startswith("response."):
                    responses.append(ev.type)
        except asyncio.TimeoutError:
            pass
        check(not responses, "no response events", str(responses))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--base-url", required=True, help="http://127.0.0.1:PORT/v1")
    args = ap.parse_args()
    with open(os.environ["DUET_TEST_SPEECH_PCM"], "rb") as f:
        pcm = f.read()
    words = os.environ.get("DUET_TEST_SPEECH_WORDS", "").split()
    t0 = time.monotonic()
    asyncio.run(asyncio.wait_for(run(args.base_url, pcm, words), 60))
    return summary(t0)


if __name__ == "__main__":
    sys.exit(main())
