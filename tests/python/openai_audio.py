#!/usr/bin/env python3
"""`POST /v1/audio/transcriptions` on Duet with the official `openai` Python SDK:

    DUET_TEST_WAV=speech.wav DUET_TEST_WORD=door \\
        python tests/python/openai_audio.py --base-url http://127.0.0.1:PORT/v1

`client.audio.transcriptions.create` with the default `json`, with `text` and with
`verbose_json` (a language and a duration), each transcript holding DUET_TEST_WORD; then a
file that is not a WAV (the SDK's BadRequestError, code `invalid_audio`). With
DUET_TEST_SPEECH=1 also `audio.speech.with_streaming_response.create` as WAV (transcribed
back) and as PCM, and mp3 refused. Exits 0 on success;
1 with a message on any failure; 2 if the SDK is missing.
"""

from __future__ import annotations

import os
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


async def run(base_url: str) -> dict[str, Any]:
    summary: dict[str, Any] = {"openai": OPENAI_VERSION}
    client = AsyncOpenAI(api_key="test-key", base_url=base_url, max_retries=0)
    path, word = os.environ["DUET_TEST_WAV"], os.environ["DUET_TEST_WORD"]
    t0 = time.monotonic()

    with open(path, "rb") as f:
        plain = await client.audio.transcriptions.create(model="whisper-1", file=f)
    check(word in plain.text.lower(), f"json: {plain.text!r}")
    summary["json"] = plain.text

    with open(path, "rb") as f:
        text = await client.audio.transcriptions.create(model="whisper-1", file=f, response_format="text")
    check(isinstance(text, str) and word in text.lower(), f"text: {text!r}")

    with open(path, "rb") as f:
        verbose = await client.audio.transcriptions.create(
            model="whisper-1", file=f, response_format="verbose_json", language="en"
        )
    check(word in verbose.text.lower(), f"verbose_json: {verbose.text!r}")
    check(verbose.language == "english", f"language {verbose.language!r}")
    check(verbose.duration > 1.0, f"duration {verbose.duration!r}")
    summary["duration"] = verbose.duration

    try:
        await client.audio.transcriptions.create(model="whisper-1", file=("song.mp3", b"ID3\x03\x00 not a wav"))
        raise Failure("a file that is not a WAV was transcribed")
    except openai.BadRequestError as e:
        body = e.body if isinstance(e.body, dict) else {}
        check(body.get("code") == "invalid_audio", f"error {e}")

    if os.environ.get("DUET_TEST_SPEECH") == "1":
        await speech(client, word, summary)

    summary["seconds"] = round(time.monotonic() - t0, 2)
    return summary


async def speech(client: AsyncOpenAI, word: str, summary: dict[str, Any]) -> None:
    """`audio.speech` streamed as WAV and as PCM; the WAV transcribed back."""
    sentence = "Please open the door for me."
    async with client.audio.speech.with_streaming_response.create(
        model="tts-1", voice="alloy", input=sentence, response_format="wav"
    ) as r:
        check(r.headers.get("content-type") == "audio/wav", f"content type {r.headers.get('content-type')}")
        wav = await r.read()
    check(wav[:4] == b"RIFF" and len(wav) > 44 + 24_000, f"a WAV of {len(wav)} bytes")
    heard = await client.audio.transcriptions.create(model="whisper-1", file=("speech.wav", wav))
    check(word in heard.text.lower(), f"the speech transcribed back: {heard.text!r}")
    summary["spoken_and_heard"] = heard.text

    async with client.audio.speech.with_streaming_response.create(
        model="tts-1", voice="alloy", input=sentence, response_format="pcm", speed=1.25
    ) as r:
        pieces = [chunk async for chunk in r.iter_bytes()]
    pcm = b"".join(pieces)
    check(len(pcm) % 2 == 0 and len(pcm) > 24_000, f"PCM of {len(pcm)} bytes")
    summary["pcm_seconds"] = round(len(pcm) / 48_000, 2)

    try:
        await client.audio.speech.create(model="tts-1", voice="alloy", input=sentence, response_format="mp3")
        raise Failure("mp3 was answered")
    except openai.BadRequestError as e:
        body = e.body if isinstance(e.body, dict) else {}
        check(body.get("code") == "invalid_value", f"error {e}")


if __name__ == "__main__":
    sys.exit(cli(run, __doc__, "OK: openai SDK audio transcriptions through Duet"))
