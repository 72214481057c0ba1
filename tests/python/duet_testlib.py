"""What the Python test drivers in this folder share (aiortc_call.py, openai_calls.py,
openai_realtime.py): the missing-package exit, the check/figure bookkeeping and its summary,
event helpers, the OpenAI SDK's strict re-validation, and the aiortc side of a call (loopback
ICE, the synthetic-voice microphone, the offerer with its `oai-events` channel).

The scripts run as `python tests/python/<script>.py`, so this folder is on `sys.path`. This
module imports without aiortc or the SDK installed; each script checks its own packages first
(`missing_packages`) and exits 2 when one is absent.
"""

from __future__ import annotations

import array
import asyncio
import fractions
import json
import math
import sys
import time
import typing
import warnings
from typing import Any, NoReturn

try:
    import aioice.ice
    import av
    from aiortc import MediaStreamTrack, RTCConfiguration, RTCPeerConnection, RTCSessionDescription
    from aiortc.mediastreams import MediaStreamError
except ImportError:  # only the WebRTC part needs these; its scripts check for them first
    MediaStreamTrack = object  # type: ignore[assignment,misc]  (VoiceTrack is then unusable)

EVENT_TIMEOUT = 10.0
OVERALL_TIMEOUT = 60.0
# WebRTC audio: 20 ms frames at 48 kHz.
RATE = 48_000
FRAME = 960
# A received frame louder than this (full scale = 1.0) counts as "audible" (-40 dBFS).
LOUD_RMS = 0.01
# The microphone's fundamental (VoiceTrack).
F0 = 140.0


def missing_packages(exc: ImportError, what: str) -> NoReturn:
    """Exit 2 for an environment problem, not a test failure: `what` says which packages
    ("aiortc is needed")."""
    print(
        f"error: {exc}\n"
        f"{what}: run ./scripts/test, or\n"
        "  pip install -r tests/python/requirements.txt",
        file=sys.stderr,
    )
    sys.exit(2)


# --- results ---------------------------------------------------------------------------------

class Abort(Exception):
    """A step cannot go on (the call is unusable or an awaited event never came)."""


FAILURES: list[str] = []
PASSES: list[str] = []
FIGURES: dict[str, Any] = {}


def check(cond: bool, what: str, detail: str = "") -> bool:
    if cond:
        PASSES.append(what)
    else:
        msg = what + (f": {detail}" if detail else "")
        FAILURES.append(msg)
        print(f"FAIL: {msg}", flush=True)
    return cond


def note(msg: str) -> None:
    print(f"  .. {msg}", flush=True)


def now() -> float:
    return time.monotonic()


def summary(t0: float) -> int:
    """Prints the figures and the check counts (`FAIL:` lines last); the exit code."""
    FIGURES["total_s"] = round(now() - t0, 1)
    print("== summary")
    for k, v in FIGURES.items():
        print(f"  {k}: {v}")
    print(f"  checks passed: {len(PASSES)}, failed: {len(FAILURES)}")
    for f in FAILURES:
        print(f"FAIL: {f}")
    return 1 if FAILURES else 0


# --- events ----------------------------------------------------------------------------------

def compact(e: dict[str, Any], limit: int = 400, *, long: int = 60, head: int = 24) -> str:
    """One line per event: strings over `long` characters cut to `head`, no event_id."""
    def short(v: Any) -> Any:
        if isinstance(v, str) and len(v) > long:
            return v[:head] + f"...({len(v)})"
        if isinstance(v, dict):
            return {k: short(x) for k, x in v.items() if k != "event_id"}
        if isinstance(v, list):
            return [short(x) for x in v]
        return v

    s = json.dumps(short(e), separators=(",", ":"))
    return s if len(s) <= limit else s[:limit] + "..."


def missing_in_order(types: list[str], expected: list[str]) -> list[str]:
    """The `expected` event types not found in `types` in that order (from the first gap on)."""
    it = iter(types)
    return [want for want in expected if not any(t == want for t in it)]


def in_order(types: list[str], expected: list[str]) -> tuple[bool, str]:
    missing = missing_in_order(types, expected)
    if missing:
        return False, f"missing {missing[0]!r} in order; got {types}"
    return True, ""


# --- the OpenAI SDK's event models -----------------------------------------------------------

def event_classes(union: Any) -> set[type]:
    """The classes in the SDK's `RealtimeServerEvent` (an annotated union)."""
    return set(typing.get_args(typing.get_args(union)[0]))


def revalidate(ev: Any, *, exclude_unset: bool = False) -> tuple[dict[str, Any], Exception | None]:
    """`ev` dumped as JSON (by alias) and the error, if any, of validating that dump strictly
    against its own class: the SDK parses leniently (`construct_type_unchecked`) and would not
    notice a missing or mistyped field."""
    import pydantic

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # serializer warnings; validation reports the problem
        dumped = ev.model_dump(mode="json", by_alias=True, exclude_unset=exclude_unset)
    try:
        type(ev).model_validate(dumped)
    except pydantic.ValidationError as e:
        return dumped, e
    return dumped, None


# --- aiortc: loopback ICE, the microphone, the offerer ---------------------------------------

def _loopback_only(use_ipv4: bool = True, use_ipv6: bool = True) -> list[str]:
    return ["127.0.0.1"]


def loopback_ice() -> None:
    """aioice skips 127.0.0.1 when it lists host addresses; the server only listens on loopback."""
    aioice.ice.get_host_addresses = _loopback_only


class VoiceTrack(MediaStreamTrack):
    """20 ms, 48 kHz mono s16 frames, paced in real time: silence, or synthetic voice (8
    harmonics of 140 Hz with 1/h amplitudes, 4 Hz syllable-rate amplitude modulation, about
    -18 dBFS) for as long as asked."""

    kind = "audio"

    def __init__(self) -> None:
        super().__init__()
        self._start: float | None = None
        self._pts = 0
        self._phase = 0.0
        self._am_t = 0
        self._left = 0
        self._done: asyncio.Future[float] | None = None
        self.frames_sent = 0
        # (due time, how late the frame was handed to aiortc) for every frame
        self.late: list[tuple[float, float]] = []
        # (wall time its first frame is due, ms of our stream at that point, length in s)
        self.speeches: list[tuple[float, float, float]] = []

    def speak(self, secs: float) -> asyncio.Future[float]:
        """Plays `secs` of voice from the next frame on; the future resolves with the
        (monotonic) time its last sample was due."""
        fut: asyncio.Future[float] = asyncio.get_running_loop().create_future()
        self._done = fut
        due = (self._start + self._pts / RATE) if self._start is not None else now()
        self.speeches.append((due, self._pts / RATE * 1000, secs))
        self._left = int(secs * RATE)
        self._am_t = 0
        return fut

    def _voice(self, n: int) -> array.array:
        out = array.array("h")
        step = 2 * math.pi * F0 / RATE
        ph = self._phase
        for i in range(n):
            ph += step
            t = (self._am_t + i) / RATE
            am = 0.75 + 0.25 * math.sin(2 * math.pi * 4.0 * t)
            s = (
                math.sin(ph) + math.sin(2 * ph) / 2 + math.sin(3 * ph) / 3 + math.sin(4 * ph) / 4
                + math.sin(5 * ph) / 5 + math.sin(6 * ph) / 6 + math.sin(7 * ph) / 7
                + math.sin(8 * ph) / 8
            )
            out.append(int(max(-1.0, min(1.0, 0.12 * am * s)) * 32767))
        self._phase = ph % (2 * math.pi)
        self._am_t += n
        return out

    async def recv(self) -> av.AudioFrame:
        if self.readyState != "live":
            raise MediaStreamError
        if self._start is None:
            self._start = now()
        else:
            wait = self._start + self._pts / RATE - now()
            if wait > 0:
                await asyncio.sleep(wait)
        due = self._start + self._pts / RATE
        self.late.append((due, now() - due))
        if self._left > 0:
            n = min(FRAME, self._left)
            pcm = self._voice(n)
            pcm.extend([0] * (FRAME - n))
            self._left -= n
            if self._left == 0 and self._done is not None and not self._done.done():
                self._done.set_result(due + n / RATE)
        else:
            pcm = array.array("h", bytes(2 * FRAME))
        if sys.byteorder != "little":
            pcm.byteswap()
        frame = av.AudioFrame(format="s16", layout="mono", samples=FRAME)
        data = pcm.tobytes()
        plane = frame.planes[0]
        plane.update(data + bytes(plane.buffer_size - len(data)))
        frame.pts = self._pts
        frame.sample_rate = RATE
        frame.time_base = fractions.Fraction(1, RATE)
        self._pts += FRAME
        self.frames_sent += 1
        return frame


class Peer:
    """aiortc as the offerer, laid out as Duet expects: `mic` on a sendrecv audio transceiver
    (the remote audio goes to `speaker.run(track)`), and the `oai-events` data channel, whose
    messages go to `on_message`. No ICE servers: with `loopback_ice()` the offer carries only
    127.0.0.1 host candidates. `verbose` notes connection states and remote tracks."""

    def __init__(self, mic: VoiceTrack, speaker: Any, on_message: Any, *, verbose: bool = False) -> None:
        self.pc = RTCPeerConnection(RTCConfiguration(iceServers=[]))
        self.mic = mic
        self.speaker = speaker
        self.on_message = on_message
        self.verbose = verbose
        self.connected = asyncio.Event()
        self.dc_open = asyncio.Event()
        self.states: list[tuple[float, str]] = []
        self.tasks: list[asyncio.Task[Any]] = []

    async def offer(self) -> str:
        """Sets up the media and the channel; the offer SDP (aiortc gathers all its candidates
        inside setLocalDescription)."""
        pc = self.pc

        @pc.on("connectionstatechange")
        def _state() -> None:
            self.states.append((now(), pc.connectionState))
            if self.verbose:
                note(f"connectionState {pc.connectionState}")
            if pc.connectionState == "connected":
                self.connected.set()

        @pc.on("track")
        def _track(track: MediaStreamTrack) -> None:
            if self.verbose:
                note(f"remote track: {track.kind}")
            if track.kind == "audio":
                self.tasks.append(asyncio.ensure_future(self.speaker.run(track)))

        pc.addTransceiver(self.mic, direction="sendrecv")
        self.dc = pc.createDataChannel("oai-events")
        self.dc.on("message", self.on_message)
        self.dc.on("open", self.dc_open.set)
        await pc.setLocalDescription(await pc.createOffer())
        return pc.localDescription.sdp

    async def answer(self, sdp: str) -> None:
        """Applies the answer and waits (10 s) for the connection."""
        await self.pc.setRemoteDescription(RTCSessionDescription(sdp=sdp, type="answer"))
        try:
            await asyncio.wait_for(self.connected.wait(), 10)
        except asyncio.TimeoutError:
            raise Abort(f"not connected within 10 s of the answer; states {self.states}") from None

    async def close(self) -> None:
        await self.pc.close()
        for t in self.tasks:
            t.cancel()
