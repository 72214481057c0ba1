#!/usr/bin/env python3
"""A phone call app on the official `openai` Python SDK, as written for OpenAI's SIP
connector: it receives `realtime.call.incoming` webhooks, checks each with
`client.webhooks.unwrap()` (the Standard Webhooks signature), and accepts the call with
`client.realtime.calls.accept(call_id, type="realtime", instructions=...)`, or rejects it
with `client.realtime.calls.reject(call_id, status_code=486)` when its From header names
`+15550000000`. Only the base URL differs from an app pointed at OpenAI.

    OPENAI_WEBHOOK_SECRET=whsec_... python tests/python/sip_app.py \\
        --base-url http://127.0.0.1:8000/v1 --port 8080 [--calls N]

It prints `listening PORT` when it is ready (port 0 picks a free one), then
`accepted rtc_...` or `rejected rtc_...` for each call, and exits 0 after `--calls`
decisions (1 on a failure, 2 if a package is missing). A tampered webhook is answered 400.
"""

from __future__ import annotations

import argparse
import http.server
import sys
import threading

from duet_testlib import missing_packages

try:
    import openai
except ImportError as e:
    missing_packages(e, "the openai SDK is needed")


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--base-url", required=True)
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--calls", type=int, default=1)
    args = parser.parse_args()
    # The webhook secret comes from OPENAI_WEBHOOK_SECRET, the API key from OPENAI_API_KEY.
    client = openai.OpenAI(base_url=args.base_url, api_key="unused-on-a-keyless-server")
    decided = threading.Semaphore(0)
    failures: list[str] = []

    def decide(event) -> None:
        call_id = event.data.call_id
        caller = next((h.value for h in event.data.sip_headers if h.name == "From"), "")
        try:
            if "+15550000000" in caller:
                client.realtime.calls.reject(call_id, status_code=486)
                print(f"rejected {call_id}", flush=True)
            else:
                client.realtime.calls.accept(
                    call_id,
                    type="realtime",
                    instructions="You answer the phone for Duet's tests.",
                )
                print(f"accepted {call_id}", flush=True)
        except openai.APIError as e:
            failures.append(f"{call_id}: {e}")
            print(f"FAIL: deciding {call_id}: {e}", flush=True)
        decided.release()

    class Webhook(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("content-length", "0")))
            try:
                event = client.webhooks.unwrap(body, dict(self.headers))
            except Exception as e:  # the SDK's InvalidWebhookSignatureError and kin
                print(f"refused webhook: {e!r}", flush=True)
                self.send_response(400)
                self.end_headers()
                return
            self.send_response(200)
            self.end_headers()
            if event.type == "realtime.call.incoming":
                threading.Thread(target=decide, args=(event,), daemon=True).start()

        def log_message(self, *_args) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", args.port), Webhook)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    print(f"listening {server.server_address[1]}", flush=True)
    for _ in range(args.calls):
        if not decided.acquire(timeout=60):
            print("FAIL: no call within 60 s", flush=True)
            return 1
    server.shutdown()
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
