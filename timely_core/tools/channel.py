"""The duplex channel between the service and a plugin process: msgpack maps over a
stream socket (msgpack's streaming unpacker frames them), and the wire form of
calls and replies."""

from __future__ import annotations

import select
import socket
from typing import Any

import msgpack

from timely_core.tools.plugin import ArgValue, ToolCall, ToolReply, Unresolved

_READ_CHUNK = 65536


class ChannelClosed(Exception):
    """The other end closed the channel (its process ended)."""


class Channel:
    def __init__(self, sock: socket.socket) -> None:
        sock.setblocking(True)
        self._sock = sock
        self._unpacker = msgpack.Unpacker(raw=False, max_buffer_size=16 * 1024 * 1024)

    def fileno(self) -> int:
        return self._sock.fileno()

    def send(self, message: dict[str, Any]) -> None:
        """Raises ChannelClosed if the other end is gone."""
        try:
            self._sock.sendall(msgpack.packb(message, use_bin_type=True))
        except OSError as exc:
            raise ChannelClosed(str(exc)) from exc

    def receive(self, timeout_s: float | None) -> dict[str, Any] | None:
        """The next message, or None if none arrived within `timeout_s` (None: wait)."""
        while True:
            for message in self._unpacker:
                if not isinstance(message, dict):
                    raise ValueError(f"channel message is not a map: {message!r:.80}")
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
            self._unpacker.feed(data)

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
