"""A TCP proxy on loopback in front of the moto S3 server, for the tests and bench/faults.py: it forwards every byte,
or drips them (`drip`: so many bytes, then a pause, each way: a slow S3), until the line is cut (`cut_now`, or after
`cut_after` uploads, requests that start with PUT: a network that drops mid-upload), after which it closes every
connection and refuses new ones until `restore` (the network is back)."""

from __future__ import annotations

import socket
import threading
import time


class CutProxy:
    def __init__(self, upstream_port: int, *, cut_after: int | None = None, drip: tuple[int, float] | None = None):
        self.upstream_port = upstream_port
        self.cut_after = cut_after
        self.drip = drip
        self.puts = 0
        self.cut = threading.Event()
        self.lock = threading.RLock()  # cut_now runs under it when the cut comes with an upload
        self.sockets: list[socket.socket] = []
        self.listener = socket.socket()
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(64)
        self.port = self.listener.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        threading.Thread(target=self._accept, daemon=True, name="cut-proxy").start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return  # closed
            if self.cut.is_set():
                client.close()  # the line is down: refused at once
                continue
            upstream = socket.create_connection(("127.0.0.1", self.upstream_port))
            with self.lock:
                self.sockets += [client, upstream]
            threading.Thread(target=self._pipe, args=(client, upstream, True), daemon=True).start()
            threading.Thread(target=self._pipe, args=(upstream, client, False), daemon=True).start()

    def _pipe(self, source: socket.socket, target: socket.socket, from_client: bool) -> None:
        try:
            while not self.cut.is_set():
                data = source.recv(65536)
                if not data:
                    break
                if from_client and data.startswith(b"PUT "):
                    with self.lock:
                        self.puts += 1
                        if self.cut_after is not None and self.puts > self.cut_after:
                            self.cut_now()
                            return  # this upload never reaches the server
                self._send(target, data)
        except OSError:
            pass
        finally:
            for sock in (source, target):
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def _send(self, target: socket.socket, data: bytes) -> None:
        if self.drip is None:
            target.sendall(data)
            return
        size, pause = self.drip
        for start in range(0, len(data), size):
            if self.cut.is_set():
                return
            target.sendall(data[start : start + size])
            time.sleep(pause)

    def cut_now(self) -> None:
        """Drop every connection and refuse new ones."""
        self.cut.set()
        with self.lock:
            sockets, self.sockets = self.sockets, []
        for sock in sockets:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            sock.close()

    def restore(self) -> None:
        """The line is back: new connections go through again."""
        self.cut.clear()

    def close(self) -> None:
        self.cut_now()
        self.listener.close()
