#!/usr/bin/env python3
"""The official `openai` Python SDK's WebRTC call API against Duet, with aiortc as the peer.

    python tests/python/openai_calls.py --base-url http://127.0.0.1:PORT/v1

What a server-side integration does with the SDK: the browser (here aiortc) makes the offer,
the application creates the call with `client.realtime.calls.create(sdp=..., session=...)`
(multipart/form-data: parts `sdp` and `session`), hands the answer back to the peer, joins
the call as a sideband with `client.realtime.connect(call_id=...)`, and ends it with
`client.realtime.calls.hangup(call_id)`. Steps:

  a. calls.create (through `with_raw_response`, the SDK's way to read `Location`): the request
     is multipart with both parts; 201, `Content-Type: application/sdp`, `Location:
     /v1/realtime/calls/rtc_...`; the parsed result (what plain `calls.create` returns) holds
     the answer SDP; the peer applies it and connects;
  b. the `session` part seeds the call: `session.created` on the peer's `oai-events` channel
     carries its instructions and VAD settings;
  c. sideband: `connect(call_id=...)` gets `session.created` for the same session; a
     `session.update` sent through it reaches the peer as `session.updated`;
  d. the peer speaks 1 s over RTP: the sideband sees the whole server-VAD turn, including
     the WebRTC-only `output_audio_buffer.started/stopped`, and the peer hears the answer;
  e. the sideband drives the call: `conversation.item.create` + `response.create` through it
     are answered on the peer's channel;
  f. `calls.hangup(call_id)`: the sideband is closed by the server, the peer's connection
     ends, and a second hangup raises `NotFoundError` (404).

Every sideband event is parsed by the SDK and re-validated against its pydantic model.
Exits 0 when every check passed, 1 with `FAIL:` lines otherwise, 2 if a package is missing.
Traffic stays on 127.0.0.1.
"""

from __future__ import annotations

import argparse
import array
import asyncio
import json
import logging
import math
import re
import sys
from typing import Any

from duet_testlib import (
    EVENT_TIMEOUT,
    FAILURES,
    FIGURES,
    LOUD_RMS,
    OVERALL_TIMEOUT,
    Abort,
    Peer,
    VoiceTrack,
    check,
    compact,
    event_classes,
    loopback_ice,
    missing_in_order,
    missing_packages,
    now,
    revalidate,
    summary,
)

try:
    import aioice.ice  # noqa: F401  (duet_testlib's WebRTC part)
    import aiortc
    import av  # noqa: F401  (duet_testlib's WebRTC part)
    import pydantic
    from aiortc import MediaStreamTrack
    from aiortc.mediastreams import MediaStreamError
    import openai
    from openai import AsyncOpenAI
    from openai.types.realtime import RealtimeServerEvent
    import websockets  # noqa: F401  (the `openai[realtime]` extra)
except ImportError as exc:  # pragma: no cover - environment problem, not a test failure mode
    missing_packages(exc, "The official OpenAI SDK and aiortc are needed")

SEEDED_SESSION = {
    "type": "realtime",
    "model": "gpt-realtime",
    "instructions": "Seeded by calls.create.",
    "audio": {
        "input": {"turn_detection": {"type": "server_vad", "silence_duration_ms": 400}},
        "output": {"voice": "marin"},
    },
}
KNOWN_EVENT_CLASSES = event_classes(RealtimeServerEvent)

loopback_ice()


# --- media -----------------------------------------------------------------------------------

class Speaker:
    """Counts the received audio frames and the loud ones (with their arrival times)."""

    def __init__(self) -> None:
        self.frames = 0
        self.loud: list[float] = []

    async def run(self, track: MediaStreamTrack) -> None:
        try:
            while True:
                frame = await track.recv()
                self.frames += 1
                a = array.array("h")
                a.frombytes(bytes(frame.planes[0])[: frame.samples * len(frame.layout.channels) * 2])
                if sys.byteorder != "little":
                    a.byteswap()
                n = len(a) or 1
                if math.sqrt(sum(x * x for x in a) / n) / 32768.0 > LOUD_RMS:
                    self.loud.append(now())
        except MediaStreamError:
            pass


# --- event logs ------------------------------------------------------------------------------

class EventLog:
    """Events (dicts) with arrival times, from the data channel or the sideband."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.log: list[tuple[float, dict[str, Any]]] = []
        self.problems: list[str] = []
        self.closed: str | None = None
        self._new = asyncio.Event()

    def add(self, ev: dict[str, Any]) -> None:
        if not (isinstance(ev.get("event_id"), str) and ev["event_id"].startswith("event_")):
            self.problems.append(f"{ev.get('type')}: event_id {ev.get('event_id')!r}")
        self.log.append((now(), ev))
        self._new.set()

    def close(self, why: str) -> None:
        self.closed = why
        self._new.set()

    def mark(self) -> int:
        return len(self.log)

    def types(self, mark: int = 0) -> list[str]:
        return [e.get("type", "?") for _, e in self.log[mark:]]

    def since(self, mark: int, kind: str) -> list[dict[str, Any]]:
        return [e for _, e in self.log[mark:] if e.get("type") == kind]

    async def until(self, kind: str, mark: int = 0, timeout: float = EVENT_TIMEOUT,
                    pred: Any = None) -> tuple[float, dict[str, Any]]:
        end = now() + timeout
        i = mark
        while True:
            for j in range(i, len(self.log)):
                t, e = self.log[j]
                if e.get("type") == kind and (pred is None or pred(e)):
                    return t, e
            i = len(self.log)
            left = end - now()
            if left <= 0 or self.closed is not None:
                why = f" ({self.name} closed: {self.closed})" if self.closed else ""
                raise Abort(f"{self.name}: no {kind} within {timeout} s{why}; since: {self.types(mark)[-25:]}")
            self._new.clear()
            try:
                await asyncio.wait_for(self._new.wait(), left)
            except asyncio.TimeoutError:
                pass

    def errors(self) -> list[dict[str, Any]]:
        return [e for _, e in self.log if e.get("type") == "error"]


def validate_typed(ev: Any, log: EventLog, extras: set[str]) -> dict[str, Any]:
    """Checks the SDK parsed `ev` into a known class that validates strictly; returns it as a dict."""
    kind = getattr(ev, "type", None)
    if type(ev) not in KNOWN_EVENT_CLASSES:
        log.problems.append(f"the SDK did not parse {kind!r} into a known server event class ({type(ev).__name__})")
    dumped, err = revalidate(ev, exclude_unset=True)
    if err is not None:
        log.problems.append(f"{kind} does not match the SDK's {type(ev).__name__}: {err}")
    if isinstance(ev, pydantic.BaseModel):
        for k in (ev.__pydantic_extra__ or {}):
            extras.add(f"{kind}.{k}")
    return dumped


# --- the scenario ----------------------------------------------------------------------------

async def scenario(base_url: str) -> None:
    # The SDK's own httpx client, with a request hook that keeps the bodies it sends (the
    # multipart stream cannot be read back from the response afterwards).
    bodies: list[bytes] = []

    async def keep_body(request: Any) -> None:
        bodies.append(await request.aread())

    client = AsyncOpenAI(
        api_key="sk-duet-test",
        base_url=base_url,
        max_retries=0,
        http_client=openai.DefaultAsyncHttpxClient(event_hooks={"request": [keep_body]}),
    )
    FIGURES["openai"] = openai.__version__
    FIGURES["aiortc"] = aiortc.__version__
    dc_log = EventLog("data channel")
    sb_log = EventLog("sideband")

    def on_message(msg: Any) -> None:
        try:
            dc_log.add(json.loads(msg))
        except (ValueError, TypeError):
            dc_log.problems.append(f"not JSON text: {str(msg)[:80]!r}")

    speaker = Speaker()
    peer = Peer(VoiceTrack(), speaker, on_message)
    pc, mic = peer.pc, peer.mic
    extras: set[str] = set()
    sideband = None
    sb_cm = None
    call_id = None
    try:
        offer = await peer.offer()
        dc = peer.dc

        # a. calls.create, multipart with the session object.
        print("== a. calls.create", flush=True)
        t_post = now()
        raw = await client.realtime.calls.with_raw_response.create(sdp=offer, session=SEEDED_SESSION)
        FIGURES["calls_create_ms"] = round((now() - t_post) * 1000, 1)
        req = raw.http_request
        req_ctype = req.headers.get("content-type", "")
        body = bodies[-1] if bodies else b""
        FIGURES["request"] = f"{req.method} {req.url.path} {req_ctype.split(';')[0]}, {len(body)} bytes"
        check(req_ctype.startswith("multipart/form-data; boundary="), "a. the SDK sent multipart/form-data", req_ctype)
        check(b'name="sdp"' in body and b'name="session"' in body, "a. the body has parts sdp and session",
              body[:300].decode("utf-8", "replace"))
        check(raw.status_code == 201, "a. 201 Created", str(raw.status_code))
        location = raw.headers.get("location", "")
        FIGURES["location"] = location
        m = re.fullmatch(r"/v1/realtime/calls/(rtc_[0-9A-Za-z_-]+)", location)
        if not check(m is not None, "a. Location /v1/realtime/calls/rtc_…", location):
            raise Abort("no call id")
        call_id = m.group(1)
        check(raw.headers.get("content-type", "").startswith("application/sdp"), "a. answer Content-Type application/sdp",
              raw.headers.get("content-type", ""))
        answer_obj = raw.parse()  # what plain `calls.create(...)` returns (legacy response: not awaitable)
        FIGURES["calls_create_returns"] = type(answer_obj).__name__
        answer = answer_obj.text
        for needle in ("m=audio", "a=fingerprint:", "a=ice-ufrag:", "a=candidate:", "m=application"):
            check(needle in answer, f"a. the answer SDP has {needle}", answer[:300])
        await peer.answer(answer)
        try:
            await asyncio.wait_for(peer.dc_open.wait(), 5)
        except asyncio.TimeoutError:
            raise Abort(f"not connected within 10 s of the answer; states {peer.states}") from None
        FIGURES["connect_ms"] = round((now() - t_post) * 1000, 1)

        # b. the session part seeded the call.
        print("== b. seeded session", flush=True)
        _, created = await dc_log.until("session.created", timeout=5)
        s = created.get("session", {})
        td = s.get("audio", {}).get("input", {}).get("turn_detection") or {}
        FIGURES["peer_session_created"] = compact({"id": s.get("id"), "instructions": s.get("instructions"),
                                                   "turn_detection": td, "voice": s.get("audio", {}).get("output", {}).get("voice")})
        check(dc_log.log[0][1].get("type") == "session.created", "b. session.created is the first event on oai-events",
              str(dc_log.types()[:3]))
        check(s.get("instructions") == SEEDED_SESSION["instructions"], "b. the session part's instructions apply",
              repr(s.get("instructions")))
        check(td.get("type") == "server_vad" and td.get("silence_duration_ms") == 400,
              "b. the session part's turn_detection applies", json.dumps(td))
        check(s.get("audio", {}).get("output", {}).get("voice") == "marin", "b. the session part's voice applies",
              json.dumps(s.get("audio", {}).get("output")))
        session_id = s.get("id")

        # c. sideband joins.
        print("== c. sideband", flush=True)
        t_sb = now()
        sb_cm = client.realtime.connect(call_id=call_id)
        sideband = await sb_cm.__aenter__()

        async def read_sideband() -> None:
            try:
                async for ev in sideband:
                    sb_log.add(validate_typed(ev, sb_log, extras))
                sb_log.close("closed (1000)")
            except Exception as e:  # noqa: BLE001 - reported
                sb_log.close(f"{type(e).__name__}: {e}")

        peer.tasks.append(asyncio.ensure_future(read_sideband()))
        _, sb_created = await sb_log.until("session.created", timeout=5)
        FIGURES["sideband_join_ms"] = round((now() - t_sb) * 1000, 1)
        check(sb_log.log[0][1].get("type") == "session.created", "c. the sideband's first event is session.created",
              str(sb_log.types()[:3]))
        check(sb_created.get("session", {}).get("id") == session_id, "c. the sideband joined the call's session",
              f"{sb_created.get('session', {}).get('id')} vs {session_id}")
        m_dc = dc_log.mark()
        await sideband.session.update(session={"type": "realtime", "instructions": "Set by the sideband."})
        _, upd = await dc_log.until("session.updated", m_dc, timeout=5)
        check(upd.get("session", {}).get("instructions") == "Set by the sideband.",
              "c. the sideband's session.update reaches the peer as session.updated", compact(upd))
        _, sb_upd = await sb_log.until("session.updated", timeout=5)
        check(sb_upd.get("event_id") == upd.get("event_id"), "c. the sideband sees the same session.updated (same event_id)",
              f"{sb_upd.get('event_id')} vs {upd.get('event_id')}")

        # d. the peer speaks; the sideband sees the turn.
        print("== d. a spoken turn, seen by the sideband", flush=True)
        m_sb = sb_log.mark()
        m_dc = dc_log.mark()
        await asyncio.sleep(0.3)
        speech_end = await mic.speak(1.0)
        _, rc = await sb_log.until("response.created", m_sb, timeout=8)
        rid = rc["response"]["id"]
        _, done = await sb_log.until("response.done", m_sb, timeout=8, pred=lambda e: e["response"]["id"] == rid)
        await sb_log.until("output_audio_buffer.stopped", m_sb, timeout=5, pred=lambda e: e.get("response_id") == rid)
        await dc_log.until("output_audio_buffer.stopped", m_dc, timeout=5, pred=lambda e: e.get("response_id") == rid)
        types = sb_log.types(m_sb)
        expected = ["input_audio_buffer.speech_started", "input_audio_buffer.speech_stopped",
                    "input_audio_buffer.committed", "response.created", "output_audio_buffer.started",
                    "response.output_audio_transcript.done", "response.done", "output_audio_buffer.stopped"]
        missing = missing_in_order(types, expected)
        check(not missing, "d. the sideband sees the whole turn in order", f"missing {missing}; got {types}")
        check(done["response"]["status"] == "completed", "d. response.done completed", compact(done["response"]))
        tr = [e.get("transcript") for e in sb_log.since(m_sb, "response.output_audio_transcript.done")]
        FIGURES["turn_transcript"] = tr
        check(bool(tr) and re.fullmatch(r"echo of (0\.9|1\.0|1\.1) s", tr[0] or "") is not None,
              'd. transcript "echo of ~1.0 s"', repr(tr))
        dc_ids = {e.get("event_id") for _, e in dc_log.log}
        only_sb = [compact(e, 200) for _, e in sb_log.log[m_sb:] if e.get("event_id") not in dc_ids]
        check(not only_sb, "d. the sideband's events are the data channel's (same event_ids)",
              f"{len(only_sb)} of {len(sb_log.log) - m_sb} not on the data channel: {only_sb}")
        loud = [t for t in speaker.loud if t > speech_end]
        FIGURES["peer_heard_ms"] = len(loud) * 20
        check(len(loud) >= 40, "d. the peer heard the answer over RTP (>= 0.8 s above -40 dBFS)", f"{len(loud) * 20} ms")
        audio_deltas = sb_log.since(m_sb, "response.output_audio.delta")
        FIGURES["sideband_audio_deltas"] = len(audio_deltas)

        # e. the sideband drives the call.
        print("== e. the sideband drives the call", flush=True)
        m_dc = dc_log.mark()
        await sideband.conversation.item.create(item={"type": "message", "role": "user",
                                                      "content": [{"type": "input_text", "text": "hello from the server"}]})
        await sideband.response.create()
        _, rc2 = await dc_log.until("response.created", m_dc, timeout=5)
        _, done2 = await dc_log.until("response.done", m_dc, timeout=10,
                                      pred=lambda e: e["response"]["id"] == rc2["response"]["id"])
        tr2 = [e.get("transcript") for e in dc_log.since(m_dc, "response.output_audio_transcript.done")]
        FIGURES["sideband_turn_transcript"] = tr2
        check(done2["response"]["status"] == "completed" and tr2 == ["You said: hello from the server"],
              "e. the sideband's response.create is answered on the peer's channel",
              f"{done2['response']['status']} {tr2}")
        await dc_log.until("output_audio_buffer.stopped", m_dc, timeout=8)

        # f. hangup.
        print("== f. calls.hangup", flush=True)
        t_h = now()
        result = await client.realtime.calls.hangup(call_id)
        FIGURES["hangup_ms"] = round((now() - t_h) * 1000, 1)
        check(result is None, "f. calls.hangup returns None", repr(result))
        frames_at_hangup = speaker.frames
        m_sb_h = sb_log.mark()
        m_dc_h = dc_log.mark()
        end = now() + 3
        while sb_log.closed is None and now() < end:
            await asyncio.sleep(0.02)
        FIGURES["sideband_after_hangup"] = (f"{sb_log.closed} after {round((now() - t_h) * 1000)} ms"
                                            if sb_log.closed else "still open 3 s after the hangup")
        if sb_log.closed is None:
            # Is the call's session still alive behind the open sideband?
            m_z = sb_log.mark()
            await sideband.session.update(session={"type": "realtime", "instructions": "after hangup"})
            try:
                await sb_log.until("session.updated", m_z, timeout=1)
                FIGURES["sideband_probe"] = "a session.update sent through it is still answered"
            except Abort:
                FIGURES["sideband_probe"] = (f"a session.update sent through it gets no answer; the socket then "
                                             f"{'closed: ' + sb_log.closed if sb_log.closed else 'stays open'}")
        check("sideband_probe" not in FIGURES, "f. the server closes the sideband within 3 s of the hangup",
              f"{FIGURES['sideband_after_hangup']}; {FIGURES.get('sideband_probe')}")
        # The server stops the call's media and events at once.
        check(speaker.frames - frames_at_hangup <= 10 and not dc_log.types(m_dc_h),
              "f. no audio or events reach the peer after the hangup (a few in-flight frames aside)",
              f"{speaker.frames - frames_at_hangup} frames, events {dc_log.types(m_dc_h)}")
        # Whether the peer learns of it at once (DTLS close_notify / SCTP ABORT) is reported,
        # not required: without it a peer notices through ICE consent (~30 s).
        while pc.connectionState not in ("closed", "failed") and now() < end + 1:
            await asyncio.sleep(0.05)
        ended = next((t for t, st in peer.states if t >= t_h and st in ("closed", "failed")), None)
        FIGURES["peer_after_hangup"] = (
            f"connectionState {pc.connectionState} {round((ended - t_h) * 1000)} ms after the hangup"
            if ended is not None else f"connectionState {pc.connectionState}, data channel {dc.readyState} "
            f"{round((now() - t_h) * 1000)} ms after the hangup")
        try:
            await client.realtime.calls.hangup(call_id)
            check(False, "f. a second hangup raises NotFoundError (404)", "it succeeded")
        except openai.NotFoundError as e:
            check(e.status_code == 404, "f. a second hangup raises NotFoundError (404)", str(e.status_code))
    finally:
        for log in (dc_log, sb_log):
            check(not log.problems, f"{log.name}: every event well-formed and parsed by the SDK",
                  "\n    ".join(log.problems[:10]))
            errs = log.errors()
            check(not errs, f"{log.name}: no error events", "\n    ".join(compact(e) for e in errs))
        if extras:
            FIGURES["fields unknown to the SDK"] = sorted(extras)
        FIGURES["events"] = f"data channel {len(dc_log.log)}, sideband {len(sb_log.log)}"
        FIGURES["frames_received"] = speaker.frames
        if FAILURES or DUMP:
            for log in (dc_log, sb_log):
                print(f"== {log.name} events (ms, type, fields)")
                t0 = log.log[0][0] if log.log else 0.0
                for t, e in log.log:
                    print(f"  {1000 * (t - t0):8.1f} {compact(e)}")
        if sb_cm is not None:
            try:
                await sb_cm.__aexit__(None, None, None)
            except Exception:  # noqa: BLE001 - already closed by the server
                pass
        await peer.close()
        await client.close()


DUMP = False


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--base-url", required=True, help="http://127.0.0.1:PORT/v1")
    ap.add_argument("--dump-events", action="store_true")
    ap.add_argument("--verbose", action="store_true")
    args = ap.parse_args()
    global DUMP
    DUMP = args.dump_events
    base = args.base_url.rstrip("/")
    if not base.endswith("/v1"):
        base += "/v1"
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.WARNING)
    t0 = now()
    try:
        asyncio.run(asyncio.wait_for(scenario(base), OVERALL_TIMEOUT))
    except Abort as e:
        check(False, "scenario", str(e))
    except asyncio.TimeoutError:
        check(False, "overall", f"did not finish within {OVERALL_TIMEOUT} s")
    except Exception as e:  # noqa: BLE001 - SDK exceptions, connection refused
        import traceback

        traceback.print_exc()
        check(False, "scenario", f"{type(e).__name__}: {e}")
    return summary(t0)


if __name__ == "__main__":
    sys.exit(main())
