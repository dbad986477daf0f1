"""The tests' own client of their local servers keeps no connection idle: the generated nights failed once under a
loaded `make test` with "Connection reset by peer" when a request went out on a connection the emulator was closing
after 5 s idle."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from tests.local_http import LOCAL_HTTP, local_client


class Answer(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keeps the connection open, as uvicorn does

    def do_GET(self) -> None:  # noqa: N802 - the standard library's name
        self.send_response(200)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"ok")

    def log_message(self, *args: object) -> None:
        pass


def test_no_connection_is_left_idle_for_a_server_to_close_under_a_request() -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Answer)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        with local_client(base_url=url) as client:
            for http, path in ((client, "/"), (LOCAL_HTTP, f"{url}/")):
                for _ in range(2):
                    assert http.get(path).text == "ok"
                    assert http._transport._pool.connections == [], "a connection was kept idle"
    finally:
        server.shutdown()
        server.server_close()
