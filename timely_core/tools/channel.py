"""The duplex channel between the service and a plugin process, and the wire form
of calls and replies.

Each message is a msgpack map behind its length (4 bytes, big-endian). The length
comes first, so a message over `MAX_MESSAGE_BYTES` is refused from its header,
before any of it is buffered (`MessageTooLarge`); msgpack's streaming unpacker,
without lengths, could only fail in the middle of a stream it cannot resume. The
plugin's process checks each reply before sending it (worker.py), so a reply over
the limit fails its call alone; a message over it that still arrives, or one that
is not a msgpack map (`ChannelError`), means the stream cannot be trusted: the
service restarts that process (process.py)."""

from __future__ import annotations

import select
import socket
import struct
from typing import Any

import msgpack

from timely_core.tools.plugin import ArgValue, ToolCall, ToolReply, Unresolved

MAX_MESSAGE_BYTES = 16 * 1024 * 1024  # one message, so one reply, encoded
_HEADER = struct.Struct(">I")
_READ_CHUNK = 1 << 20


class ChannelClosed(Exception):
    """The other end closed the channel (its process ended)."""


class ChannelError(ValueError):
    """The other end sent something that is not a message: the stream is lost."""


class MessageTooLarge(ChannelError):
    """A message over `MAX_MESSAGE_BYTES` (to send, or announced by its header)."""

    def __init__(self, size: int) -> None:
        self.size = size
        super().__init__(
            f"{size_text(size)}, over the limit of {size_text(MAX_MESSAGE_BYTES)} per "
            "message (MAX_MESSAGE_BYTES)"
        )


def size_text(size: int) -> str:
    return f"{size / (1 << 20):.1f} MiB ({size} bytes)"


def encode(message: dict[str, Any]) -> bytes:
    """The message framed for the wire. Raises MessageTooLarge, or what msgpack
    raises for a value it cannot carry (TypeError, ValueError, OverflowError)."""
    body = msgpack.packb(message, use_bin_type=True)
    if len(body) > MAX_MESSAGE_BYTES:
        raise MessageTooLarge(len(body))
    return _HEADER.pack(len(body)) + body


class Channel:
    def __init__(self, sock: socket.socket) -> None:
        sock.setblocking(True)
        self._sock = sock
        self._buffer = bytearray()

    def fileno(self) -> int:
        return self._sock.fileno()

    def send(self, message: dict[str, Any]) -> None:
        """Raises ChannelClosed if the other end is gone (and what `encode` raises)."""
        self.send_encoded(encode(message))

    def send_encoded(self, data: bytes) -> None:
        try:
            self._sock.sendall(data)
        except OSError as exc:
            raise ChannelClosed(str(exc)) from exc

    def receive(self, timeout_s: float | None) -> dict[str, Any] | None:
        """The next message, or None if none arrived within `timeout_s` (None: wait).
        Raises ChannelClosed, or ChannelError (the channel is then unusable)."""
        while True:
            message = self._take()
            if message is not None:
                return message
            if timeout_s is not None:
                ready, _, _ = select.select([self._sock], [], [], timeout_s)
                if not ready:
                    return None
            try:
                data = self._sock.recv(_READ_CHUNK)
            except OSError as exc:
                raise ChannelClosed(str(exc)) from exc
            if not data:
                raise ChannelClosed("end of stream")
            self._buffer += data

    def _take(self) -> dict[str, Any] | None:
        """The first whole message in the buffer, taken out of it."""
        if len(self._buffer) < _HEADER.size:
            return None
        (size,) = _HEADER.unpack_from(self._buffer)
        if size > MAX_MESSAGE_BYTES:
            raise MessageTooLarge(size)
        end = _HEADER.size + size
        if len(self._buffer) < end:
            return None
        body = bytes(self._buffer[_HEADER.size : end])
        del self._buffer[:end]
        try:
            message = msgpack.unpackb(body, raw=False)
        except Exception as exc:  # msgpack raises several kinds for bad data
            raise ChannelError(f"a malformed message ({type(exc).__name__}: {exc})") from exc
        if not isinstance(message, dict):
            raise ChannelError(f"a message that is not a map: {message!r:.80}")
        return message

    def close(self) -> None:
        self._sock.close()


def _arg_to_wire(value: ArgValue) -> Any:
    return {"expr": value.text} if isinstance(value, Unresolved) else value


def _arg_from_wire(value: Any) -> ArgValue:
    if isinstance(value, dict):
        return Unresolved(str(value["expr"]))
    if isinstance(value, (int, float, str, bool)):
        return value
    raise ValueError(f"not an argument value: {value!r:.80}")


def call_to_wire(request_id: int, call: ToolCall) -> dict[str, Any]:
    return {
        "op": "call",
        "id": request_id,
        "task": call.task_id,
        "robot": call.robot_id,
        "index": call.index,
        "skill": call.skill,
        "args": [_arg_to_wire(a) for a in call.args],
        "complete": call.complete,
        "text": call.text,
        "scene": call.scene,
        "before": call.before,
        "epoch": call.epoch,
    }


def call_from_wire(message: dict[str, Any]) -> ToolCall:
    return ToolCall(
        task_id=str(message["task"]),
        robot_id=str(message["robot"]),
        index=int(message["index"]),
        skill=str(message["skill"]),
        args=tuple(_arg_from_wire(a) for a in message["args"]),
        complete=bool(message["complete"]),
        text=str(message["text"]),
        scene=str(message.get("scene", "")),
        before=str(message.get("before", "")),
        epoch=int(message.get("epoch", 0)),
    )


def reply_to_wire(request_id: int, reply: ToolReply) -> dict[str, Any]:
    return {
        "op": "reply",
        "id": request_id,
        "kind": reply.kind,
        "value": reply.value,
        "message": reply.message,
        "argument": reply.argument,
    }


def reply_from_wire(message: dict[str, Any]) -> ToolReply:
    argument = message.get("argument")
    return ToolReply(
        kind=str(message.get("kind", "")),
        value=message.get("value"),
        message=str(message.get("message", "")),
        argument=None if argument is None else int(argument),
    )
