"""A header flood from its own process (so the test's measuring thread does not share a GIL
with it): `python header_flood.py PORT SIZE SECONDS [CLIENTS]`. Each of CLIENTS threads (8)
opens a connection, sends `GET /v1/devices` with an `Authorization` header SIZE bytes long
(no valid token) in 64 KB writes, reads the answer's status line, and does it again until
SECONDS have passed; prints a JSON object of status lines and how often each came back."""

from __future__ import annotations

import contextlib
import json
import socket
import sys
import threading
import time
from collections import Counter


def flood(port: int, size: int, until: float, seen: Counter[str], lock: threading.Lock) -> None:
    chunk = b"a" * 65536
    while time.monotonic() < until:
        sock = socket.create_connection(("127.0.0.1", port), timeout=30)
        got = b""
        try:
            sock.sendall(b"GET /v1/devices HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ")
            with contextlib.suppress(OSError):  # the API closes it once the head is too big
                for _ in range(size // len(chunk)):
                    sock.sendall(chunk)
            with contextlib.suppress(OSError):
                while b"\r\n" not in got and (data := sock.recv(4096)):
                    got += data
        finally:
            sock.close()
        with lock:
            seen[got.split(b"\r\n", 1)[0].decode()] += 1


def main() -> None:
    port, size, seconds = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
    clients = int(sys.argv[4]) if len(sys.argv) > 4 else 8
    seen: Counter[str] = Counter()
    lock = threading.Lock()
    until = time.monotonic() + seconds
    threads = [
        threading.Thread(target=flood, args=(port, size, until, seen, lock)) for _ in range(clients)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    print(json.dumps(dict(seen)))  # noqa: T201 - the result, for the test


if __name__ == "__main__":
    main()
