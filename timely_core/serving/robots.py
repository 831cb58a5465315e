"""Registered robots and their stored prompt prefixes (Teola's partial prefill).

The fixed part of a prompt (skill set, guidance, examples) depends only on the
robot type, so it is tokenized and prefilled once per distinct (type, text) and
shared by every robot of that type, together with the fixed opening of the
request part; each request then prefills only its scene and instruction.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from timely_core.errors import UnknownRobotType
from timely_core.language.plan_language import PlanLanguage
from timely_core.language.statement_guard import GuardFactory

_ROBOT_ID = re.compile(r"^[A-Za-z0-9_]{1,64}$")


@dataclass(frozen=True)
class StoredPrefix:
    """A robot type's fixed prompt, prefilled once in the engine.

    Every prompt is `token_ids` + the request part's ids. Request parts open with a
    fixed header too (the planner's "### Request", newline, "Scene:"): its ids,
    `header_ids`, are stored with the prefix, so the engine prefills them once as
    well rather than with every request (5 of a drone request's 23-33 tokens)."""

    prefix_id: str | None  # None for an empty prefix: nothing to pin
    token_ids: tuple[int, ...]
    header_ids: tuple[int, ...] = ()
    variant: str | None = None  # whose KV the engine holds for it (None: the base model)

    @property
    def shared_ids(self) -> tuple[int, ...]:
        """What the engine holds: the prefix, then the request header."""
        return self.token_ids + self.header_ids


@dataclass(frozen=True)
class Robot:
    robot_id: str
    language: PlanLanguage
    prefix: StoredPrefix
    max_segment_tokens: int
    guard: GuardFactory | None = None  # a fresh StatementGuard per task
    variant: str | None = None  # the fleet variant its plans run with (None: the base)


def validate_robot_id(robot_id: str) -> None:
    if not isinstance(robot_id, str) or not _ROBOT_ID.match(robot_id):
        raise ValueError(f"invalid robot id {robot_id!r}: use 1-64 letters, digits or underscores")


def prefix_key(
    robot_type: str, prefix_text: str, header_ids: Sequence[int] = (), variant: str | None = None
) -> str:
    """Engine prefix id: robots of one type with the same prefix text and request
    header share it, per fleet variant (a variant computes other KV for the same ids)."""
    material = prefix_text + "\x00" + ",".join(map(str, header_ids))
    digest = hashlib.sha256(material.encode()).hexdigest()[:16]
    return f"{robot_type}:{digest}" if variant is None else f"{robot_type}@{variant}:{digest}"


def encode_prefix(encoder: Any, prefix_text: str) -> list[int]:
    """Ids of the fixed prompt part (`encoder`: a `tokenizers.Tokenizer`). It opens
    the sequence, so special tokens (BOS) are added as its post-processor defines."""
    return list(encoder.encode(prefix_text).ids) if prefix_text else []


def encode_request(encoder: Any, request_text: str) -> list[int]:
    """Ids of the per-request part, appended to the prefix ids (never re-joined as text)."""
    return list(encoder.encode(request_text, add_special_tokens=False).ids)


def check_room(
    robot_id: str, prefix_tokens: int, empty_request_tokens: int, segment_limit: int, state: Any
) -> None:
    """ValueError when the model's context (`state.engine.max_model_len`, if the engine
    has one) cannot hold the robot's prompt prefix, an empty request and a first
    segment: every task of the robot would be refused (PromptTooLong)."""
    context = getattr(state.engine, "max_model_len", None)
    if not isinstance(context, int):
        return
    needed = min(state.config.max_tokens, segment_limit)
    room = context - prefix_tokens - empty_request_tokens
    if room < needed:
        raise ValueError(
            f"robot {robot_id!r}: its prompt prefix takes {prefix_tokens} of the model's "
            f"{context} positions, which leaves {max(room, 0)} for the scene, instruction "
            f"and plan, less than a first segment ({needed} tokens, max_segment_tokens "
            f"{segment_limit}): every task would be refused; use a shorter prompt, a "
            "smaller max_segment_tokens or a model with a longer context"
        )


# Unlike scenes and instructions (letters, digits, punctuation, spaces, empty): what
# the request parts of all of them start with is the language's fixed header.
_HEADER_PROBES = (("a", "b"), ("Z z", "9"), ("1, (x)", "'q'"), ("", ""), ("Ω!", "-"))


def request_header_ids(encoder: Any, language: PlanLanguage) -> list[int]:
    """Ids every request part of `language` starts with: the common leading ids of
    unlike requests. Empty when the request part has no fixed opening. (A request
    that still opens otherwise is served without the stored prefix: see admission.)"""
    return common_leading_ids(
        [
            encode_request(encoder, language.format_request(scene, instruction))
            for scene, instruction in _HEADER_PROBES
        ]
    )


def scene_request_ids(encoder: Any, language: PlanLanguage, scene: str) -> list[int]:
    """Ids every request part of `language` with this `scene` starts with, whatever
    the instruction: the part of a request that can be prefilled before the task is
    known. Trailing ids that end in whitespace are left to the request: the probes'
    first words may not merge with a space before them, but an instruction's can
    (" the", " look")."""
    ids = common_leading_ids(
        [
            encode_request(encoder, language.format_request(scene, instruction))
            for _, instruction in _HEADER_PROBES
        ]
    )
    while ids and encoder.decode(ids[-1:]).endswith((" ", "\t")):
        ids.pop()
    return ids


def common_leading_ids(encoded: Sequence[Sequence[int]]) -> list[int]:
    common = 0
    while all(len(ids) > common for ids in encoded) and len({ids[common] for ids in encoded}) == 1:
        common += 1
    return list(encoded[0][:common])


def resolve_language(
    robot_id: str,
    language: PlanLanguage | None,
    robot_type: str | None,
    languages: Mapping[str, PlanLanguage],
) -> PlanLanguage:
    """The robot's plan language: given directly, or looked up by robot type."""
    if language is None:
        if robot_type is None:
            raise UnknownRobotType(f"robot {robot_id!r}: give a language or a robot_type")
        if robot_type not in languages:
            known = ", ".join(sorted(languages)) or "none"
            raise UnknownRobotType(
                f"robot {robot_id!r}: unknown robot type {robot_type!r} (known: {known})"
            )
        language = languages[robot_type]
    if not isinstance(language, PlanLanguage):
        raise UnknownRobotType(
            f"robot {robot_id!r}: {type(language).__name__} is not a PlanLanguage"
        )
    if robot_type is not None and language.robot_type != robot_type:
        raise UnknownRobotType(
            f"robot {robot_id!r}: robot_type {robot_type!r} does not match the "
            f"language's {language.robot_type!r}"
        )
    return language
