"""A TCP relay to the GCS emulator that can hold an upload half-way: shared by tests/live/model_repo/test_sync.py
and tests/live/sandbox/test_faults.py. A plain module, not a pytest plugin: importing it from a test module does not
stop pytest rewriting the asserts of a plugin (as importing tests.support.gcs_fixtures first would)."""

from __future__ import annotations

import contextlib
import socket
import threading


class PausingProxy:
    """A TCP relay to the emulator that stops passing the client's bytes on after `budget` bytes, until resumed.

    The sync then blocks half-way through its upload however late a test gets to send Ctrl-C or a kill (reacting to a
    progress line instead lost the race on a loaded CI machine: the sync had finished, exit 0)."""

    def __init__(self, upstream: str, budget: int) -> None:
        host, port = upstream.removeprefix("http://").rsplit(":", 1)
        self.upstream, self.budget, self.sent = (host, int(port)), budget, 0
        self.resumed = threading.Event()
        self._lock = threading.Lock()
        self._server = socket.create_server(("127.0.0.1", 0))
        self.endpoint = f"http://127.0.0.1:{self._server.getsockname()[1]}"
        threading.Thread(target=self._accept, daemon=True).start()

    def paused(self) -> bool:
        with self._lock:
            return self.sent > self.budget and not self.resumed.is_set()

    def close(self) -> None:
        self.resumed.set()
        self._server.close()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._server.accept()
            except OSError:
                return
            upstream = socket.create_connection(self.upstream)
            threading.Thread(target=self._relay, args=(client, upstream, True), daemon=True).start()
            threading.Thread(target=self._relay, args=(upstream, client, False), daemon=True).start()

    def _relay(self, source: socket.socket, target: socket.socket, counted: bool) -> None:
        try:
            while data := source.recv(1 << 16):
                if counted:
                    with self._lock:
                        self.sent += len(data)
                        over = self.sent > self.budget
                    if over:
                        self.resumed.wait()
                target.sendall(data)
        except OSError:
            pass
        finally:
            for end in (source, target):
                with contextlib.suppress(OSError):
                    end.shutdown(socket.SHUT_RDWR)
