"""A relay between a grading kernel and the grader, so that no message the kernel sends can
fill the grader's memory.

    python -I -m labkit.grade.relay KERNEL_IP CLIENT_IP PORTS_JSON

Owns: what reaches the grader's kernel client. ZeroMQ delivers a message whole: its frames are
held in the receiver's memory until the last one arrives, and the per-frame bound
(`ZMQ_MAXMSGSIZE`) does not bound their number, so one message of 40 frames of 15 MiB cost the
grader 600 MiB, whatever it did with it after. The kernel's sockets (ipc, in its scratch
folder) are therefore never the grader's: this process connects to them, binds the same
channels in a folder only root can reach, and forwards every message whose frames add up to
at most `MAX_MESSAGE` bytes; a larger one ends it (exit status `TOO_BIG`), and the kernel
runner cuts the run with a notice. Its own memory is bounded (`MEMORY`, its address space), so
a message it cannot even hold ends it the same way (a ZeroMQ allocation failure aborts it).

Each channel is one pair, as ZeroMQ's own proxy makes it: the client side binds what the
kernel had bound (ROUTER for shell, control, stdin and the heartbeat, a publisher for iopub)
and the kernel side connects to it (DEALER, SUB); a request travels with its client's
identity and the reply finds that client by it (a reply to no client is dropped). Nothing is
parsed: frames are counted and forwarded. Towards the grader, iopub never drops (XPUB with
`XPUB_NODROP`): a grader that lags makes the relay wait, and the kernel's own queue holds the
rest, as it would without a relay.

Imports nothing from labkit (only the standard library and pyzmq): it starts in a fraction
of a second.
"""

from __future__ import annotations

import ctypes
import json
import resource
import signal
import sys
from typing import Final

import zmq

MAX_MESSAGE: Final = 4 * 1024**2  # a course notebook's largest message is a few kB
MEMORY: Final = 1024**3
QUEUED: Final = 16  # messages each relay socket queues
TOO_BIG: Final = 3
CHANNELS: Final = ("shell", "control", "stdin", "hb", "iopub")
_PR_SET_PDEATHSIG: Final = 1


def _pair(context: zmq.Context[zmq.Socket[bytes]], name: str) -> tuple[zmq.Socket[bytes], ...]:
    if name == "iopub":
        inner = context.socket(zmq.SUB)
        inner.setsockopt(zmq.SUBSCRIBE, b"")
        outer = context.socket(zmq.XPUB)
        outer.setsockopt(zmq.XPUB_NODROP, 1)
    else:
        inner = context.socket(zmq.DEALER)
        outer = context.socket(zmq.ROUTER)
    for socket in (inner, outer):
        socket.setsockopt(zmq.RCVHWM, QUEUED)
        socket.setsockopt(zmq.SNDHWM, QUEUED)
        socket.setsockopt(zmq.LINGER, 0)
    return inner, outer


def relay(kernel_ip: str, client_ip: str, ports: dict[str, int]) -> int:
    """Forward until killed; `TOO_BIG` when a message passes `MAX_MESSAGE`. A message the
    grader's side cannot take yet waits, and its channel with it (the others go on)."""
    context: zmq.Context[zmq.Socket[bytes]] = zmq.Context()
    peer: dict[zmq.Socket[bytes], zmq.Socket[bytes]] = {}
    waiting: dict[zmq.Socket[bytes], list[zmq.Frame]] = {}  # by the socket to send it on
    poller = zmq.Poller()
    for name in CHANNELS:
        inner, outer = _pair(context, name)
        inner.connect(f"ipc://{kernel_ip}-{ports[name]}")
        outer.bind(f"ipc://{client_ip}-{ports[name]}")
        peer[inner], peer[outer] = outer, inner
        poller.register(inner, zmq.POLLIN)
        poller.register(outer, zmq.POLLIN)
    while True:
        for socket, event in poller.poll():
            if event & zmq.POLLOUT and _send(socket, waiting[socket]):
                del waiting[socket]
                poller.register(socket, zmq.POLLIN)
                poller.register(peer[socket], zmq.POLLIN)  # its channel is read again
            if not event & zmq.POLLIN:
                continue
            frames = socket.recv_multipart(copy=False)
            if sum(frame.buffer.nbytes for frame in frames) > MAX_MESSAGE:
                return TOO_BIG
            target = peer[socket]
            if socket.type == zmq.XPUB:
                continue  # the grader's subscription: the relay forwards everything anyway
            if not _send(target, frames):
                waiting[target] = frames
                poller.unregister(socket)  # read no more of this channel for now
                poller.register(target, zmq.POLLIN | zmq.POLLOUT)


def _send(socket: zmq.Socket[bytes], frames: list[zmq.Frame]) -> bool:
    """Send without waiting; False when the other side is full (the message waits)."""
    try:
        socket.send_multipart(frames, flags=zmq.NOBLOCK, copy=False)
    except zmq.Again:
        return False
    return True


def main(argv: list[str] | None = None) -> int:
    kernel_ip, client_ip, ports = sys.argv[1:] if argv is None else argv
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY, MEMORY))
    # Ends with the grader's thread that started it, even if the grader is killed.
    ctypes.CDLL(None).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    return relay(kernel_ip, client_ip, json.loads(ports))


if __name__ == "__main__":
    sys.exit(main())
