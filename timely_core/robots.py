"""Registered robots and their stored prompt prefixes (Teola's partial prefill).

The fixed part of a prompt (skill set, guidance, examples) depends only on the
robot type, so it is tokenized and prefilled once per distinct (type, text) and
shared by every robot of that type; each request then prefills only its scene and
instruction.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from timely_core.errors import UnknownRobotType
from timely_core.plan_language import PlanLanguage

_ROBOT_ID = re.compile(r"^[A-Za-z0-9_]{1,64}$")


@dataclass(frozen=True)
class StoredPrefix:
    prefix_id: str | None  # None for an empty prefix: nothing to pin
    token_ids: tuple[int, ...]


@dataclass(frozen=True)
class Robot:
    robot_id: str
    language: PlanLanguage
    prefix: StoredPrefix
    max_segment_tokens: int


def validate_robot_id(robot_id: str) -> None:
    if not isinstance(robot_id, str) or not _ROBOT_ID.match(robot_id):
        raise ValueError(f"invalid robot id {robot_id!r}: use 1-64 letters, digits or underscores")


def prefix_key(robot_type: str, prefix_text: str) -> str:
    """Engine prefix id: robots of one type with the same prefix text share it."""
    digest = hashlib.sha256(prefix_text.encode()).hexdigest()[:16]
    return f"{robot_type}:{digest}"


def encode_prefix(encoder: Any, prefix_text: str) -> list[int]:
    """Ids of the fixed prompt part (`encoder`: a `tokenizers.Tokenizer`). It opens
    the sequence, so special tokens (BOS) are added as its post-processor defines."""
    return list(encoder.encode(prefix_text).ids) if prefix_text else []


def encode_request(encoder: Any, request_text: str) -> list[int]:
    """Ids of the per-request part, appended to the prefix ids (never re-joined as text)."""
    return list(encoder.encode(request_text, add_special_tokens=False).ids)


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
