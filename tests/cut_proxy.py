"""A TCP proxy on loopback that can cut the line: in front of the moto S3 server, it forwards every byte until it has
seen `cut_after` uploads (requests that start with PUT), then closes every connection and refuses new ones, as a
network that drops mid-upload does. Used by the export tests and bench/faults.py."""

from __future__ import annotations

import socket
import threading


class CutProxy:
    def __init__(self, upstream_port: int, *, cut_after: int | None = None):
        self.upstream_port = upstream_port
        self.cut_after = cut_after
        self.puts = 0
        self.cut = threading.Event()
        self.lock = threading.Lock()
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
                target.sendall(data)
        except OSError:
            pass
        finally:
            for sock in (source, target):
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def cut_now(self) -> None:
        """Drop every connection and refuse new ones."""
        self.cut.set()
        for sock in self.sockets:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            sock.close()

    def close(self) -> None:
        self.cut_now()
        self.listener.close()
