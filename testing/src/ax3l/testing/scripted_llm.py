"""A scripted OpenAI-compatible model server for tests and benchmarks (speaks like llama-server).

It is a real HTTP server process: ``POST /v1/chat/completions`` answers from a JSON script, one
behaviour per request, and every request body is recorded so a test can assert the exact prompts
and tools that were sent.

    python -m ax3l.testing.scripted_llm --port N --script script.json --record requests.jsonl

Script file::

    {
      "replies": [behaviour, ...],   # consumed in order, one per request
      "then": behaviour              # once the replies run out (default: HTTP 500 after 30 s)
    }

Behaviours (every one may add ``"delay": seconds`` before answering)::

    {"tool_call": {"name": "submit_single_value", "arguments": {"value": 240}}}
    {"tool_call": {"name": "...", "arguments": "raw argument text, sent as is"}}
    {"tool_calls": [{"name": ..., "arguments": ...}, ...]}      several calls in one reply
    {"prose": "I think 240 would be nice."}                    no tool call at all
    {"status": 500, "body": "boom"}                            an HTTP error (body: text or JSON)
    {"cut": "I think... I think..."}                           a reply cut at the request's
                                                               max_tokens (finish_reason length)
    {"raw": "any text", "repeat": n}                           the text (n times, default once)
                                                               as the body of a 200 JSON reply
    {"raw_base64": "..."}                                      those bytes as that body
    {"random_call": {"hidden_size": [[64, 384, 16]], "epsilon_pair": [[0.85, 0.999], [0.9, 0.999]]}}
        calls the request's first tool; the entry is the key named after "assigned" in the tool
        description or the messages (else the first key mentioned); one [low, high] or
        [low, high, step] range per argument, in the tool's argument order; numbers without a
        step get 4 decimals.

``GET /requests`` returns the recorded requests as a JSON list; ``GET /health`` answers ok.
"""

from __future__ import annotations

import argparse
import base64
import json
import random
import re
import sys
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

# A script that has run out answers slowly: a test that stops after the turns it scripted must
# not see the next turn's conversation fail at once (an MCP child starts in milliseconds).
DEFAULT_THEN: dict[str, Any] = {
    "status": 500,
    "body": "scripted model: the script has run out",
    "delay": 30,
}


class Script:
    """The replies still to give, the requests seen so far, and the record file."""

    def __init__(self, document: dict[str, Any], record: Path | None, seed: int):
        self.replies: list[dict[str, Any]] = list(document.get("replies", []))
        self.then: dict[str, Any] = document.get("then", DEFAULT_THEN)
        self.record = record
        self.requests: list[dict[str, Any]] = []
        self.lock = threading.Lock()
        self.random = random.Random(seed)

    def next(self, body: Any) -> tuple[int, dict[str, Any]]:
        """Record a request and return its index and the behaviour to play."""
        with self.lock:
            index = len(self.requests)
            behaviour = self.replies.pop(0) if self.replies else self.then
            entry = {"index": index, "received_at": time.time(), "body": body}
            self.requests.append(entry)
            if self.record is not None:
                with self.record.open("a", encoding="utf-8") as handle:
                    handle.write(json.dumps(entry) + "\n")
            return index, behaviour


def tool_call(name: str, arguments: Any, call_id: str | None = None) -> dict[str, Any]:
    """One OpenAI-style tool call; ``arguments`` as given if text, else as JSON."""
    text = arguments if isinstance(arguments, str) else json.dumps(arguments)
    return {
        "id": call_id or f"call_{uuid.uuid4().hex[:12]}",
        "type": "function",
        "function": {"name": name, "arguments": text},
    }


def completion(
    message: dict[str, Any],
    finish_reason: str,
    *,
    completion_id: str | None = None,
    model: str = "scripted",
    usage: dict[str, Any] | None = None,
    timings: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A chat completion as llama-server sends it (with its ``timings``)."""
    return {
        "id": completion_id or f"chatcmpl-{uuid.uuid4().hex[:16]}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": finish_reason}],
        "usage": usage or {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120},
        "timings": timings
        or {
            "prompt_n": 100,
            "prompt_ms": 1.0,
            "predicted_n": 20,
            "predicted_ms": 1.0,
            "predicted_per_second": 20000.0,
        },
    }


def _random_value(rng: random.Random, spec: list[float]) -> int | float:
    low, high = spec[0], spec[1]
    if len(spec) > 2:
        step = spec[2]
        count = round((high - low) / step)
        value = low + step * rng.randint(0, count)
        return int(value) if float(value).is_integer() else round(value, 10)
    return round(rng.uniform(low, high), 4)


ASSIGNED = re.compile(r"assigned\s+(?:parameter:\s*|pair:\s*)?([A-Za-z_]+)", re.IGNORECASE)


def _assigned_entry(spec: dict[str, Any], text: str) -> str | None:
    """The entry the request is about: named after "assigned", else the first one mentioned."""
    for match in ASSIGNED.finditer(text):
        if match.group(1) in spec:
            return match.group(1)
    for name in spec:
        if re.search(rf"\b{re.escape(name)}\b", text):
            return name
    return None


def random_call_ranges(schema_document: dict[str, Any] | None = None) -> dict[str, Any]:
    """The ``random_call`` spec of every round-robin entry, from the schema's own ranges:
    ``[low, high, step]`` for a stepped leaf, ``[low, high]`` for a continuous one."""
    from ax3l.shared.config_schema import ConfigSchema, load_schema
    from ax3l.shared.registry import ENTRIES

    schema = load_schema() if schema_document is None else ConfigSchema(schema_document)
    spec: dict[str, Any] = {}
    for entry in ENTRIES:
        ranges = []
        for path in entry.paths:
            leaf = schema.by_path[path]
            low, high = leaf.minimum, leaf.maximum
            step = leaf.multiple_of or (1 if leaf.type == "integer" else None)
            if "const" in leaf.schema:
                low = high = leaf.const
            ranges.append([low, high] if step is None else [low, high, step])
        spec[entry.name] = ranges
    return spec


def _random_call(rng: random.Random, spec: dict[str, Any], body: dict[str, Any]) -> dict[str, Any]:
    tools = body.get("tools") or []
    if not tools:
        raise ValueError("random_call needs a request with tools")
    function = tools[0]["function"]
    description = str(function.get("description", ""))
    messages_text = "\n".join(str(m.get("content") or "") for m in body.get("messages", []))
    chosen = _assigned_entry(spec, description + "\n" + messages_text)
    if chosen is None:
        raise ValueError(f"random_call: none of {list(spec)} appears in the request")
    fields = list(function.get("parameters", {}).get("properties", {}))
    ranges = spec[chosen]
    arguments = {field: _random_value(rng, ranges[i]) for i, field in enumerate(fields)}
    return tool_call(function["name"], arguments)


def build_reply(script: Script, behaviour: dict[str, Any], body: Any) -> tuple[int, Any]:
    """The HTTP status and JSON (or text, or bytes: sent as they are) body for one behaviour."""
    if "raw" in behaviour:
        return 200, str(behaviour["raw"]).encode("utf-8") * int(behaviour.get("repeat", 1))
    if "raw_base64" in behaviour:
        return 200, base64.b64decode(behaviour["raw_base64"])
    if "status" in behaviour:
        return int(behaviour["status"]), behaviour.get("body", "error")
    if "prose" in behaviour:
        message = {"role": "assistant", "content": behaviour["prose"]}
        if "reasoning_content" in behaviour:
            message["reasoning_content"] = behaviour["reasoning_content"]
        return 200, completion(message, "stop")
    if "cut" in behaviour:
        message = {"role": "assistant", "content": behaviour["cut"], "reasoning_content": ""}
        cap = int(body.get("max_tokens") or 0) if isinstance(body, dict) else 0
        usage = {"prompt_tokens": 100, "completion_tokens": cap, "total_tokens": 100 + cap}
        return 200, completion(message, "length", usage=usage)
    calls: list[dict[str, Any]]
    if "tool_call" in behaviour:
        call = behaviour["tool_call"]
        calls = [tool_call(call["name"], call.get("arguments", {}))]
    elif "tool_calls" in behaviour:
        calls = [tool_call(c["name"], c.get("arguments", {})) for c in behaviour["tool_calls"]]
    elif "random_call" in behaviour:
        with script.lock:
            calls = [_random_call(script.random, behaviour["random_call"], body)]
    else:
        return 500, f"scripted model: unknown behaviour {sorted(behaviour)}"
    message = {
        "role": "assistant",
        "content": behaviour.get("content", ""),
        "reasoning_content": behaviour.get("reasoning_content", "Thinking about it."),
        "tool_calls": calls,
    }
    return 200, completion(message, "tool_calls")


def make_handler(script: Script) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        # Headers and body go out as two writes; with Nagle's algorithm the body waits for the
        # client's delayed ACK (about 40 ms a reply): an "instant" model would not be instant.
        disable_nagle_algorithm = True

        def log_message(self, format: str, *args: Any) -> None:
            pass  # requests are recorded; access lines would only clutter test output

        def _send(self, status: int, payload: Any) -> None:
            if isinstance(payload, (dict, list)):
                data = json.dumps(payload).encode("utf-8")
                kind = "application/json"
            elif isinstance(payload, bytes):  # a raw reply: whatever a hostile server sends
                data, kind = payload, "application/json"
            else:
                data = str(payload).encode("utf-8")
                kind = "text/plain; charset=utf-8"
            try:
                self.send_response(status)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up (a timeout test): nothing left to answer

        def do_GET(self) -> None:
            if self.path == "/health":
                self._send(200, {"status": "ok"})
            elif self.path == "/requests":
                with script.lock:
                    self._send(200, list(script.requests))
            elif self.path == "/v1/models":
                self._send(200, {"object": "list", "data": [{"id": "scripted"}]})
            else:
                self._send(404, {"error": "not found"})

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length)
            if self.path != "/v1/chat/completions":
                self._send(404, {"error": "not found"})
                return
            try:
                body = json.loads(raw)
            except json.JSONDecodeError:
                self._send(400, {"error": "body is not JSON"})
                return
            _, behaviour = script.next(body)
            delay = float(behaviour.get("delay", 0))
            if delay > 0:
                time.sleep(delay)
            try:
                status, payload = build_reply(script, behaviour, body)
            except (KeyError, ValueError, TypeError, IndexError) as exc:
                status, payload = 500, f"scripted model: {exc}"
            self._send(status, payload)

    return Handler


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--script", type=Path, required=True, help="the JSON script file")
    parser.add_argument("--record", type=Path, help="append every request here (JSON lines)")
    parser.add_argument("--seed", type=int, default=1, help="seed of random_call")
    args = parser.parse_args(argv)
    try:
        document = json.loads(args.script.read_text("utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        print(f"scripted_llm: cannot read script {args.script}: {exc}", file=sys.stderr)
        return 2
    script = Script(document, args.record, args.seed)
    server = ThreadingHTTPServer((args.host, args.port), make_handler(script))
    server.daemon_threads = True
    print(f"scripted_llm: listening on http://{args.host}:{args.port}", file=sys.stderr, flush=True)
    try:
        server.serve_forever(poll_interval=0.1)
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
