"""Loopback-only network namespaces for local servers, and TCP forwarding into them from the host.

    with NetworkNamespace() as ns:
        server = subprocess.Popen(ns.wrap(command))   # nsenter: the server's pid is the command's
        host_port = ns.forward(8000)                   # 127.0.0.1:host_port here -> 127.0.0.1:8000 inside

Nothing a process in the namespace does (GCS credential or metadata lookups...) can leave the machine,
and its ports never collide with the host's or another namespace's. Needs permission for `unshare -n`
(root or CAP_SYS_ADMIN; see isolation_available()).
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import os
import shutil
import socket
import subprocess
import sys
import threading
from collections.abc import Sequence
from pathlib import Path

from triton_gke.sandbox.processes import interrupts_held, wait_or_kill

# setns(2) flag for a network namespace (https://man7.org/linux/man-pages/man2/setns.2.html).
CLONE_NEWNET = 0x40000000
# The holder process: brings `lo` up (SIOCGIFFLAGS 0x8913 / SIOCSIFFLAGS 0x8914, IFF_UP 1,
# https://man7.org/linux/man-pages/man7/netdevice.7.html), says ready, and lives until stdin closes.
_LO_UP = """
import fcntl, socket, struct, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
flags = struct.unpack("16sH22x", fcntl.ioctl(s, 0x8913, struct.pack("16sH22x", b"lo", 0)))[1]
fcntl.ioctl(s, 0x8914, struct.pack("16sH22x", b"lo", flags | 1))
print("ready", flush=True)
sys.stdin.read()
"""


def _setns(path: str) -> None:
    """Move the calling thread (or a forked child before exec) into a network namespace."""
    libc = ctypes.CDLL(None, use_errno=True)
    fd = os.open(path, os.O_RDONLY)
    try:
        if libc.setns(fd, CLONE_NEWNET) != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"setns({path}): {os.strerror(err)}")
    finally:
        os.close(fd)


@functools.cache
def isolation_available() -> bool:
    """True where this process may create and enter network namespaces (root or CAP_SYS_ADMIN)."""
    if not (shutil.which("unshare") and shutil.which("nsenter") and Path("/proc/self/ns/net").exists()):
        return False
    try:
        with NetworkNamespace() as ns:
            thread_ok: list[bool] = []
            t = threading.Thread(target=lambda: thread_ok.append(_try_setns(ns.path)))
            t.start()
            t.join()
            return bool(thread_ok and thread_ok[0])
    except (OSError, RuntimeError, subprocess.SubprocessError):
        return False


def _try_setns(path: str) -> bool:
    try:
        _setns(path)
        return True
    except OSError:
        return False


class NetworkNamespace:
    """A loopback-only network namespace held open by a small helper process.

    Start processes inside it with `ns.wrap(cmd)` (nsenter); reach their ports from the
    host with `ns.forward(port)`. Closing it ends the helper and the forwarders.
    """

    def __init__(self) -> None:
        self._holder: subprocess.Popen[str] | None = None
        self._forwarders: list[_Forwarder | _Inbound] = []

    def __enter__(self) -> NetworkNamespace:
        return self.open()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def open(self) -> NetworkNamespace:
        cmd = ["unshare", "-n", "--", sys.executable, "-c", _LO_UP]
        with interrupts_held():  # a signal during the start: raised once _holder is set
            self._holder = subprocess.Popen(
                cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
            )
        line = self._holder.stdout.readline() if self._holder.stdout else ""
        if line.strip() != "ready":
            err = self._holder.stderr.read() if self._holder.stderr else ""
            self.close()
            raise RuntimeError(f"cannot create a network namespace: {err.strip() or 'unshare -n failed'}")
        return self

    @property
    def path(self) -> str:
        if self._holder is None:
            raise RuntimeError("network namespace is not open")
        return f"/proc/{self._holder.pid}/ns/net"

    def wrap(self, cmd: Sequence[str]) -> list[str]:
        """The command, run inside this namespace (nsenter execs it: same pid)."""
        return ["nsenter", f"--net={self.path}", "--", *cmd]

    def forward(self, port: int) -> int:
        """Forward a new host port on 127.0.0.1 to `port` inside the namespace; return it."""
        forwarder = _Forwarder(self.path, port)
        self._forwarders.append(forwarder)
        return forwarder.host_port

    def reach(self, port: int) -> None:
        """Let processes inside reach the host's 127.0.0.1:port at their own 127.0.0.1:port (that port only)."""
        self._forwarders.append(_Inbound(self.path, port))

    def close(self) -> None:
        for forwarder in self._forwarders:
            forwarder.close()
        self._forwarders.clear()
        if self._holder is not None:
            with contextlib.suppress(OSError):
                self._holder.stdin.close()  # the helper exits when stdin closes
            wait_or_kill(self._holder, 5)
            for stream in (self._holder.stdout, self._holder.stderr):
                if stream:
                    stream.close()
            self._holder = None


class NamedNamespace(NetworkNamespace):
    """A loopback-only namespace with a name, /var/run/netns/NAME (ip-netns(8)), so that other programs can name
    it: haproxy's `namespace` server keyword opens its connections there (sandbox/balancer.py). It lives until
    close() deletes it, not as long as a process does; its name carries the creating process's id so a later run
    can delete what a killed one left (delete_stale)."""

    PREFIX = "triton-gke-"

    def __init__(self, tag: str) -> None:
        super().__init__()
        self.name = f"{self.PREFIX}{os.getpid()}-{tag}"
        self._created = False

    def open(self) -> NamedNamespace:
        _ip("netns", "add", self.name)
        self._created = True
        try:
            _ip("-n", self.name, "link", "set", "lo", "up")
        except RuntimeError:
            self.close()
            raise
        return self

    @property
    def path(self) -> str:
        return f"/var/run/netns/{self.name}"

    def close(self) -> None:
        super().close()
        if self._created:
            with contextlib.suppress(RuntimeError):
                _ip("netns", "delete", self.name)
            self._created = False

    @classmethod
    def delete_stale(cls) -> list[str]:
        """Delete the named namespaces of runs whose process is gone; their names."""
        folder = Path("/var/run/netns")
        stale = []
        for entry in sorted(folder.glob(f"{cls.PREFIX}*")) if folder.is_dir() else []:
            pid = entry.name.removeprefix(cls.PREFIX).split("-", 1)[0]
            if pid.isdigit() and not Path(f"/proc/{pid}").exists():
                with contextlib.suppress(RuntimeError):
                    _ip("netns", "delete", entry.name)
                    stale.append(entry.name)
        return stale


def _ip(*args: str) -> None:
    done = subprocess.run(["ip", *args], capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"ip {' '.join(args)}: {' '.join(done.stderr.split()) or f'exit code {done.returncode}'}")


class _Relay:
    """A TCP relay: each connection accepted on `_listener` is piped to the upstream `_upstream()` opens."""

    _listener: socket.socket

    def _start(self, name: str) -> None:
        self._closed = False
        threading.Thread(target=self._accept_loop, daemon=True, name=name).start()

    def _upstream(self) -> socket.socket:
        raise NotImplementedError

    def _accept_loop(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(client,), daemon=True).start()

    def _serve(self, client: socket.socket) -> None:
        try:
            upstream = self._upstream()
            upstream.settimeout(None)
        except OSError:
            client.close()
            return
        threading.Thread(target=_pump, args=(client, upstream), daemon=True).start()
        _pump(upstream, client)

    def close(self) -> None:
        self._closed = True
        with contextlib.suppress(OSError):
            self._listener.shutdown(socket.SHUT_RDWR)
        self._listener.close()


class _Forwarder(_Relay):
    """TCP relay: 127.0.0.1:host_port on the host -> 127.0.0.1:port inside a namespace."""

    def __init__(self, ns_path: str, port: int) -> None:
        self._ns_path, self._port = ns_path, port
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.host_port: int = self._listener.getsockname()[1]
        self._start(f"forward-{port}")

    def _upstream(self) -> socket.socket:
        _setns(self._ns_path)  # this (per-connection) thread only: the upstream socket is created inside
        return socket.create_connection(("127.0.0.1", self._port), timeout=10)


class _Inbound(_Relay):
    """TCP relay the other way: 127.0.0.1:port inside a namespace -> 127.0.0.1:port on the host."""

    def __init__(self, ns_path: str, port: int) -> None:
        self._port = port
        made: list[socket.socket | OSError] = []
        # A thread that entered the namespace creates the listener (setns moves only the calling thread);
        # the relays run in threads of this process's own namespace, so their upstream is the host's.
        maker = threading.Thread(target=lambda: made.append(_listener_in(ns_path, port)))
        maker.start()
        maker.join()
        if isinstance(made[0], OSError):
            raise made[0]
        self._listener = made[0]
        self._start(f"inbound-{port}")

    def _upstream(self) -> socket.socket:
        return socket.create_connection(("127.0.0.1", self._port), timeout=10)


def _listener_in(ns_path: str, port: int) -> socket.socket | OSError:
    try:
        _setns(ns_path)
        return socket.create_server(("127.0.0.1", port))
    except OSError as err:
        return err


def _pump(src: socket.socket, dst: socket.socket) -> None:
    try:
        while data := src.recv(1 << 16):
            dst.sendall(data)
    except OSError:
        pass
    finally:
        with contextlib.suppress(OSError):
            dst.shutdown(socket.SHUT_WR)
        with contextlib.suppress(OSError):
            src.shutdown(socket.SHUT_RD)
