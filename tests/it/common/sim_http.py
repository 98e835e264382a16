#!/usr/bin/python3
"""A web server of the simulated internet (tests/it/common/internet.rs), run in its network namespace.

Serves DOCROOT over HTTPS (with --cert and --key) or plain HTTP, appends "METHOD PATH STATUS" per request to
--log, and before each request reads --faults, lines of "PATH<TAB>FAULT" that the test rewrites at any time:
  hang         read the request and never answer
  truncate     headers with the full Content-Length, then half the body, then close
  trickle:N    headers with the full Content-Length, then the body a byte every N seconds (a mirror that drips)
  status:N     answer with status N (404 for a missing file)
Standard library only: Debian's python3.
"""

import argparse
import functools
import http.server
import os
import socketserver
import ssl
import threading
import urllib.parse

LOG_LOCK = threading.Lock()


def read_faults(path):
    try:
        with open(path, encoding="utf-8") as f:
            return dict(line.rstrip("\n").split("\t", 1) for line in f if "\t" in line)
    except FileNotFoundError:
        return {}


class Server(http.server.ThreadingHTTPServer):
    def server_bind(self):
        # Not HTTPServer's, whose socket.getfqdn asks a resolver about the address.
        socketserver.TCPServer.server_bind(self)
        self.server_name, self.server_port = self.server_address[:2]


class Handler(http.server.SimpleHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # An idle kept-alive connection gives its thread back after this long.
    timeout = 30

    def do_GET(self):
        self.serve(head=False)

    def do_HEAD(self):
        self.serve(head=True)

    def serve(self, head):
        path = urllib.parse.urlsplit(self.path).path
        fault = read_faults(self.server.faults).get(path, "")
        if fault == "hang":
            self.record("hang")
            # Never answers: the client's timeout is what a test sees. The server's process ends it.
            threading.Event().wait()
        elif fault == "truncate":
            self.truncated(head)
        elif fault.startswith("trickle:"):
            self.trickled(head, float(fault[len("trickle:"):]))
        elif fault.startswith("status:"):
            self.send_error(int(fault[len("status:"):]))
        elif head:
            super().do_HEAD()
        else:
            super().do_GET()

    def announced(self):
        """The file's bytes after headers announcing all of them (a 404 and None if there is none)."""
        local = self.translate_path(self.path)
        if not os.path.isfile(local):
            self.send_error(404)
            return None
        with open(local, "rb") as f:
            body = f.read()
        self.send_response(200)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True
        return body

    def truncated(self, head):
        body = self.announced()
        if body is not None and not head:
            self.wfile.write(body[: len(body) // 2])
            self.wfile.flush()

    def trickled(self, head, every):
        body = self.announced()
        if body is None or head:
            return
        # Each byte well inside any read timeout; the whole far beyond any deadline. The client's leaving
        # ends the thread.
        for i in range(len(body)):
            try:
                self.wfile.write(body[i : i + 1])
                self.wfile.flush()
            except OSError:
                return
            threading.Event().wait(every)

    def log_request(self, code="-", size="-"):
        self.record(int(code) if isinstance(code, int) else code)

    def record(self, status):
        with LOG_LOCK, open(self.server.log, "a", encoding="utf-8") as f:
            f.write(f"{self.command} {self.path} {status}\n")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--addr", required=True)
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--docroot", required=True)
    p.add_argument("--log", required=True)
    p.add_argument("--faults", required=True)
    p.add_argument("--cert")
    p.add_argument("--key")
    a = p.parse_args()
    handler = functools.partial(Handler, directory=a.docroot)
    httpd = Server((a.addr, a.port), handler)
    httpd.log, httpd.faults = a.log, a.faults
    if a.cert:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(a.cert, a.key)
        # The handshake happens in the request's thread: a client that never finishes it blocks no other.
        httpd.socket = ctx.wrap_socket(httpd.socket, server_side=True, do_handshake_on_connect=False)
    httpd.serve_forever()


if __name__ == "__main__":
    main()
