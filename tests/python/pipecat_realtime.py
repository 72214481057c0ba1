#!/usr/bin/env python3
"""Drives a Duet server with Pipecat's own `OpenAIRealtimeLLMService`, unchanged.

    python tests/python/pipecat_realtime.py --base-url http://127.0.0.1:PORT/v1

Pipecat (a voice-agent framework nobody here wrote) runs its Realtime service in a pipeline
of its own against Duet and checks the two protocol points it depends on:

- `retrieve_conversation_item` of an unknown id fails with the server's message: Pipecat
  routes only OpenAI's code `item_retrieve_invalid_item_id` back to the caller and treats
  any other error as fatal (it stops reading the socket: the session goes deaf). A
  retrieve of a real item afterwards still answers.
- Ending the pipeline closes the WebSocket with the closing handshake: Duet answers
  Pipecat's Close (1000) with its own, so Pipecat does not log `ConnectionClosedError:
  sent 1000 (OK); no close frame received`.

Exits 0 on success; 1 with a message on any failure; 2 if Pipecat is not installed.
"""

from __future__ import annotations

import argparse
import asyncio
import sys

from duet_testlib import EVENT_TIMEOUT, OVERALL_TIMEOUT, missing_packages

try:
    from loguru import logger
    from pipecat.frames.frames import EndFrame
    from pipecat.pipeline.pipeline import Pipeline
    from pipecat.pipeline.worker import PipelineWorker
    from pipecat.services.openai.realtime import events
    from pipecat.services.openai.realtime.llm import OpenAIRealtimeLLMService
    from pipecat.workers.runner import WorkerRunner
    import pipecat
except ImportError as exc:  # pragma: no cover - environment problem, not a test failure mode
    missing_packages(exc, "Pipecat (pipecat-ai[openai]) is needed")


class Failure(Exception):
    """A check failed."""


def check(cond: bool, msg: str) -> None:
    if not cond:
        raise Failure(msg)


async def until(cond, what: str, timeout: float = EVENT_TIMEOUT) -> None:
    async def poll():
        while not cond():
            await asyncio.sleep(0.02)

    try:
        await asyncio.wait_for(poll(), timeout)
    except asyncio.TimeoutError:
        raise Failure(f"timed out waiting for {what}") from None


async def run(ws_url: str) -> None:
    # Pipecat's log at ERROR and above is what its users see as failures.
    errors: list[str] = []
    logger.remove()
    logger.add(lambda m: errors.append(str(m)), level="ERROR")
    logger.add(sys.stderr, level="WARNING")

    llm = OpenAIRealtimeLLMService(
        api_key="unused",
        base_url=ws_url,
        settings=OpenAIRealtimeLLMService.Settings(model="echo"),
    )
    worker = PipelineWorker(Pipeline([llm]))
    runner = WorkerRunner(handle_sigint=False)
    await runner.add_workers(worker)
    running = asyncio.create_task(runner.run())
    try:
        await steps(llm, worker, running, errors)
    except Failure as e:
        print(f"FAIL: {e}", flush=True)
        # A pipeline stuck on a failure is cancelled, within a bound.
        try:
            await asyncio.wait_for(runner.cancel(), 5)
        except Exception:
            pass
        raise


async def steps(llm, worker, running, errors: list[str]) -> None:
    await until(lambda: llm._api_session_ready, "session.updated")
    ws = llm._websocket
    check(ws is not None, "no WebSocket")

    # An unknown item: the retrieve fails with OpenAI's message, and the session reads on.
    try:
        await asyncio.wait_for(llm.retrieve_conversation_item("item_gone"), EVENT_TIMEOUT)
        raise Failure("retrieving an unknown item succeeded")
    except asyncio.TimeoutError:
        raise Failure(
            "the retrieve of an unknown item never failed: Pipecat took the error as fatal "
            "and stopped reading"
        ) from None
    except Failure:
        raise
    except Exception as e:  # Pipecat fails the future with the server's message
        check("does not exist" in str(e), f"unexpected failure: {e!r}")
        print(f"unknown item: {e}")
    check(not errors, f"Pipecat logged errors: {errors}")

    await llm.send_client_event(
        events.ConversationItemCreateEvent(
            item=events.ConversationItem(
                id="item_here",
                type="message",
                role="user",
                content=[events.ItemContent(type="input_text", text="still here")],
            )
        )
    )
    item = await asyncio.wait_for(llm.retrieve_conversation_item("item_here"), EVENT_TIMEOUT)
    check(item.content[0].text == "still here", f"retrieved {item}")
    print("a real item is retrieved after the refusal")

    # The pipeline ends: Pipecat closes with 1000 and must get Duet's Close back.
    await worker.queue_frame(EndFrame())
    await asyncio.wait_for(running, OVERALL_TIMEOUT)
    sent, rcvd = ws.protocol.close_sent, ws.protocol.close_rcvd
    print(f"close sent {sent}, received {rcvd}")
    check(sent is not None and sent.code == 1000, f"Pipecat sent {sent}")
    check(rcvd is not None, "no close frame received from Duet")
    check(rcvd.code == 1000, f"Duet answered with {rcvd}")
    check(not errors, f"Pipecat logged errors: {errors}")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--base-url", required=True, help="http://HOST:PORT/v1")
    args = ap.parse_args()
    ws_url = args.base_url.replace("http://", "ws://", 1) + "/realtime"
    print(f"pipecat-ai {pipecat.__version__}")
    try:
        asyncio.run(asyncio.wait_for(run(ws_url), OVERALL_TIMEOUT))
    except Failure:
        return 1
    print("PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
