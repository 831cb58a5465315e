"""A Tello SDK 2.0 peer on a loopback address, for tests and demos without a drone.

It answers the text protocol the way the drone does: `ok` to `command`, motion
commands answer `ok` once the (simulated) motion has ended, `stop` ends a motion
at once (hover), read commands (`battery?`) answer a number. It streams state
packets to the client's state port (8890) at 10 Hz. Every command received is
recorded, so a test can assert the exact sequence. Failures are injected per
command word: `fail` answers `error <reason>`, `silent` answers nothing, `late`
answers a motion (or its refusal) only after that many seconds, past a client's
timeout if need be (a long move), so the reply reaches it while it awaits the next.

Only loopback addresses are accepted: this must never talk to a real network.
"""

from __future__ import annotations

import contextlib
import ipaddress
import socket
import threading
import time

MOTION_WORDS = {"takeoff", "land", "forward", "back", "left", "right", "up", "down", "cw", "ccw"}


class FakeTello:
    def __init__(
        self,
        host: str = "127.0.0.2",
        port: int = 18889,
        client_host: str = "127.0.0.1",
        state_port: int = 8890,
        motion_s: float = 0.05,
    ) -> None:
        for address in (host, client_host):
            if not ipaddress.ip_address(address).is_loopback:
                raise ValueError(f"fake Tello works on loopback only, not {address}")
        self.host, self.port = host, port
        self._state_target = (client_host, state_port)
        self.motion_s = motion_s
        self.commands: list[str] = []
        self.fail: dict[str, str] = {}  # command word -> reason of the `error` reply
        self.silent: set[str] = set()  # command words never answered
        self.late: dict[str, float] = {}  # motion word -> seconds before its answer
        self._lock = threading.Lock()
        self._stop_motion = threading.Event()
        self._closed = threading.Event()
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self._sock.bind((host, port))
        self._sock.settimeout(0.1)
        self._state_sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self._state_sock.bind((host, 0))
        self.height_cm = 0
        self.yaw = 0
        self._threads = [
            threading.Thread(target=self._serve, daemon=True),
            threading.Thread(target=self._stream_state, daemon=True),
        ]

    def start(self) -> FakeTello:
        for t in self._threads:
            t.start()
        return self

    def close(self) -> None:
        self._closed.set()
        for t in self._threads:
            if t.is_alive():
                t.join(timeout=2)
        self._sock.close()
        self._state_sock.close()

    def __enter__(self) -> FakeTello:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def received(self) -> list[str]:
        with self._lock:
            return list(self.commands)

    def _serve(self) -> None:
        while not self._closed.is_set():
            try:
                data, peer = self._sock.recvfrom(1024)
            except TimeoutError:
                continue
            except OSError:
                return
            command = data.decode("utf-8", "replace").strip()
            with self._lock:
                self.commands.append(command)
            word = command.split(" ")[0]
            if word == "stop":
                self._stop_motion.set()
                self._reply("ok", peer)
            elif word in MOTION_WORDS:
                # answer when the motion ends, without blocking `stop`
                threading.Thread(target=self._move, args=(command, peer), daemon=True).start()
            else:
                self._answer(command, peer)

    def _move(self, command: str, peer: tuple[str, int]) -> None:
        self._stop_motion.clear()
        word = command.split(" ")[0]
        refused = word in self.fail or word in self.silent
        self._stop_motion.wait(self.late.get(word, 0.0 if refused else self.motion_s))
        if not refused:
            if word == "takeoff":
                self.height_cm = 100
            elif word == "land":
                self.height_cm = 0
            elif word in ("cw", "ccw"):
                self.yaw = (self.yaw + int(command.split()[1])) % 360
        self._answer(command, peer)

    def _answer(self, command: str, peer: tuple[str, int]) -> None:
        word = command.split(" ")[0]
        if word in self.silent:
            return
        if word in self.fail:
            self._reply(f"error {self.fail[word]}", peer)
        elif word.endswith("?"):
            self._reply({"battery?": "87", "height?": str(self.height_cm)}.get(word, "0"), peer)
        else:
            self._reply("ok", peer)

    def _reply(self, text: str, peer: tuple[str, int]) -> None:
        with contextlib.suppress(OSError):
            self._sock.sendto(text.encode("utf-8"), peer)

    def _state(self) -> str:
        return (
            f"pitch:0;roll:0;yaw:{self.yaw};vgx:0;vgy:0;vgz:0;templ:60;temph:63;"
            f"tof:{self.height_cm + 10};h:{self.height_cm};bat:87;baro:100.00;time:0;"
            "agx:0.00;agy:0.00;agz:-1000.00;\r\n"
        )

    def _stream_state(self) -> None:
        while not self._closed.wait(0.1):
            try:
                self._state_sock.sendto(self._state().encode("utf-8"), self._state_target)
            except OSError:
                return


def main() -> None:
    """`python -m timely_ros.fake_tello [HOST] [PORT]`: run a fake drone until Ctrl-C."""
    import sys

    host = sys.argv[1] if len(sys.argv) > 1 else "127.0.0.2"
    port = int(sys.argv[2]) if len(sys.argv) > 2 else 18889
    with FakeTello(host, port, motion_s=0.5):
        print(f"fake Tello on {host}:{port}", flush=True)
        try:
            while True:
                time.sleep(1)
        except KeyboardInterrupt:
            pass


if __name__ == "__main__":
    main()
