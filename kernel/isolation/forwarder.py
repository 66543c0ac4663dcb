"""The model forwarder: run inside an agent's sandbox as the agent's parent, standard library only.

`python forwarder.py --listen 127.0.0.1:PORT --to /run/seed/model.sock -- AGENT ARGV...`
listens on the sandbox's own loopback (its network namespace has nothing else), relays each
connection's bytes both ways to the model gateway's Unix socket (a half-close passes on, a
streamed answer passes as it comes), starts the agent, hands it SIGTERM, SIGINT and SIGHUP,
and ends with the agent: its exit code, or the signal that ended it. The port is bound before
the agent starts, so the agent never finds it closed (nor takes it first).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Sequence
from types import FrameType

_CHUNK = 64 * 1024
_MAX_CONNECTIONS = 64
"""Connections relayed at once; more wait in the listen backlog."""
_FORWARDED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


def _pipe(source: socket.socket, sink: socket.socket) -> None:
    """Copy source to sink until source ends, then end sink's writing side (a half-close)."""
    try:
        while data := source.recv(_CHUNK):
            sink.sendall(data)
    except OSError:
        pass
    finally:
        with contextlib.suppress(OSError):
            sink.shutdown(socket.SHUT_WR)


def _relay(client: socket.socket, target: str, slots: threading.Semaphore) -> None:
    """One connection, relayed both ways to the Unix socket until both sides have ended."""
    upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        upstream.connect(target)
        back = threading.Thread(target=_pipe, args=(upstream, client), daemon=True)
        back.start()
        _pipe(client, upstream)
        back.join()
    except OSError:
        pass  # the gateway is gone: the client sees its connection closed
    finally:
        client.close()
        upstream.close()
        slots.release()


def _serve(server: socket.socket, target: str) -> None:
    """Accept connections until the listening socket is closed."""
    slots = threading.Semaphore(_MAX_CONNECTIONS)
    while True:
        slots.acquire()
        try:
            client, _ = server.accept()
        except OSError:
            return
        threading.Thread(target=_relay, args=(client, target, slots), daemon=True).start()


def _address(text: str) -> tuple[str, int]:
    host, _, port = text.rpartition(":")
    return host.strip("[]") or "127.0.0.1", int(port)


def _exit_as(code: int) -> None:
    """End this process as the agent ended: its exit code, or the same signal."""
    sys.stdout.flush()
    sys.stderr.flush()
    if code < 0:
        with contextlib.suppress(OSError, ValueError):
            signal.signal(-code, signal.SIG_DFL)
            os.kill(os.getpid(), -code)
        os._exit(128 - code)
    os._exit(code)


def main(argv: Sequence[str] | None = None) -> None:
    """Listen, start the agent, relay until it ends, then end the same way."""
    parser = argparse.ArgumentParser(prog="forwarder")
    parser.add_argument("--listen", required=True, help="HOST:PORT on the sandbox's loopback")
    parser.add_argument("--to", required=True, help="the gateway's Unix socket")
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    command = [str(a) for a in args.command]
    if command and command[0] == "--":
        command = command[1:]
    if not command:
        parser.error("no agent command after --")
    server = socket.create_server(_address(str(args.listen)), backlog=128)
    # a signal before the agent exists is held and handed over once it does
    pending: list[int] = []
    child: list[subprocess.Popen[bytes]] = []

    def forward(number: int, _frame: FrameType | None) -> None:
        if child:
            with contextlib.suppress(OSError):
                child[0].send_signal(number)
        else:
            pending.append(number)

    for number in _FORWARDED:
        signal.signal(number, forward)
    try:
        child.append(subprocess.Popen(command))
    except OSError as exc:
        print(f"forwarder: cannot start {command[0]}: {exc}", file=sys.stderr)
        _exit_as(127)
    for number in pending:
        child[0].send_signal(number)
    threading.Thread(target=_serve, args=(server, str(args.to)), daemon=True).start()
    code = child[0].wait()
    # stop listening at once; relays still under way end with this process
    with contextlib.suppress(OSError):
        server.shutdown(socket.SHUT_RDWR)
    server.close()
    _exit_as(code)


if __name__ == "__main__":
    main()
