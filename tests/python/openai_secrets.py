#!/usr/bin/env python3
"""Ephemeral client secrets with the official `openai` Python SDK against Duet.

    DUET_TEST_API_KEY=test-key python tests/python/openai_secrets.py --base-url http://127.0.0.1:PORT/v1

What a backend and its user's app do: the backend, holding the server key, mints a secret
with `client.realtime.client_secrets.create(expires_after=..., session=...)`; the app opens a
realtime session with the `ek_...` value as its API key, and gets the secret's session as
its starting configuration. Also: a secret cannot mint secrets (401, `AuthenticationError`),
an out-of-range lifetime is a 400 naming `expires_after.seconds`, and an unknown secret cannot
open a session. Exits 0 when every check passed, 1 with `FAIL:` lines otherwise, 2 if a
package is missing. Traffic stays on 127.0.0.1.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time

from duet_testlib import check, missing_packages, summary

try:
    import openai
    from openai import AsyncOpenAI
except ImportError as e:
    missing_packages(e, "the openai SDK is needed")

KEY = os.environ.get("DUET_TEST_API_KEY", "test-key")
INSTRUCTIONS = "You were configured by a client secret."


async def until(conn, kind: str):
    while True:
        ev = await asyncio.wait_for(conn.recv(), 10)
        if ev.type == kind:
            return ev


async def run(base_url: str) -> None:
    backend = AsyncOpenAI(api_key=KEY, base_url=base_url)
    minted_at = time.time()
    secret = await backend.realtime.client_secrets.create(
        expires_after={"anchor": "created_at", "seconds": 600},
        session={"type": "realtime", "instructions": INSTRUCTIONS},
    )
    check(secret.value.startswith("ek_"), "the secret is an ek_ key", secret.value[:6])
    check(abs(secret.expires_at - (minted_at + 600)) < 5, "expires_at is 600 s out", str(secret.expires_at))
    check(secret.session.type == "realtime", "the response's session is a realtime session")
    check(getattr(secret.session, "instructions", None) == INSTRUCTIONS, "the response echoes the session")
    check(bool(getattr(secret.session, "id", None)), "the response's session has an id")

    app = AsyncOpenAI(api_key=secret.value, base_url=base_url)
    async with app.realtime.connect(model="echo") as conn:
        created = await until(conn, "session.created")
        check(created.session.instructions == INSTRUCTIONS, "the session starts from the secret's", created.session.instructions)
        await conn.conversation.item.create(
            item={"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hello"}]}
        )
        await conn.response.create()
        done = await until(conn, "response.done")
        check(done.response.status == "completed", "a turn with the secret completes", str(done.response.status))

    try:
        await app.realtime.client_secrets.create()
        check(False, "a secret cannot mint secrets")
    except openai.AuthenticationError as e:
        check(e.status_code == 401, "a secret minting gets 401", str(e.status_code))

    try:
        await backend.realtime.client_secrets.create(expires_after={"anchor": "created_at", "seconds": 5})
        check(False, "5 s is refused")
    except openai.BadRequestError as e:
        body = e.body if isinstance(e.body, dict) else {}
        check(body.get("param") == "expires_after.seconds", "a 5 s lifetime is a 400 naming expires_after.seconds", str(e.body))

    stranger = AsyncOpenAI(api_key="ek_not_a_secret_anyone_minted", base_url=base_url)
    try:
        async with stranger.realtime.connect(model="echo") as conn:
            await asyncio.wait_for(conn.recv(), 5)
        check(False, "an unknown secret opens no session")
    except Exception as e:  # the handshake is refused with 401
        check("401" in str(e), "an unknown secret is refused with 401", str(e)[:200])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--base-url", required=True, help="http://127.0.0.1:PORT/v1")
    args = ap.parse_args()
    t0 = time.monotonic()
    asyncio.run(asyncio.wait_for(run(args.base_url), 60))
    return summary(t0)


if __name__ == "__main__":
    sys.exit(main())
