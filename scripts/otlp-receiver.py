#!/usr/bin/env python3
"""An OTLP/HTTP trace receiver for tests and benchmarks: decodes each
protobuf POST to /v1/traces with the opentelemetry-proto package and
appends one JSON line per span to a file, or only counts them.

    otlp-receiver.py --out spans.jsonl [--port 0]
    otlp-receiver.py [--port 4318]      # counts; prints "spans: N" when stopped

Prints "listening: PORT" once it accepts requests. Answers 200 with an
empty ExportTraceServiceResponse, 400 for a body that does not decode, 404
for another path and 415 for another content type.
"""
import argparse
import json
import signal
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from google.protobuf.message import DecodeError
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

KINDS = {0: "unspecified", 1: "internal", 2: "server", 3: "client", 4: "producer", 5: "consumer"}
STATUS = {0: "unset", 1: "ok", 2: "error"}


def any_value(value):
    which = value.WhichOneof("value")
    if which == "array_value":
        return [any_value(element) for element in value.array_value.values]
    if which == "kvlist_value":
        return {pair.key: any_value(pair.value) for pair in value.kvlist_value.values}
    if which == "bytes_value":
        return value.bytes_value.hex()
    return getattr(value, which) if which else None


def attributes(pairs):
    return {pair.key: any_value(pair.value) for pair in pairs}


def span_json(span, resource, scope):
    return {
        "trace_id": span.trace_id.hex(),
        "span_id": span.span_id.hex(),
        "parent_span_id": span.parent_span_id.hex(),
        "trace_state": span.trace_state,
        "flags": span.flags,
        "name": span.name,
        "kind": KINDS.get(span.kind, str(span.kind)),
        "start": span.start_time_unix_nano,
        "end": span.end_time_unix_nano,
        "attributes": attributes(span.attributes),
        "events": [{"name": e.name, "time": e.time_unix_nano, "attributes": attributes(e.attributes)} for e in span.events],
        "links": [
            {"trace_id": l.trace_id.hex(), "span_id": l.span_id.hex(), "trace_state": l.trace_state,
             "flags": l.flags, "attributes": attributes(l.attributes)}
            for l in span.links
        ],
        "status": {"code": STATUS.get(span.status.code, str(span.status.code)), "message": span.status.message},
        "resource": resource,
        "scope": scope,
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", help="the JSON lines file; without it spans are only counted")
    parser.add_argument("--port", type=int, default=0)
    arguments = parser.parse_args()
    lock = threading.Lock()
    received = [0]

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def answer(self, status, body=b"", content_type="application/x-protobuf"):
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_POST(self):
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length)
            if self.path != "/v1/traces":
                return self.answer(404, b"not found", "text/plain")
            if self.headers.get("Content-Type") != "application/x-protobuf":
                return self.answer(415, b"expected application/x-protobuf", "text/plain")
            request = ExportTraceServiceRequest()
            try:
                request.ParseFromString(body)
            except DecodeError as error:
                return self.answer(400, str(error).encode(), "text/plain")
            lines = []
            if arguments.out is None:
                with lock:
                    received[0] += sum(len(s.spans) for r in request.resource_spans for s in r.scope_spans)
                return self.answer(200, ExportTraceServiceResponse().SerializeToString())
            for resource_spans in request.resource_spans:
                resource = attributes(resource_spans.resource.attributes)
                for scope_spans in resource_spans.scope_spans:
                    scope = scope_spans.scope.name
                    lines += [json.dumps(span_json(span, resource, scope)) for span in scope_spans.spans]
            with lock, open(arguments.out, "a", encoding="utf-8") as out:
                out.writelines(line + "\n" for line in lines)
            self.answer(200, ExportTraceServiceResponse().SerializeToString())

        def log_message(self, format, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", arguments.port), Handler)
    # A parent may hand SIGTERM down ignored or blocked: stop on it anyway.
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM})
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    print(f"listening: {server.server_address[1]}", flush=True)
    try:
        server.serve_forever()
    except (KeyboardInterrupt, SystemExit):
        pass
    if arguments.out is None:
        print(f"spans: {received[0]}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
