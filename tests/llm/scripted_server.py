"""A chat-completions endpoint on the loopback interface that answers from a script.

Each POST /v1/chat/completions takes the next scripted reply: a completion
(200), an HTTP error (429, 5xx, 401, with optional headers), or a reply held
back `delay` seconds (past the client's timeout). The request bodies are
kept for the tests to read. The server stops when its `with` block ends,
or after `lifetime` seconds whatever happens.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@dataclass(frozen=True)
class Scripted:
    content: str = ""
    status: int = 200
    delay: float = 0.0
    headers: tuple[tuple[str, str], ...] = ()


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False


class ScriptedServer:
    def __init__(self, script: list[Scripted], lifetime: float = 120.0):
        self.script = list(script)
        self.requests: list[dict] = []
        self.lifetime = lifetime
        self._lock = threading.Lock()
        self._server = _Server(("127.0.0.1", 0), self._handler())
        self.base_url = f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def __enter__(self) -> ScriptedServer:
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        self._timer = threading.Timer(self.lifetime, self._server.shutdown)
        self._timer.daemon = True
        self._timer.start()
        return self

    def __exit__(self, *exc) -> None:
        self._timer.cancel()
        self._server.shutdown()
        self._server.server_close()

    def _next(self, body: dict) -> Scripted | None:
        with self._lock:
            self.requests.append(body)
            return self.script.pop(0) if self.script else None

    def _handler(self):
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:
                pass

            def do_POST(self) -> None:
                if self.path != "/v1/chat/completions":
                    self._send(404, {"error": {"message": f"no route {self.path}"}})
                    return
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                reply = server._next(body)
                if reply is None:
                    self._send(400, {"error": {"message": "the script is exhausted"}})
                    return
                time.sleep(reply.delay)
                if reply.status != 200:
                    self._send(reply.status, {"error": {"message": f"scripted {reply.status}"}}, reply.headers)
                    return
                prompt = sum(len(m["content"]) for m in body["messages"]) // 4
                completion = len(reply.content) // 4
                self._send(200, {
                    "id": f"chatcmpl-{len(server.requests)}",
                    "object": "chat.completion",
                    "created": 0,
                    "model": body["model"],
                    "choices": [{
                        "index": 0,
                        "message": {"role": "assistant", "content": reply.content},
                        "finish_reason": "stop",
                    }],
                    "usage": {
                        "prompt_tokens": prompt,
                        "completion_tokens": completion,
                        "total_tokens": prompt + completion,
                    },
                })

            def _send(self, status: int, payload: dict, headers=()) -> None:
                data = json.dumps(payload).encode()
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    for name, value in headers:
                        self.send_header(name, value)
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up waiting (a scripted timeout)

        return Handler
