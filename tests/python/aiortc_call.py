#!/usr/bin/env python3
"""An independent WebRTC peer (Python aiortc) against Duet's `POST /v1/realtime/calls`.

    python tests/python/aiortc_call.py --base-url http://127.0.0.1:PORT

aiortc is the offerer: it creates the `oai-events` data channel and a send/receive audio
track, gathers loopback-only host candidates (no STUN/TURN), POSTs the offer as
`application/sdp` (or multipart with a session object, `--multipart`), applies the answer
and then runs one call through these steps:

  a. connect (within 400 ms on loopback): `session.created` on the channel,
     `session.update` -> `session.updated`;
  b. idle: count the audio frames received in 2 s (the server sends one every 20 ms,
     silence when idle; a slot the server skipped on its absolute grid while the whole
     machine stalled is counted as such, from the RTP timestamps);
  c. one turn: 1.2 s of synthetic voice, then silence; the full server-VAD lifecycle, an
     audible answer (RMS well above idle) whose pitch is about 140 Hz x 1.25 = 175 Hz;
  d. `output_audio_buffer.clear` during an answer -> `output_audio_buffer.cleared`, and
     the received audio goes silent within about 3 frames;
  e. barge-in: speaking over an answer cancels it (`turn_detected`), clears the buffer and
     truncates the assistant item to what was played (checked with
     `conversation.item.retrieve`);
  f. backchannel under `semantic_vad` (adaptive interruption): 0.3 s of voice over an answer
     pauses its playout within 200 ms and lets it go on where it paused: every frame of the
     answer is heard, no `speech_started`, the answer completes;
  g. a real interruption under it (1.2 s of voice): cancelled and truncated where the
     playout paused;
  h. hangup (`POST .../hangup` -> 200), close.

Audio timings use each RTP packet's arrival (recorded in aiortc's receiver), not the moment
the decoded frame reaches the track: aiortc's audio jitter buffer holds ~80 ms before
decoding. `GET /metrics` (skipped pacing slots) and our own sender's lateness are reported
next to frame counts, so a failure on an overloaded machine says who was starved.

Prints a summary of the measured figures. Exits 0 when every check passed, 1 with `FAIL:`
lines otherwise, 2 if aiortc is not installed. Traffic stays on 127.0.0.1.
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
import time
import urllib.error
import urllib.request
import uuid
from typing import Any

from duet_testlib import (
    EVENT_TIMEOUT,
    FAILURES,
    FIGURES,
    FRAME,
    LOUD_RMS,
    OVERALL_TIMEOUT,
    RATE,
    Abort,
    Peer,
    VoiceTrack,
    check,
    compact,
    in_order,
    loopback_ice,
    missing_packages,
    note,
    now,
    summary,
)

try:
    import aioice
    import aioice.ice
    import aioice.stun
    import aiortc
    import aiortc.rtcrtpreceiver
    import av
    from aiortc import MediaStreamTrack
    from aiortc.mediastreams import MediaStreamError
except ImportError as exc:  # pragma: no cover - environment problem, not a test failure mode
    missing_packages(exc, "aiortc is needed")

FRAME_S = FRAME / RATE
PITCH_FACTOR = 1.25
SESSION_UPDATE = {
    "type": "realtime",
    "audio": {"input": {"turn_detection": {"type": "server_vad", "silence_duration_ms": 500}}},
}
TRANSCRIPT_RE = re.compile(r"^echo of (\d+\.\d) s$")


# --- loopback-only ICE -----------------------------------------------------------------------

loopback_ice()


# Outgoing STUN binding requests (time, transaction id): a retransmitted connectivity check
# means the server ignored the first one.
STUN_REQUESTS: list[tuple[float, bytes]] = []
_orig_send_stun = aioice.ice.StunProtocol.send_stun


def _recording_send_stun(self: Any, message: Any, addr: tuple[str, int]) -> None:
    if message.message_class == aioice.stun.Class.REQUEST:
        STUN_REQUESTS.append((time.monotonic(), message.transaction_id))
    _orig_send_stun(self, message, addr)


aioice.ice.StunProtocol.send_stun = _recording_send_stun


# --- RTP arrival times ----------------------------------------------------------------------

# aiortc's audio jitter buffer holds 4 packets (~80 ms) before decoding, so a decoded frame
# reaches the track well after its packet arrived. Timings here use the packet's arrival:
# every inbound RTP packet is recorded (timestamp -> arrival), and decoded frames, whose pts is
# their RTP timestamp, are matched to it.
RTP_ARRIVALS: dict[int, float] = {}
RTP_LOG: list[tuple[float, int, int, int]] = []  # (arrival, seq, timestamp, payload bytes)
_orig_handle_rtp = aiortc.rtcrtpreceiver.RTCRtpReceiver._handle_rtp_packet


async def _recording_handle_rtp(self: Any, packet: Any, arrival_time_ms: int) -> None:
    t = time.monotonic()
    RTP_ARRIVALS.setdefault(packet.timestamp, t)
    RTP_LOG.append((t, packet.sequence_number, packet.timestamp, len(packet.payload)))
    await _orig_handle_rtp(self, packet, arrival_time_ms)


aiortc.rtcrtpreceiver.RTCRtpReceiver._handle_rtp_packet = _recording_handle_rtp


def grid_skips(t0: float, t1: float) -> int:
    """20 ms slots the sender skipped in [t0, t1): timestamp steps beyond 960 between
    packets with consecutive sequence numbers (a lost packet is not a skip)."""
    pk = [p for p in RTP_LOG if t0 <= p[0] < t1]
    skipped = 0
    for a, b in zip(pk, pk[1:]):
        step = (b[2] - a[2]) % 2**32
        if (b[1] - a[1]) % 65536 == 1 and step > 960 and step % 960 == 0:
            skipped += step // 960 - 1
    return skipped


def rtp_stats(t0: float, t1: float) -> dict[str, Any]:
    """Sequence, timestamp and arrival regularity of the inbound RTP in [t0, t1)."""
    pk = [p for p in RTP_LOG if t0 <= p[0] < t1]
    if len(pk) < 2:
        return {"packets": len(pk)}
    seq_gaps = sum(1 for a, b in zip(pk, pk[1:]) if (b[1] - a[1]) % 65536 != 1)
    ts_steps = sorted({(b[2] - a[2]) % 2**32 for a, b in zip(pk, pk[1:])})
    gaps = [1000 * (b[0] - a[0]) for a, b in zip(pk, pk[1:])]
    return {
        "packets": len(pk),
        "seq_gaps": seq_gaps,
        "ts_steps": ts_steps[:6],
        "interarrival_ms_min_max": [round(min(gaps), 1), round(max(gaps), 1)],
    }


# --- the speaker -----------------------------------------------------------------------------

class Speaker:
    """Receives the server's audio: every frame's arrival time, RMS and mono samples."""

    def __init__(self) -> None:
        self.frames: list[tuple[float, float, array.array]] = []
        self.formats: set[str] = set()
        self.first_frame: float | None = None
        self.ended: str | None = None
        self.unmatched = 0
        self.buffer_delay: list[float] = []

    async def run(self, track: MediaStreamTrack) -> None:
        try:
            while True:
                frame = await track.recv()
                self.add(frame)
        except MediaStreamError:
            self.ended = "MediaStreamError"
        except Exception as e:  # noqa: BLE001 - reported, not fatal
            self.ended = repr(e)

    def add(self, frame: av.AudioFrame) -> None:
        decoded = now()
        t = RTP_ARRIVALS.pop(frame.pts, None) if frame.pts is not None else None
        if t is None:
            self.unmatched += 1
            t = decoded
        else:
            self.buffer_delay.append(decoded - t)
        nch = len(frame.layout.channels)
        fmt = frame.format.name
        self.formats.add(f"{fmt}/{frame.layout.name}/{frame.sample_rate}/{frame.samples}")
        raw = bytes(frame.planes[0])
        if fmt == "s16":
            a = array.array("h")
            a.frombytes(raw[: frame.samples * nch * 2])
            if sys.byteorder != "little":
                a.byteswap()
            mono = a[::nch] if nch > 1 else a
            scale = 32768.0
        else:  # not expected from aiortc's Opus decoder, but do not crash on it
            a = array.array("f")
            a.frombytes(raw[: frame.samples * 4 * (nch if fmt == "flt" else 1)])
            mono = array.array("h", (int(max(-1, min(1, x)) * 32767) for x in a[:: nch if fmt == "flt" else 1]))
            scale = 32768.0
        n = len(mono) or 1
        rms = math.sqrt(sum(x * x for x in mono) / n) / scale
        if self.first_frame is None:
            self.first_frame = t
        self.frames.append((t, rms, mono))

    def count(self, t0: float, t1: float) -> int:
        return sum(1 for t, _, _ in self.frames if t0 <= t < t1)

    def between(self, t0: float, t1: float) -> list[tuple[float, float, array.array]]:
        return [f for f in self.frames if t0 <= f[0] < t1]

    def first_loud_after(self, t0: float) -> float | None:
        for t, r, _ in self.frames:
            if t >= t0 and r > LOUD_RMS:
                return t
        return None

    async def wait_loud(self, t0: float, timeout: float) -> float | None:
        end = now() + timeout
        while now() < end:
            t = self.first_loud_after(t0)
            if t is not None:
                return t
            await asyncio.sleep(0.005)
        return None

    async def wait_quiet(self, quiet: float, timeout: float) -> bool:
        """Waits until no audible frame arrived for `quiet` seconds."""
        end = now() + timeout
        while now() < end:
            last = max((t for t, r, _ in self.frames if r > LOUD_RMS), default=0.0)
            if now() - last >= quiet and self.frames and self.frames[-1][0] > now() - 0.25:
                return True
            await asyncio.sleep(0.02)
        return False


def median(xs: list[float]) -> float:
    s = sorted(xs)
    return s[len(s) // 2] if s else float("nan")


def estimate_pitch(mono: list[int], rate: int = RATE) -> tuple[float, list[float]]:
    """Median over 40 ms windows of a normalized-autocorrelation pitch estimate (80-400 Hz)
    on the signal decimated to 12 kHz. Returns (median Hz, per-window estimates)."""
    dec = 4
    x = [sum(mono[i : i + dec]) / dec for i in range(0, len(mono) - dec + 1, dec)]
    r = rate // dec
    win = int(0.04 * r)
    lo, hi = int(r / 400), int(r / 80)
    ests: list[float] = []
    for start in range(0, len(x) - win - hi, win):
        seg = x[start : start + win + hi]
        a = seg[:win]
        e0 = sum(v * v for v in a)
        if e0 <= 0:
            continue
        corr = []
        for lag in range(lo, hi + 1):
            b = seg[lag : lag + win]
            eb = sum(v * v for v in b)
            c = sum(p * q for p, q in zip(a, b)) / math.sqrt(e0 * eb) if eb > 0 else 0.0
            corr.append((lag, c))
        best = max(c for _, c in corr)
        if best < 0.5:
            continue
        # The smallest lag that is nearly as good as the best avoids octave-down errors.
        lag = next(lag for lag, c in corr if c >= 0.9 * best)
        # Refine to the local maximum at or after that lag.
        i = lag - lo
        while i + 1 < len(corr) and corr[i + 1][1] > corr[i][1]:
            i += 1
        ests.append(r / corr[i][0])
    return median(ests), ests


# --- the data channel ------------------------------------------------------------------------

class Events:
    """JSON events from `oai-events`, each with its arrival time; a cursor for waiting."""

    def __init__(self) -> None:
        self.log: list[tuple[float, dict[str, Any]]] = []
        self.cursor = 0
        self._new = asyncio.Event()
        self.bad: list[str] = []

    def on_message(self, msg: Any) -> None:
        t = now()
        if isinstance(msg, bytes):
            self.bad.append(f"binary message of {len(msg)} bytes")
            return
        try:
            ev = json.loads(msg)
        except ValueError:
            self.bad.append(f"not JSON: {msg[:80]!r}")
            return
        if not (isinstance(ev.get("event_id"), str) and ev["event_id"].startswith("event_")):
            self.bad.append(f"{ev.get('type')}: event_id {ev.get('event_id')!r}")
        self.log.append((t, ev))
        if ev.get("type") == "error":
            note(f"server error event: {json.dumps(ev.get('error'))}")
        self._new.set()

    async def next(self, timeout: float = EVENT_TIMEOUT) -> tuple[float, dict[str, Any]]:
        end = now() + timeout
        while self.cursor >= len(self.log):
            self._new.clear()
            left = end - now()
            if left <= 0:
                raise Abort(f"no event within {timeout} s; recent: {self.recent()}")
            try:
                await asyncio.wait_for(self._new.wait(), left)
            except asyncio.TimeoutError:
                pass
        self.cursor += 1
        return self.log[self.cursor - 1]

    async def until(self, kind: str, timeout: float = EVENT_TIMEOUT,
                    pred: Any = None) -> tuple[float, dict[str, Any]]:
        end = now() + timeout
        while True:
            left = end - now()
            try:
                t, ev = await self.next(max(left, 0.0))
            except Abort:
                raise Abort(f"no {kind} within {timeout} s; since then: {self.recent()}") from None
            if ev.get("type") == kind and (pred is None or pred(ev)):
                return t, ev

    async def find(self, mark: int, kind: str, timeout: float) -> dict[str, Any] | None:
        """The first event of `kind` logged since `mark`, waiting up to `timeout`; leaves
        the cursor alone."""
        end = now() + timeout
        while True:
            for _, e in self.log[mark:]:
                if e.get("type") == kind:
                    return e
            if now() >= end:
                return None
            await asyncio.sleep(0.01)

    def mark(self) -> int:
        return len(self.log)

    def types_since(self, mark: int) -> list[str]:
        return [e.get("type", "?") for _, e in self.log[mark:]]

    def since(self, mark: int, kind: str) -> list[tuple[float, dict[str, Any]]]:
        return [(t, e) for t, e in self.log[mark:] if e.get("type") == kind]

    def recent(self, n: int = 20) -> list[str]:
        return [e.get("type", "?") for _, e in self.log[-n:]]


# --- HTTP ------------------------------------------------------------------------------------

def _post(url: str, body: bytes, ctype: str) -> tuple[int, dict[str, str], str]:
    req = urllib.request.Request(url, data=body, method="POST", headers={"Content-Type": ctype})
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, dict(r.headers), r.read().decode("utf-8", "replace")
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), e.read().decode("utf-8", "replace")


async def post(url: str, body: bytes, ctype: str) -> tuple[int, dict[str, str], str]:
    return await asyncio.to_thread(_post, url, body, ctype)


def _get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=5) as r:
            return r.status, r.read().decode("utf-8", "replace")
    except urllib.error.HTTPError as e:
        return e.code, ""
    except OSError:
        return 0, ""


async def server_metrics(base: str) -> dict[str, float]:
    """The server's `GET /metrics` counters (empty if it has none)."""
    status, text = await asyncio.to_thread(_get, f"{base}/metrics")
    out: dict[str, float] = {}
    if status != 200:
        return out
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 2 and not line.startswith("#"):
            try:
                out[parts[0]] = float(parts[1])
            except ValueError:
                pass
    return out


def stalls(c: "Call", before: dict[str, float], after: dict[str, float], t0: float, t1: float) -> str:
    """Who was starved of CPU in [t0, t1): the server's skipped 20 ms slots and our own late
    frames (explains missing frames on an overloaded machine)."""
    skipped = after.get("duet_pacing_skipped_total", 0) - before.get("duet_pacing_skipped_total", 0)
    late = [d for t, d in c.mic.late if t0 <= t < t1]
    worst = max(late, default=0.0)
    return (f"server skipped {skipped:.0f} pacing slots (duet_pacing_skipped_total); "
            f"our sender was up to {1000 * worst:.0f} ms late")


def multipart(sdp: str, session: dict[str, Any]) -> tuple[bytes, str]:
    boundary = "duet-" + uuid.uuid4().hex
    parts = []
    for name, value, ctype in (("sdp", sdp, "application/sdp"),
                               ("session", json.dumps(session), "application/json")):
        parts.append(
            f"--{boundary}\r\nContent-Disposition: form-data; name=\"{name}\"\r\n"
            f"Content-Type: {ctype}\r\n\r\n{value}\r\n"
        )
    parts.append(f"--{boundary}--\r\n")
    return "".join(parts).encode(), f"multipart/form-data; boundary={boundary}"


# --- the scenario ----------------------------------------------------------------------------

class Call(Peer):
    def __init__(self, base: str, use_multipart: bool) -> None:
        self.events = Events()
        super().__init__(VoiceTrack(), Speaker(), self.events.on_message, verbose=True)
        self.base = base
        self.use_multipart = use_multipart
        self.location: str | None = None

    async def connect(self) -> None:
        # aiortc gathers (all candidates, loopback only here) inside setLocalDescription.
        offer = await self.offer()
        cands = [l for l in offer.splitlines() if l.startswith("a=candidate")]
        note(f"offer: {len(offer)} bytes, candidates {cands}")
        check(bool(cands) and all(" 127.0.0.1 " in c for c in cands),
              "offer carries only loopback candidates", str(cands))

        t_post = now()
        url = f"{self.base}/v1/realtime/calls"
        if self.use_multipart:
            body, ctype = multipart(offer, SESSION_UPDATE)
        else:
            body, ctype = offer.encode(), "application/sdp"
        status, headers, answer = await post(url, body, ctype)
        FIGURES["post_ms"] = round((now() - t_post) * 1000, 1)
        if status != 201:
            raise Abort(f"POST /v1/realtime/calls -> {status}, expected 201: {answer[:400]}")
        hdr = {k.lower(): v for k, v in headers.items()}
        self.location = hdr.get("location")
        check(hdr.get("content-type", "").startswith("application/sdp"),
              "answer Content-Type application/sdp", hdr.get("content-type", ""))
        check(bool(self.location and re.fullmatch(r"/v1/realtime/calls/rtc_[0-9a-f]{32}", self.location)),
              "Location /v1/realtime/calls/rtc_<32 hex>", str(self.location))
        a_cands = [l for l in answer.splitlines() if l.startswith("a=candidate")]
        note(f"answer: {len(answer)} bytes, candidates {a_cands}")
        FIGURES["answer_codecs"] = [l.split(":", 1)[1] for l in answer.splitlines()
                                    if l.startswith("a=rtpmap")]
        await self.answer(answer)
        FIGURES["connect_ms"] = round((now() - t_post) * 1000, 1)
        sent = [tid for t, tid in STUN_REQUESTS if t <= now()]
        FIGURES["ice_check_retransmits"] = len(sent) - len(set(sent))
        why = (f"{FIGURES['ice_check_retransmits']} ICE connectivity check(s) went unanswered "
               f"and were retransmitted (aioice retransmits after 500 ms)"
               if FIGURES["ice_check_retransmits"] else "no ICE check was retransmitted")
        check(FIGURES["connect_ms"] < 400, "connected within 400 ms of the POST (loopback)",
              f"{FIGURES['connect_ms']} ms; {why}")
        try:
            await asyncio.wait_for(self.dc_open.wait(), 5)
        except asyncio.TimeoutError:
            raise Abort(f"oai-events did not open within 5 s of connecting (dc state {self.dc.readyState})") from None
        FIGURES["channel_open_ms"] = round((now() - t_post) * 1000, 1)
        self.t_post = t_post

    async def hangup(self) -> None:
        if not self.location:
            return
        status, _, body = await post(f"{self.base}{self.location}/hangup", b"", "application/json")
        check(status == 200, "POST .../hangup -> 200", f"got {status}: {body[:200]}")

    def send(self, ev: dict[str, Any]) -> None:
        self.dc.send(json.dumps(ev))


async def step_session(c: Call) -> None:
    _, created = await c.events.until("session.created", 5)
    FIGURES["session_created_ms"] = round((c.events.log[0][0] - c.t_post) * 1000, 1)
    first = c.events.log[0][1].get("type")
    check(first == "session.created", "session.created is the first event", f"first was {first}")
    sess = created.get("session", {})
    note(f"session.created: id={sess.get('id')} model={sess.get('model')}")
    m = c.events.mark()
    c.send({"type": "session.update", "session": SESSION_UPDATE})
    _, up = await c.events.until("session.updated", 5)
    td = up.get("session", {}).get("audio", {}).get("input", {}).get("turn_detection") or {}
    check(td.get("type") == "server_vad" and td.get("silence_duration_ms") == 500,
          "session.updated echoes server_vad with silence_duration_ms 500", json.dumps(td))
    errs = c.events.since(m, "error")
    check(not errs, "session.update raised no error", json.dumps([e for _, e in errs]))


async def step_idle(c: Call) -> None:
    # Wait for the first frame so counting starts on a running stream.
    end = now() + 3
    while c.speaker.first_frame is None and now() < end:
        await asyncio.sleep(0.01)
    if c.speaker.first_frame is None:
        check(False, "audio frames arrive while idle", "no audio frame within 3 s of session.updated")
        return
    FIGURES["first_frame_ms"] = round((c.speaker.first_frame - c.t_post) * 1000, 1)
    m0 = await server_metrics(c.base)
    t0 = now()
    await asyncio.sleep(2.2)  # the last frames of the window are still in aiortc's buffer
    m1 = await server_metrics(c.base)
    n = c.speaker.count(t0, t0 + 2.0)
    FIGURES["idle_stalls"] = stalls(c, m0, m1, t0, t0 + 2.0)
    FIGURES["rtp_idle_2s"] = rtp_stats(t0, t0 + 2.0)
    frames = c.speaker.between(t0, t0 + 2.0)
    idle_rms = max((r for _, r, _ in frames), default=float("nan"))
    FIGURES["idle_frames_2s"] = n
    FIGURES["idle_rms_max"] = round(idle_rms, 5)
    FIGURES["received_formats"] = sorted(c.speaker.formats)
    # The server keeps an absolute 20 ms grid: when its pacer is starved it skips the late
    # slots (the RTP timestamp jumps, the sequence does not) instead of bursting them. Every
    # slot of the window is either a frame or such a skip, and a skip is excused only while
    # the whole machine stalled (our own sender was late too); otherwise at most two.
    skips = grid_skips(t0, t0 + 2.0)
    machine_stalled = max((d for t, d in c.mic.late if t0 <= t < t0 + 2.0), default=0.0) >= 0.1
    FIGURES["idle_grid_skips"] = skips
    check(n + skips >= 98, "idle: every 20 ms slot of 2 s is a frame or a skipped slot",
          f"got {n} frames and {skips} skips; RTP {FIGURES['rtp_idle_2s']}; {FIGURES['idle_stalls']}")
    check(skips <= 2 or machine_stalled, "idle: >= 98 of 100 frames in 2 s unless the machine stalled",
          f"got {n}; RTP {FIGURES['rtp_idle_2s']}; {FIGURES['idle_stalls']}")
    check(n <= 103, "idle: no more than ~100 frames in 2 s (no bursts)",
          f"got {n}; {FIGURES['idle_stalls']}")
    check(idle_rms < LOUD_RMS, "idle audio is silent", f"max RMS {idle_rms:.4f}")


async def step_turn(c: Call) -> None:
    ev = c.events
    m = ev.mark()
    speech_end = await c.mic.speak(1.2)
    _, stopped = await ev.until("output_audio_buffer.stopped", 12)
    t_stopped = ev.log[ev.cursor - 1][0]
    types = ev.types_since(m)
    note(f"turn events: {types}")
    ok, why = in_order(types, [
        "input_audio_buffer.speech_started", "input_audio_buffer.speech_stopped",
        "input_audio_buffer.committed", "response.created", "output_audio_buffer.started",
    ])
    check(ok, "turn: speech_started, speech_stopped, committed, response.created, output_audio_buffer.started in order", why)
    for kind in ("response.output_audio_transcript.delta", "response.output_audio.done",
                 "response.done"):
        check(kind in types, f"turn: {kind} received", f"events {types}")
    ok, why = in_order(types, ["output_audio_buffer.started", "output_audio_buffer.stopped"])
    check(ok, "turn: output_audio_buffer.started before .stopped", why)
    dones = ev.since(m, "response.done")
    if dones:
        resp = dones[0][1].get("response", {})
        check(resp.get("status") == "completed", "turn: response.done status completed",
              f"status {resp.get('status')} details {resp.get('status_details')}")
        try:
            transcript = resp["output"][0]["content"][0]["transcript"]
        except (KeyError, IndexError, TypeError):
            transcript = None
        FIGURES["turn_transcript"] = transcript
        mt = TRANSCRIPT_RE.match(transcript or "")
        check(bool(mt) and 1.0 <= float(mt.group(1)) <= 1.3,
              "turn: transcript 'echo of ~1.2 s'", repr(transcript))
        rid = resp.get("id")
        started = ev.since(m, "output_audio_buffer.started")
        check(bool(started) and started[0][1].get("response_id") == rid,
              "turn: output_audio_buffer.started carries the response id",
              f"{[e for _, e in started]} vs {rid}")
        check(stopped.get("response_id") == rid, "turn: output_audio_buffer.stopped carries the response id",
              f"{stopped} vs {rid}")
    # Audio of the answer: frames between the end of our speech and shortly after .stopped.
    await asyncio.sleep(0.2)
    ans = c.speaker.between(speech_end, t_stopped + 0.2)
    loud = [f for f in ans if f[1] > LOUD_RMS]
    first_loud = loud[0][0] if loud else None
    FIGURES["answer_latency_ms"] = round((first_loud - speech_end) * 1000, 1) if first_loud else None
    FIGURES["answer_audible_ms"] = 20 * len(loud)
    FIGURES["answer_rms_mean"] = round(sum(f[1] for f in loud) / len(loud), 4) if loud else 0.0
    t_started = ev.since(m, "output_audio_buffer.started")
    if t_started and first_loud:
        FIGURES["started_event_to_first_loud_ms"] = round((first_loud - t_started[0][0]) * 1000, 1)
    if loud:
        FIGURES["stopped_event_after_last_loud_ms"] = round((t_stopped - loud[-1][0]) * 1000, 1)
    check(len(loud) >= 40, "turn: the answer is audible (>= 0.8 s of frames above -40 dBFS)",
          f"{len(loud)} loud frames of {len(ans)} received between end of speech and .stopped; "
          f"max RMS {max((f[1] for f in ans), default=0):.4f}")
    check(bool(loud) and FIGURES["answer_rms_mean"] > 5 * max(FIGURES.get("idle_rms_max", 0), 0.001),
          "turn: answer RMS clearly above idle", f"answer {FIGURES['answer_rms_mean']} idle {FIGURES.get('idle_rms_max')}")
    if loud:
        # The middle of the answer, away from the shifter's fades.
        mid = loud[len(loud) // 5 : len(loud) - len(loud) // 5] or loud
        pcm: list[int] = []
        for _, _, s in mid[:30]:
            pcm.extend(s)
        hz, ests = await asyncio.to_thread(estimate_pitch, pcm)
        FIGURES["answer_pitch_hz"] = round(hz, 1)
        check(150.0 <= hz <= 200.0, "turn: answer pitch ~175 Hz (140 x 1.25)",
              f"median {hz:.1f} Hz over {len(ests)} windows: {[round(e) for e in ests]}")
    # Silence again after the answer.
    late = [f for f in c.speaker.between(t_stopped + 0.1, now()) if f[1] > LOUD_RMS]
    check(not late, "turn: silence after output_audio_buffer.stopped", f"{len(late)} loud frames")


async def step_clear(c: Call) -> None:
    ev = c.events
    m = ev.mark()
    speech_end = await c.mic.speak(2.0)
    await ev.until("output_audio_buffer.started", 8)
    first_loud = await c.speaker.wait_loud(speech_end, 5)
    if first_loud is None:
        raise Abort("clear: no audible answer within 5 s of output_audio_buffer.started")
    await asyncio.sleep(0.4)
    t_clear = now()
    c.send({"type": "output_audio_buffer.clear"})
    _, cleared = await ev.until("output_audio_buffer.cleared", 5)
    t_cleared = ev.log[ev.cursor - 1][0]
    FIGURES["clear_to_cleared_event_ms"] = round((t_cleared - t_clear) * 1000, 1)
    await asyncio.sleep(0.6)
    after = c.speaker.between(t_cleared, now())
    loud_after = [f for f in after if f[1] > LOUD_RMS]
    all_loud = [f for f in c.speaker.between(first_loud, now()) if f[1] > LOUD_RMS]
    last_loud = all_loud[-1][0] if all_loud else t_clear
    FIGURES["clear_send_to_silence_ms"] = round((last_loud - t_clear) * 1000, 1)
    FIGURES["cleared_event_to_silence_ms"] = round(max(0.0, last_loud - t_cleared) * 1000, 1)
    FIGURES["loud_frames_after_cleared"] = len(loud_after)
    check(len(loud_after) <= 3 and last_loud - t_cleared <= 0.1,
          "clear: received audio silent within ~3 frames of output_audio_buffer.cleared",
          f"{len(loud_after)} loud frames after the event, last {1000 * (last_loud - t_cleared):.0f} ms after it")
    check(last_loud - t_clear <= 0.3, "clear: silence within 300 ms of sending the clear",
          f"last loud frame {1000 * (last_loud - t_clear):.0f} ms after the clear was sent")
    types = ev.types_since(m)
    note(f"clear events: {types}")
    rid = ev.since(m, "response.created")
    rid = rid[0][1]["response"]["id"] if rid else None
    check(cleared.get("response_id") in (rid, None), "clear: cleared names the response",
          f"{cleared} vs {rid}")
    errs = ev.since(m, "error")
    check(not errs, "clear: no error event", json.dumps([e for _, e in errs]))
    dones = ev.since(m, "response.done")
    FIGURES["clear_response_done"] = (
        [(d.get("response", {}).get("status"), d.get("response", {}).get("status_details")) for _, d in dones]
    )
    stopped = [e for _, e in ev.since(m, "output_audio_buffer.stopped")]
    check(not stopped, "clear: no output_audio_buffer.stopped for the cleared response", str(stopped))
    if not await c.speaker.wait_quiet(0.8, 5):
        check(False, "clear: audio stays silent afterwards", "still loud frames")


async def step_barge_in(c: Call) -> None:
    ev = c.events
    m = ev.mark()
    speech_end = await c.mic.speak(2.5)
    _, created = await ev.until("response.created", 8)
    rid = created["response"]["id"]
    first_loud = await c.speaker.wait_loud(speech_end, 5)
    if first_loud is None:
        raise Abort("barge-in: no audible answer within 5 s of the end of speech")
    await asyncio.sleep(0.4)
    t_barge = now()
    m_barge = ev.mark()
    barge_done = c.mic.speak(0.5)
    await ev.until("input_audio_buffer.speech_started", 5)
    FIGURES["bargein_speech_started_ms"] = round((ev.log[ev.cursor - 1][0] - t_barge) * 1000, 1)
    _, done = await ev.until("response.done", 5, pred=lambda e: e.get("response", {}).get("id") == rid)
    resp = done["response"]
    check(resp.get("status") == "cancelled", "barge-in: response.done status cancelled",
          f"status {resp.get('status')}")
    check((resp.get("status_details") or {}).get("reason") == "turn_detected",
          "barge-in: status_details.reason turn_detected", json.dumps(resp.get("status_details")))
    _, cleared = await ev.until("output_audio_buffer.cleared", 5)
    t_cleared = ev.log[ev.cursor - 1][0]
    check(cleared.get("response_id") == rid, "barge-in: output_audio_buffer.cleared names the response",
          f"{cleared} vs {rid}")
    try:
        item_id = resp["output"][0]["id"]
    except (KeyError, IndexError, TypeError):
        item_id = None
    tr = await ev.find(m, "conversation.item.truncated", 1.5)
    end_ms = tr.get("audio_end_ms") if tr else None
    FIGURES["bargein_audio_end_ms"] = end_ms
    # What the client heard of the answer: audible frames from its start to the cleared event.
    await asyncio.sleep(max(0.0, t_cleared + 0.25 - now()))
    heard = [f for f in c.speaker.between(first_loud, t_cleared + 0.1) if f[1] > LOUD_RMS]
    heard_ms = round((heard[-1][0] - first_loud) * 1000 + 20) if heard else 0
    FIGURES["bargein_heard_ms"] = heard_ms
    FIGURES["bargein_heard_frames"] = len(heard)
    FIGURES["bargein_cleared_after_last_loud_ms"] = (
        round((t_cleared - heard[-1][0]) * 1000, 1) if heard else None)
    if check(tr is not None, "barge-in: conversation.item.truncated for the assistant item",
             f"none within 1.5 s of output_audio_buffer.cleared; events since the barge-in: "
             f"{ev.types_since(m_barge)[:12]}"):
        check(tr.get("item_id") == item_id, "barge-in: truncated names the assistant item",
              f"{tr.get('item_id')} vs {item_id}")
        check(isinstance(end_ms, int) and end_ms % 20 == 0,
              "barge-in: audio_end_ms is a multiple of 20 ms", repr(end_ms))
        check(isinstance(end_ms, int) and 0 < end_ms <= 2600,
              "barge-in: 0 < audio_end_ms <= answer length (~2.5 s)", repr(end_ms))
        check(isinstance(end_ms, int) and abs(end_ms - heard_ms) <= 200,
              "barge-in: audio_end_ms matches what the client heard (+-200 ms)",
              f"audio_end_ms {end_ms} vs {heard_ms} ms heard")
    # The item as stored.
    if item_id:
        m_ret = ev.mark()
        c.send({"type": "conversation.item.retrieve", "item_id": item_id})
        got = await ev.find(m_ret, "conversation.item.retrieved", 5)
        if not check(got is not None, "barge-in: conversation.item.retrieve answered",
                     f"events since: {ev.types_since(m_ret)}"):
            got = {}
        item = got.get("item", {})
        try:
            part = item["content"][0]
            transcript = part.get("transcript")
            audio_b64 = part.get("audio") or ""
        except (KeyError, IndexError, TypeError, AttributeError):
            transcript, audio_b64 = None, ""
        # base64 PCM16 at 24 kHz: 4 chars -> 3 bytes, 48 bytes per ms.
        stored_ms = (len(audio_b64) * 3 // 4 - audio_b64.count("=")) / 48
        FIGURES["bargein_item_transcript"] = transcript
        FIGURES["bargein_item_status"] = item.get("status")
        FIGURES["bargein_item_audio_ms"] = round(stored_ms, 1)
        deltas = "".join(e.get("delta", "") for _, e in ev.since(m, "response.output_audio_transcript.delta")
                         if e.get("response_id") == rid)
        FIGURES["bargein_transcript_deltas"] = deltas
        full = "echo of 2.5 s"
        mfull = re.match(r"^echo of (\d+\.\d) s", deltas)
        if mfull:
            full = mfull.group(0)
        answer_s = float(mfull.group(1)) if mfull else 2.5
        ok = isinstance(transcript, str) and full.startswith(transcript)
        check(ok, f"barge-in: retrieved transcript is a prefix of {full!r}", repr(transcript))
        played_ms = end_ms if isinstance(end_ms, int) else heard_ms
        check(abs(stored_ms - played_ms) <= 100,
              "barge-in: the stored item's audio is what was played",
              f"item audio {stored_ms:.0f} ms vs {'audio_end_ms' if tr else 'heard'} {played_ms} ms")
        if ok:
            # Words are spread evenly over the answer: word i starts at i/4 of its length.
            expect = sum(1 for i in range(4) if i * answer_s * 1000 / 4 < played_ms)
            have = len(re.findall(r"\s?\S+", transcript))
            check(abs(have - expect) <= 1,
                  "barge-in: transcript consistent with the played audio (words spread over the answer)",
                  f"{have} words {transcript!r} for {played_ms} ms of a {answer_s} s answer (expected ~{expect})")
    await barge_done
    # The interruption is the next turn.
    try:
        await ev.until("input_audio_buffer.committed", 5)
        _, nxt = await ev.until("response.created", 5,
                                pred=lambda e: e["response"]["id"] != rid)
        check(nxt["response"]["id"] != rid, "barge-in: the interruption becomes a new turn", "")
        _, d2 = await ev.until("response.done", 8, pred=lambda e: e["response"]["id"] == nxt["response"]["id"])
        FIGURES["bargein_next_response"] = d2["response"].get("status")
    except Abort as e:
        check(False, "barge-in: the interruption becomes a new turn", str(e))
    # Events of the cancelled response after its response.done.
    idx = next(i for i, (_, e) in enumerate(ev.log) if e.get("type") == "response.done"
               and e.get("response", {}).get("id") == rid)
    after = [e.get("type") for _, e in ev.log[idx + 1:] if e.get("response_id") == rid
             and e.get("type") != "output_audio_buffer.cleared"]
    check(not after, "barge-in: no events of the cancelled response after its response.done", str(after))


ADAPTIVE = {
    "type": "realtime",
    "audio": {"input": {"turn_detection": {"type": "semantic_vad", "eagerness": "high"}}},
}


def answer_frames(c: Call, since: float) -> list[tuple[float, bool]]:
    """(RTP arrival, loud) of every frame received since `since`."""
    return [(t, r > LOUD_RMS) for t, r, _ in c.speaker.between(since, now())]


def paused_at(frames: list[tuple[float, bool]], onset: float) -> float | None:
    """The arrival of the first quiet frame at or after `onset` that follows a loud one."""
    for (_, was_loud), (t, loud) in zip(frames, frames[1:]):
        if t >= onset and was_loud and not loud:
            return t
    return None


def longest_quiet_run(frames: list[tuple[float, bool]]) -> int:
    """Quiet frames in a row, between the first and the last loud one."""
    loud = [i for i, (_, l) in enumerate(frames) if l]
    if not loud:
        return 0
    run = best = 0
    for _, l in frames[loud[0]: loud[-1] + 1]:
        run = 0 if l else run + 1
        best = max(best, run)
    return best


async def adaptive_turn(c: Call, over: float) -> tuple[int, str, float, float]:
    """Speaks a 2.5 s turn and, 0.6 s into its answer, `over` seconds of voice on top of
    it. Returns the event mark before the turn, the answer's response id, when the answer
    was first heard and when the voice over it began."""
    ev = c.events
    m = ev.mark()
    speech_end = await c.mic.speak(2.5)
    _, created = await ev.until("response.created", 8)
    first_loud = await c.speaker.wait_loud(speech_end, 5)
    if first_loud is None:
        raise Abort("no audible answer within 5 s of the end of speech")
    await asyncio.sleep(max(0.0, first_loud + 0.6 - now()))
    c.mic.speak(over)
    return m, created["response"]["id"], first_loud, c.mic.speeches[-1][0]


async def step_backchannel(c: Call) -> None:
    ev = c.events
    c.send({"type": "session.update", "session": ADAPTIVE})
    _, up = await ev.until("session.updated", 5)
    td = up.get("session", {}).get("audio", {}).get("input", {}).get("turn_detection") or {}
    check((td.get("interruption") or {}).get("mode") == "adaptive",
          "backchannel: semantic_vad takes adaptive interruption", json.dumps(td))
    m, rid, first_loud, onset = await adaptive_turn(c, 0.3)
    _, done = await ev.until("response.done", 10, pred=lambda e: e["response"]["id"] == rid)
    check(done["response"].get("status") == "completed", "backchannel: the answer completes",
          f"status {done['response'].get('status')} {done['response'].get('status_details')}")
    started = [e for t, e in ev.since(m, "input_audio_buffer.speech_started") if t > onset]
    check(not started, "backchannel: no speech_started for it", str(started))
    await c.speaker.wait_quiet(0.5, 5)
    frames = answer_frames(c, first_loud)
    loud = sum(1 for _, l in frames if l)
    gap = longest_quiet_run(frames)
    pause = paused_at(frames, onset)
    FIGURES["backchannel_answer_loud_frames"] = loud
    FIGURES["backchannel_paused_frames"] = gap
    FIGURES["backchannel_onset_to_paused_ms"] = round((pause - onset) * 1000, 1) if pause else None
    # Every frame of the 2.5 s answer (125 less the fades), not cut where the voice began.
    check(loud >= 110, "backchannel: the whole answer is heard", f"{loud} loud frames")
    check(10 <= gap <= 60, "backchannel: the playout paused while the voice was judged, then went on",
          f"longest quiet run inside the answer: {gap} frames")
    check(pause is not None and pause - onset <= 0.2,
          "backchannel: the playout paused within 200 ms of the voice's onset",
          f"{FIGURES['backchannel_onset_to_paused_ms']} ms")


async def step_adaptive_interruption(c: Call) -> None:
    ev = c.events
    m, rid, first_loud, onset = await adaptive_turn(c, 1.2)
    _, started = await ev.until("input_audio_buffer.speech_started", 5)
    _, done = await ev.until("response.done", 5, pred=lambda e: e["response"]["id"] == rid)
    resp = done["response"]
    check(resp.get("status") == "cancelled" and
          (resp.get("status_details") or {}).get("reason") == "turn_detected",
          "adaptive interruption: the answer is cancelled (turn_detected)",
          f"{resp.get('status')} {resp.get('status_details')}")
    tr = await ev.find(m, "conversation.item.truncated", 2)
    end_ms = tr.get("audio_end_ms") if tr else None
    await asyncio.sleep(0.3)
    frames = answer_frames(c, first_loud)
    pause = paused_at(frames, onset)
    heard = [t for t, l in frames if l and (pause is None or t < pause)]
    heard_ms = round((heard[-1] - first_loud) * 1000 + 20) if heard else 0
    FIGURES["adaptive_interruption_audio_end_ms"] = end_ms
    FIGURES["adaptive_interruption_heard_ms"] = heard_ms
    check(isinstance(end_ms, int) and end_ms % 20 == 0 and abs(end_ms - heard_ms) <= 100,
          "adaptive interruption: truncated where the playout paused (what was heard, +-100 ms)",
          f"audio_end_ms {end_ms} vs {heard_ms} ms heard")
    await ev.until("response.done", 8, pred=lambda e: e["response"]["id"] != rid)


async def scenario(base: str, use_multipart: bool) -> None:
    c = Call(base, use_multipart)
    metrics_before = await server_metrics(base)
    steps = [
        ("a. session", step_session),
        ("b. idle frames", step_idle),
        ("c. one turn", step_turn),
        ("d. output_audio_buffer.clear", step_clear),
        ("e. barge-in", step_barge_in),
        ("f. backchannel (adaptive)", step_backchannel),
        ("g. interruption (adaptive)", step_adaptive_interruption),
    ]
    try:
        print("== connect", flush=True)
        await c.connect()
        for name, fn in steps:
            print(f"== {name}", flush=True)
            try:
                await fn(c)
            except Abort as e:
                check(False, name, str(e))
            if c.pc.connectionState != "connected":
                check(False, f"{name}: call still connected", f"connectionState {c.pc.connectionState}")
                break
            # Let the line settle between steps.
            await c.speaker.wait_quiet(0.5, 5)
        print("== h. hangup", flush=True)
        await c.hangup()
        # The server ends the call: the peer should notice (DTLS close / consent) soon.
        t_hang = now()
        end = t_hang + 2
        while c.pc.connectionState == "connected" and c.dc.readyState == "open" and now() < end:
            await asyncio.sleep(0.05)
        FIGURES["after_hangup"] = (f"connection {c.pc.connectionState}, oai-events {c.dc.readyState} "
                                   f"{now() - t_hang:.1f} s after the hangup")
        rtp_after = [p for p in RTP_LOG if p[0] > t_hang + 0.1]
        check(not rtp_after, "no RTP from the server after the hangup", f"{len(rtp_after)} packets")
        if c.pc.connectionState == "connected" and c.dc.readyState == "open":
            # Not a failure (the API does not say how the peer learns of a hangup), but a
            # browser would sit "connected" until ICE consent expires (~30 s).
            print("NOTE: after the hangup the server sent nothing that ends the call for the peer "
                  "(no SCTP ABORT / data channel close / DTLS close_notify); "
                  "it stays connected until ICE consent fails", flush=True)
        if c.location:
            status, _, _ = await post(f"{base}{c.location}/hangup", b"", "application/json")
            check(status == 404, "hangup again -> 404 (the call is gone)", f"got {status}")
        check(not c.events.bad, "every event is JSON text with an event_id", str(c.events.bad))
        errs = [e for _, e in c.events.log if e.get("type") == "error"]
        check(not errs, "no error events during the call", json.dumps(errs)[:600])
    except Abort as e:
        check(False, "connect", str(e))
    finally:
        FIGURES["frames_sent"] = c.mic.frames_sent
        FIGURES["frames_received"] = len(c.speaker.frames)
        FIGURES["events_received"] = len(c.events.log)
        FIGURES["speaker_ended"] = c.speaker.ended
        FIGURES["frames_without_rtp_arrival"] = c.speaker.unmatched
        if c.speaker.buffer_delay:
            FIGURES["client_jitter_buffer_ms_median"] = round(1000 * median(c.speaker.buffer_delay), 1)
        FIGURES["rtp_whole_call"] = rtp_stats(0, now())
        FIGURES["stalls_whole_call"] = stalls(c, metrics_before, await server_metrics(base), 0, now())
        FIGURES["sender_frames_over_40ms_late"] = sum(1 for _, d in c.mic.late if d > 0.04)
        # Inbound latency per utterance: speech_started arrival after we began speaking, and
        # the server's audio_start_ms against our own stream position (a drift here means
        # the server's view of our audio falls behind real time).
        lags = []
        for t, e in c.events.log:
            if e.get("type") != "input_audio_buffer.speech_started":
                continue
            before = [sp for sp in c.mic.speeches if sp[0] <= t]
            if before:
                wall, pos_ms, _ = before[-1]
                lags.append((round(1000 * (t - wall)), round(pos_ms - e.get("audio_start_ms", 0))))
        FIGURES["speech_started_after_onset_ms__stream_minus_audio_start_ms"] = lags
        if FAILURES or DUMP:
            print("== events (arrival ms since POST, type, fields)")
            t_post = getattr(c, "t_post", 0.0)
            for t, e in c.events.log:
                print(f"  {1000 * (t - t_post):8.1f} {compact(e, long=40, head=20)}")
        await c.close()


DUMP = False


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--base-url", required=True, help="http://127.0.0.1:PORT")
    ap.add_argument("--multipart", action="store_true",
                    help="POST multipart/form-data with sdp and session parts")
    ap.add_argument("--verbose", action="store_true", help="aiortc/aioice debug logs")
    ap.add_argument("--dump-events", action="store_true", help="print every event at the end")
    args = ap.parse_args()
    global DUMP
    DUMP = args.dump_events
    base = args.base_url.rstrip("/")
    if base.endswith("/v1"):
        base = base[:-3]
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.WARNING)
    FIGURES["aiortc"] = aiortc.__version__
    FIGURES["aioice"] = getattr(aioice, "__version__", "?")
    FIGURES["av"] = av.__version__
    t0 = now()
    try:
        asyncio.run(asyncio.wait_for(scenario(base, args.multipart), OVERALL_TIMEOUT))
    except asyncio.TimeoutError:
        check(False, "overall", f"did not finish within {OVERALL_TIMEOUT} s")
    return summary(t0)


if __name__ == "__main__":
    sys.exit(main())
