"""Hold every packet of an NFQUEUE queue for a fixed time, then let it go: netem's delay.

This kernel has no ``netem`` qdisc (``CONFIG_NET_SCH_NETEM`` is not set), but it has
netfilter's userspace queue. An iptables rule in a worker host's namespace sends the
packets of the Cloud API path to queue N (``-j NFQUEUE --queue-num N``); this process, run
in the same namespace, takes each one and gives the kernel its verdict (accept) ``delay``
seconds later. Packets keep their order (a constant delay is a FIFO), and a packet is
never copied to userspace: only its id travels (``NFQNL_COPY_META``).

    ip netns exec NS python -m tests.faults.delay --queue 7 --delay 2

The protocol is netlink's nfnetlink_queue (linux/netfilter/nfnetlink_queue.h), written out
here with ``struct`` so the suite needs no C library. It prints one line per second of
figures (packets held, released) to stdout, which the runner reads back from the log.
"""

from __future__ import annotations

import argparse
import collections
import os
import select
import socket
import struct
import sys
import time

NETLINK_NETFILTER = 12
NFNL_SUBSYS_QUEUE = 3
NFQNL_MSG_PACKET = 0
NFQNL_MSG_VERDICT = 1
NFQNL_MSG_CONFIG = 2
NFQA_PACKET_HDR = 1
NFQA_VERDICT_HDR = 2
NFQA_CFG_CMD = 1
NFQA_CFG_PARAMS = 2
NFQA_CFG_QUEUE_MAXLEN = 3
NFQNL_CFG_CMD_BIND = 1
NFQNL_COPY_META = 1
NF_ACCEPT = 1
NLM_F_REQUEST = 0x1
NLM_F_ACK = 0x4
NLMSG_ERROR = 2
NLA_F_NESTED = 0x8000


def _attr(kind: int, payload: bytes) -> bytes:
    length = 4 + len(payload)
    return struct.pack("=HH", length, kind) + payload + b"\0" * (-length % 4)


def _message(msg_type: int, queue: int, attrs: bytes, *, seq: int, ack: bool) -> bytes:
    # nlmsghdr, then nfgenmsg (family, version 0, the queue number big-endian)
    body = struct.pack("=BBH", socket.AF_UNSPEC, 0, socket.htons(queue)) + attrs
    flags = NLM_F_REQUEST | (NLM_F_ACK if ack else 0)
    header = struct.pack(
        "=IHHII", 16 + len(body), (NFNL_SUBSYS_QUEUE << 8) | msg_type, flags, seq, 0
    )
    return header + body


def _attrs(data: bytes) -> dict[int, bytes]:
    found = {}
    offset = 0
    while offset + 4 <= len(data):
        length, kind = struct.unpack_from("=HH", data, offset)
        if length < 4:
            break
        found[kind & ~NLA_F_NESTED] = data[offset + 4 : offset + length]
        offset += (length + 3) & ~3
    return found


class Queue:
    def __init__(self, number: int, maxlen: int) -> None:
        self.number = number
        self.sock = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, NETLINK_NETFILTER)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 * 1024 * 1024)
        self.sock.bind((0, 0))
        self.seq = 0
        self._config(_attr(NFQA_CFG_CMD, struct.pack("=BxH", NFQNL_CFG_CMD_BIND, 0)))
        self._config(_attr(NFQA_CFG_PARAMS, struct.pack(">IB", 0, NFQNL_COPY_META)))
        self._config(_attr(NFQA_CFG_QUEUE_MAXLEN, struct.pack(">I", maxlen)))

    def _config(self, attrs: bytes) -> None:
        self.seq += 1
        self.sock.send(_message(NFQNL_MSG_CONFIG, self.number, attrs, seq=self.seq, ack=True))
        reply = self.sock.recv(65536)
        length, kind = struct.unpack_from("=IH", reply)
        if kind == NLMSG_ERROR:
            (error,) = struct.unpack_from("=i", reply, 16)
            if error != 0:
                raise OSError(-error, f"nfqueue config refused: {os.strerror(-error)}")

    def packets(self) -> list[int]:
        """Ids of the packets the kernel queued since the last call (non-blocking)."""
        ids = []
        while True:
            try:
                data = self.sock.recv(1 << 20, socket.MSG_DONTWAIT)
            except BlockingIOError:
                return ids
            offset = 0
            while offset + 16 <= len(data):
                length, kind = struct.unpack_from("=IH", data, offset)
                if length < 16:
                    break
                if kind == (NFNL_SUBSYS_QUEUE << 8) | NFQNL_MSG_PACKET:
                    attrs = _attrs(data[offset + 20 : offset + length])
                    header = attrs.get(NFQA_PACKET_HDR)
                    if header is not None:
                        ids.append(struct.unpack_from(">I", header)[0])
                offset += (length + 3) & ~3

    def accept(self, packet_id: int) -> None:
        self.seq += 1
        verdict = _attr(NFQA_VERDICT_HDR, struct.pack(">II", NF_ACCEPT, packet_id))
        self.sock.send(_message(NFQNL_MSG_VERDICT, self.number, verdict, seq=self.seq, ack=False))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--queue", type=int, required=True)
    parser.add_argument("--delay", type=float, required=True, help="seconds")
    parser.add_argument("--maxlen", type=int, default=50_000)
    args = parser.parse_args()
    queue = Queue(args.queue, args.maxlen)
    held: collections.deque[tuple[float, int]] = collections.deque()
    total_held = released = 0
    next_report = time.monotonic() + 1
    print(f"holding queue {args.queue} for {args.delay}s", flush=True)
    while True:
        now = time.monotonic()
        wait = held[0][0] - now if held else 0.2
        ready, _, _ = select.select([queue.sock], [], [], max(0.0, min(wait, 0.2)))
        if ready:
            for packet_id in queue.packets():
                held.append((time.monotonic() + args.delay, packet_id))
                total_held += 1
        now = time.monotonic()
        while held and held[0][0] <= now:
            queue.accept(held.popleft()[1])
            released += 1
        if now >= next_report:
            next_report = now + 1
            print(f"held {total_held} released {released} waiting {len(held)}", flush=True)


if __name__ == "__main__":
    sys.exit(main())
