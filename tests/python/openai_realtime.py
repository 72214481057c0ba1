#!/usr/bin/env python3
"""Drives a Duet server with the official `openai` Python SDK's Realtime client.

    python tests/python/openai_realtime.py --base-url http://127.0.0.1:PORT/v1

Proves that an unmodified OpenAI client can talk to Duet: the SDK builds the WebSocket URL
(`.../v1/realtime?model=gpt-realtime`) and headers, serializes the client events, and parses
every server event into its typed model. Each received event is also re-validated against
the SDK's pydantic model for its type, because the SDK itself parses leniently
(`construct_type_unchecked`) and would not notice a missing or mistyped field.

Steps: session.created -> session.update (manual turns) -> two error cases (unknown event
type, empty commit) -> one full audio turn with the GA lifecycle -> a cancelled response.
Exits 0 on success; 1 with a message on any failure; 2 if the SDK is not installed.
"""

from __future__ import annotations

import argparse
import array
import asyncio
import base64
import logging
import math
import sys
import time
from typing import Any

from duet_testlib import EVENT_TIMEOUT, OVERALL_TIMEOUT, event_classes, in_order, missing_packages, revalidate

try:
    import pydantic
    from openai import AsyncOpenAI, __version__ as OPENAI_VERSION
    from openai.types.realtime import RealtimeServerEvent
    import websockets  # noqa: F401  (the `openai[realtime]` extra)
except ImportError as exc:  # pragma: no cover - environment problem, not a test failure mode
    missing_packages(exc, "The official OpenAI SDK is needed")

RATE = 24_000

# Server event classes the SDK knows (the members of the `RealtimeServerEvent` union).
KNOWN_EVENT_CLASSES = event_classes(RealtimeServerEvent)


class Failure(Exception):
    """A check failed."""


def check(cond: bool, msg: str) -> None:
    if not cond:
        raise Failure(msg)


def voiced(secs: float) -> bytes:
    """Synthetic voiced audio as PCM16LE at 24 kHz: a 140 Hz harmonic series (8 harmonics,
    1/h amplitudes) with slow vibrato and syllable-rate modulation, about -18 dBFS."""
    out = array.array("h")
    phase = 0.0
    for i in range(int(secs * RATE)):
        t = i / RATE
        f0 = 140.0 + 8.0 * math.sin(2 * math.pi * 5.0 * t)
        phase += 2 * math.pi * f0 / RATE
        syllable = 0.75 + 0.25 * math.sin(2 * math.pi * 4.0 * t)
        s = sum(math.sin(phase * h) / h for h in range(1, 9))
        v = max(-1.0, min(1.0, 0.12 * syllable * s))
        out.append(int(v * 32767))
    if sys.byteorder != "little":
        out.byteswap()
    return out.tobytes()


def silence(secs: float) -> bytes:
    return bytes(2 * int(secs * RATE))


def unknown_fields(obj: Any, path: str, found: set[str]) -> None:
    """Collects fields the SDK's models don't declare (pydantic extras), recursively."""
    if isinstance(obj, pydantic.BaseModel):
        for k in (obj.__pydantic_extra__ or {}).keys():
            found.add(f"{path}.{k}")
        for name in type(obj).model_fields:
            unknown_fields(getattr(obj, name, None), f"{path}.{name}", found)
    elif isinstance(obj, list):
        for v in obj:
            unknown_fields(v, f"{path}[]", found)


class Events:
    """Reads typed events from the SDK connection, keeping a log of them. `extensions`: event
    types outside the SDK's union (Duet's duplex extension) that are expected; the SDK hands
    those over as an object of some other class whose `type` and fields are still readable."""

    def __init__(self, conn: Any, extensions: frozenset[str] = frozenset()) -> None:
        self.conn = conn
        self.extensions = extensions
        self.log: list[Any] = []
        self.extras: set[str] = set()

    async def next(self, timeout: float = EVENT_TIMEOUT) -> Any:
        try:
            ev = await asyncio.wait_for(self.conn.recv(), timeout)
        except asyncio.TimeoutError:
            raise Failure(f"no event within {timeout} s; recent: {self.recent()}") from None
        self.validate(ev)
        self.log.append(ev)
        return ev

    def validate(self, ev: Any) -> None:
        """Checks the SDK parsed `ev` into the right class and that it validates strictly."""
        kind = getattr(ev, "type", None)
        if kind in self.extensions:
            check(
                isinstance(ev.event_id, str) and ev.event_id.startswith("event_"),
                f"{kind}: event_id {ev.event_id!r}",
            )
            return
        check(
            type(ev) in KNOWN_EVENT_CLASSES,
            f"SDK did not parse event {kind!r} into a known server event class "
            f"(got {type(ev).__name__}): {ev!r}",
        )
        dumped, err = revalidate(ev)
        if err is not None:
            raise Failure(f"{kind} does not match the SDK's {type(ev).__name__}: {err}\n{dumped}")
        check(
            isinstance(ev.event_id, str) and ev.event_id.startswith("event_"),
            f"{kind}: event_id {ev.event_id!r}",
        )
        unknown_fields(ev, kind or "?", self.extras)

    async def until(self, kind: str, *, allow_errors: bool = False) -> Any:
        """Skips events until one of type `kind`; an unexpected `error` fails."""
        while True:
            ev = await self.next()
            if ev.type == kind:
                return ev
            if ev.type == "error" and not allow_errors:
                raise Failure(f"unexpected error while waiting for {kind}: {ev.model_dump()}")

    async def collect_until(self, kind: str) -> list[Any]:
        out = []
        while True:
            ev = await self.next()
            if ev.type == "error":
                raise Failure(f"unexpected error while waiting for {kind}: {ev.model_dump()}")
            out.append(ev)
            if ev.type == kind:
                return out

    async def drain(self, quiet: float) -> list[Any]:
        """Everything that arrives until `quiet` seconds pass without an event."""
        out = []
        while True:
            try:
                ev = await asyncio.wait_for(self.conn.recv(), quiet)
            except asyncio.TimeoutError:
                return out
            self.validate(ev)
            self.log.append(ev)
            out.append(ev)

    def recent(self, n: int = 15) -> list[str]:
        return [e.type for e in self.log[-n:]]


def assert_in_order(types: list[str], expected: list[str]) -> None:
    ok, why = in_order(types, expected)
    check(ok, why)


async def append_audio(conn: Any, pcm: bytes) -> None:
    """Appends audio in 100 ms events, as a streaming client would."""
    step = 2 * RATE // 10
    for i in range(0, len(pcm), step):
        await conn.input_audio_buffer.append(audio=base64.b64encode(pcm[i : i + step]).decode())


async def cancel_response(conn: Any, ev: Events, rid: str) -> tuple[list[Any], Any, str | None]:
    """`response.cancel` through the SDK: the events up to its `response.done` (checked: for
    `rid`, cancelled), that `response.done` and its reason."""
    await conn.response.cancel()
    rest = await ev.collect_until("response.done")
    done = rest[-1]
    check(done.response.id == rid, "response.done for another response")
    check(done.response.status == "cancelled", f"response.done status {done.response.status!r}")
    reason = done.response.status_details.reason if done.response.status_details else None
    return rest, done, reason


async def commit_turn(conn: Any, ev: Events) -> str:
    await conn.input_audio_buffer.commit()
    committed = await ev.until("input_audio_buffer.committed")
    added = await ev.next()
    check(added.type == "conversation.item.added", f"after commit: {added.type}")
    check(added.item.role == "user", f"committed item role {added.item.role!r}")
    check(added.item.content[0].type == "input_audio", f"content {added.item.content!r}")
    done = await ev.next()
    check(done.type == "conversation.item.done", f"after item.added: {done.type}")
    return committed.item_id


async def run(base_url: str) -> dict[str, Any]:
    summary: dict[str, Any] = {"openai": OPENAI_VERSION}
    client = AsyncOpenAI(api_key="test-key", base_url=base_url)
    t0 = time.monotonic()
    async with client.realtime.connect(model="gpt-realtime") as conn:
        ev = Events(conn)

        # 1. session.created, then session.update to manual turns.
        created = await ev.next()
        check(created.type == "session.created", f"first event is {created.type}, not session.created")
        check(created.session.type == "realtime", f"session.type {created.session.type!r}")
        summary["session_id"] = created.session.id

        await conn.session.update(
            session={
                "type": "realtime",
                "audio": {"input": {"turn_detection": None, "transcription": None}},
                "tracing": "auto",
            }
        )
        updated = await ev.until("session.updated")
        check(
            updated.session.audio.input.turn_detection is None,
            f"turn_detection not null after update: {updated.session.audio.input.turn_detection!r}",
        )
        check(
            updated.session.audio.input.transcription is None,
            f"transcription not null after update: {updated.session.audio.input.transcription!r}",
        )
        check(updated.session.tracing == "auto", f"tracing {updated.session.tracing!r}")

        # 2. Errors that must not end the session.
        # The SDK's `send` accepts a plain dict and only transforms it against the client event
        # TypedDicts (no validation), so an unknown type goes out as-is.
        await conn.send({"type": "duet.no_such_event", "event_id": "evt_bogus_1"})
        err = await ev.until("error", allow_errors=True)
        check(err.error.code == "unknown_event_type", f"unknown event -> {err.error.model_dump()}")
        check(err.error.event_id == "evt_bogus_1", f"error.event_id {err.error.event_id!r}")

        await conn.input_audio_buffer.commit(event_id="evt_empty_commit")
        err = await ev.until("error", allow_errors=True)
        check(
            err.error.code == "input_audio_buffer_commit_empty",
            f"empty commit -> {err.error.model_dump()}",
        )
        check(err.error.event_id == "evt_empty_commit", f"error.event_id {err.error.event_id!r}")
        summary["errors"] = "unknown_event_type, input_audio_buffer_commit_empty"

        # 3. One full audio turn.
        await append_audio(conn, silence(0.2) + voiced(1.0) + silence(0.2))
        user_item = await commit_turn(conn, ev)
        await conn.response.create()
        events = await ev.collect_until("response.done")
        types = [e.type for e in events]
        assert_in_order(
            types,
            [
                "response.created",
                "response.output_item.added",
                "conversation.item.added",
                "response.content_part.added",
                "response.output_audio.delta",
                "response.output_audio.done",
                "response.output_audio_transcript.done",
                "response.content_part.done",
                "response.output_item.done",
                "response.done",
            ],
        )
        rid = events[0].response.id
        check(events[0].type == "response.created", f"first response event {events[0].type}")
        deltas = [e for e in events if e.type == "response.output_audio.delta"]
        check(all(e.response_id == rid for e in deltas), "audio deltas from another response")
        audio_bytes = sum(len(base64.b64decode(e.delta)) for e in deltas)
        check(40_000 <= audio_bytes <= 52_000, f"{audio_bytes} bytes of audio for a 1 s turn")
        asst_added = next(e for e in events if e.type == "conversation.item.added")
        check(
            asst_added.previous_item_id == user_item,
            f"assistant previous_item_id {asst_added.previous_item_id!r} != {user_item!r}",
        )
        transcript = next(e for e in events if e.type == "response.output_audio_transcript.done").transcript
        check(transcript.startswith("echo of"), f"transcript {transcript!r}")
        done = events[-1]
        check(done.response.status == "completed", f"response.done status {done.response.status!r}")
        check(done.response.id == rid, "response.done for another response")
        out_item = done.response.output[0]
        check(out_item.status == "completed", f"output item status {out_item.status!r}")
        check(out_item.content[0].transcript == transcript, f"item transcript {out_item.content!r}")
        usage = done.response.usage
        check(
            usage is not None and usage.output_token_details.audio_tokens > 0,
            f"usage {usage!r}",
        )
        summary["turn"] = (
            f"{len(deltas)} audio deltas, {audio_bytes} bytes "
            f"({audio_bytes / 2 / RATE:.2f} s), transcript {transcript!r}"
        )

        # 4. A cancelled response.
        await append_audio(conn, voiced(1.0))
        await commit_turn(conn, ev)
        await conn.response.create()
        created = await ev.until("response.created")
        rid = created.response.id
        first = await ev.until("response.output_audio.delta")
        check(first.response_id == rid, "first delta from another response")
        rest, done, reason = await cancel_response(conn, ev, rid)
        late = await ev.drain(0.5)
        late_deltas = [e for e in late if e.type == "response.output_audio.delta" and e.response_id == rid]
        check(not late_deltas, f"{len(late_deltas)} audio deltas after response.done (cancelled)")
        late_errors = [e.model_dump() for e in late if e.type == "error"]
        check(not late_errors, f"errors after cancel: {late_errors}")
        delivered = 1 + sum(1 for e in rest if e.type == "response.output_audio.delta")
        summary["cancel"] = (
            f"status cancelled (reason {reason!r}) after {delivered} audio deltas; "
            f"{len(late)} events in the 0.5 s after, none audio"
        )

    summary["events"] = len(ev.log)
    summary["seconds"] = round(time.monotonic() - t0, 2)
    if ev.extras:
        summary["fields unknown to the SDK"] = sorted(ev.extras)
    return summary


def cli(run_fn: Any, doc: str | None, ok_line: str) -> int:
    """The command line of an SDK driver: `--base-url`, `--timeout`, `-v`; runs `run_fn(base_url)`
    and prints `ok_line` and its summary, or `FAIL: ...`; the exit code."""
    p = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--base-url", required=True, help="e.g. http://127.0.0.1:8080/v1")
    p.add_argument("--timeout", type=float, default=OVERALL_TIMEOUT, help="overall limit, seconds")
    p.add_argument("-v", "--verbose", action="store_true", help="log WebSocket frames (websockets DEBUG)")
    args = p.parse_args()
    if args.verbose:
        logging.basicConfig(level=logging.DEBUG, format="%(name)s: %(message)s")
    try:
        summary = asyncio.run(asyncio.wait_for(run_fn(args.base_url), args.timeout))
    except Failure as e:
        print(f"FAIL: {e}", file=sys.stderr)
        return 1
    except asyncio.TimeoutError:
        print(f"FAIL: did not finish within {args.timeout} s", file=sys.stderr)
        return 1
    except Exception as e:  # connection refused, protocol errors, SDK exceptions
        import traceback

        traceback.print_exc()
        print(f"FAIL: {type(e).__name__}: {e}", file=sys.stderr)
        return 1
    print(ok_line)
    for k, v in summary.items():
        print(f"  {k}: {v}")
    return 0


if __name__ == "__main__":
    sys.exit(cli(run, __doc__, "OK: openai SDK realtime client against Duet"))
