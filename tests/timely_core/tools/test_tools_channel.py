"""The channel's framing: each message behind its length, so one over the limit
is refused from its header (nothing of it buffered) and what is not a msgpack map
is named; a message split across reads arrives whole."""

from __future__ import annotations

import socket
import struct
from collections.abc import Iterator

import msgpack
import pytest

from timely_core.tools.channel import (
    MAX_MESSAGE_BYTES,
    Channel,
    ChannelClosed,
    ChannelError,
    MessageTooLarge,
    encode,
)


@pytest.fixture
def pair() -> Iterator[tuple[Channel, socket.socket]]:
    """A channel, and the raw socket at its other end."""
    ours, theirs = socket.socketpair()
    channel = Channel(ours)
    yield channel, theirs
    channel.close()
    theirs.close()


def test_messages_arrive_whole_and_in_order(pair: tuple[Channel, socket.socket]) -> None:
    channel, theirs = pair
    data = encode({"op": "reply", "id": 1, "value": "x" * 200_000}) + encode({"id": 2})
    theirs.sendall(data[:3])  # a header split across reads
    assert channel.receive(0.05) is None
    theirs.sendall(data[3:])
    assert channel.receive(5.0) == {"op": "reply", "id": 1, "value": "x" * 200_000}
    assert channel.receive(5.0) == {"id": 2}
    theirs.close()
    with pytest.raises(ChannelClosed):
        channel.receive(5.0)


def test_a_message_over_the_limit_is_not_sent() -> None:
    with pytest.raises(MessageTooLarge) as refused:
        encode({"value": b"x" * MAX_MESSAGE_BYTES})
    assert refused.value.size > MAX_MESSAGE_BYTES
    assert str(refused.value).startswith(f"16.0 MiB ({refused.value.size} bytes), over the limit")
    assert str(refused.value).endswith(
        f"of 16.0 MiB ({MAX_MESSAGE_BYTES} bytes) per message (MAX_MESSAGE_BYTES)"
    )


def test_a_header_announcing_too_much_is_refused_at_once(
    pair: tuple[Channel, socket.socket],
) -> None:
    channel, theirs = pair
    theirs.sendall(struct.pack(">I", 20 * 1024 * 1024) + b"x" * 100)
    with pytest.raises(MessageTooLarge, match=r"20\.0 MiB \(20971520 bytes\), over the limit"):
        channel.receive(5.0)


@pytest.mark.parametrize(
    ("body", "named"),
    [
        (b"\xc1\xc1\xc1", "a malformed message"),
        (msgpack.packb([1, 2]), "a message that is not a map: [1, 2]"),
    ],
)
def test_what_is_no_message_is_named(
    pair: tuple[Channel, socket.socket], body: bytes, named: str
) -> None:
    channel, theirs = pair
    theirs.sendall(struct.pack(">I", len(body)) + body)
    with pytest.raises(ChannelError, match=named.replace("[", r"\[").replace("]", r"\]")):
        channel.receive(5.0)
