#!/usr/bin/env python3
"""A webhook receiver for tests: checks each POST's Standard Webhooks
signature with Python's own hmac, and appends one JSON line per request to
a file.

    webhook-receiver.py --secret whsec_... --out requests.jsonl
        [--fail-first N] [--fail-status 503] [--retry-after S] [--hang]
        [--tls-cert cert.pem --tls-key key.pem]

Prints "listening: PORT" once it accepts requests. Answers 204, except the
first N requests of each webhook-id (--fail-status, with Retry-After when
given); with --hang it reads the request, records it and never answers.
Each line: id, timestamp, signature_valid, content_type, body, answered.
"""
import argparse
import base64
import hashlib
import hmac
import json
import signal
import ssl
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--secret", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--fail-first", type=int, default=0)
    parser.add_argument("--fail-status", type=int, default=503)
    parser.add_argument("--retry-after")
    parser.add_argument("--hang", action="store_true")
    parser.add_argument("--tls-cert")
    parser.add_argument("--tls-key")
    arguments = parser.parse_args()

    key = base64.b64decode(arguments.secret[len("whsec_"):])
    lock = threading.Lock()
    seen = {}
    forever = threading.Event()
    out = open(arguments.out, "a", buffering=1)

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):
            pass

        def do_POST(self):
            length = int(self.headers.get("content-length", "0"))
            body = self.rfile.read(length)
            message_id = self.headers.get("webhook-id", "")
            timestamp = self.headers.get("webhook-timestamp", "")
            signed = f"{message_id}.{timestamp}.".encode() + body
            expected = base64.b64encode(hmac.new(key, signed, hashlib.sha256).digest()).decode()
            signatures = [part.split(",", 1)[1] for part in self.headers.get("webhook-signature", "").split(" ") if part.startswith("v1,")]
            valid = any(hmac.compare_digest(expected, signature) for signature in signatures)
            fresh = timestamp.isdigit() and abs(time.time() - int(timestamp)) < 300
            with lock:
                count = seen.get(message_id, 0) + 1
                seen[message_id] = count
            status = None if arguments.hang else (arguments.fail_status if count <= arguments.fail_first else 204)
            record = {
                "id": message_id, "timestamp": timestamp, "signature_valid": valid and fresh,
                "content_type": self.headers.get("content-type", ""), "body": body.decode("utf-8", "replace"),
                "answered": status,
            }
            with lock:
                out.write(json.dumps(record) + "\n")
            if status is None:
                forever.wait()
                return
            self.send_response(status)
            if status != 204 and arguments.retry_after is not None:
                self.send_header("Retry-After", arguments.retry_after)
            self.send_header("Content-Length", "0")
            self.end_headers()

    server = ThreadingHTTPServer(("127.0.0.1", arguments.port), Handler)
    server.daemon_threads = True
    if arguments.tls_cert:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(arguments.tls_cert, arguments.tls_key)
        server.socket = context.wrap_socket(server.socket, server_side=True)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    print(f"listening: {server.server_address[1]}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
