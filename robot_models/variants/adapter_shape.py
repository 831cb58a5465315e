"""What a variant's LoRA adapter adapts: its rank and scale, which projections and
which decoder layers. Sized per variant (fleet.yaml's `adapter`), since a fleet of
many adapters is resident beside one base and each costs rank x (in + out) per
adapted projection."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, field_validator

TARGET_MODULES = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")


class AdapterShape(BaseModel):
    """rank `r`, `alpha` (None: 2 x rank), `targets` (projections, in
    TARGET_MODULES), `layers` (decoder layer indices; None: every layer)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    rank: int = Field(default=8, ge=1, le=64)
    alpha: int | None = Field(default=None, ge=1)
    targets: tuple[str, ...] = TARGET_MODULES
    layers: tuple[int, ...] | None = None

    @field_validator("targets")
    @classmethod
    def _known_targets(cls, targets: tuple[str, ...]) -> tuple[str, ...]:
        if not targets:
            raise ValueError(f"names no projection; choose from {', '.join(TARGET_MODULES)}")
        unknown = [t for t in targets if t not in TARGET_MODULES]
        if unknown:
            raise ValueError(
                f"{', '.join(map(repr, unknown))} not a projection; "
                f"choose from {', '.join(TARGET_MODULES)}"
            )
        if len(set(targets)) != len(targets):
            raise ValueError(f"repeats a projection: {', '.join(targets)}")
        return targets

    @field_validator("layers")
    @classmethod
    def _layer_indices(cls, layers: tuple[int, ...] | None) -> tuple[int, ...] | None:
        if layers is None:
            return None
        if not layers:
            raise ValueError("is empty; leave it out to adapt every layer")
        if any(i < 0 for i in layers) or len(set(layers)) != len(layers):
            raise ValueError(f"must be distinct layer indices >= 0, not {list(layers)}")
        return tuple(sorted(layers))

    @property
    def lora_alpha(self) -> int:
        return self.alpha if self.alpha is not None else 2 * self.rank

    def check_layers(self, count: int) -> None:
        """Refuse layers the base does not have (its layer count is known only here)."""
        missing = [i for i in self.layers or () if i >= count]
        if missing:
            raise ValueError(
                f"adapter layers {missing} are not in the base model "
                f"({count} layers: 0 to {count - 1})"
            )

    @classmethod
    def from_flags(cls, rank: int, alpha: int, targets: str, layers: str) -> AdapterShape:
        """From the training CLI's comma lists ('' layers: every layer)."""
        return cls(
            rank=rank,
            alpha=alpha,
            targets=tuple(t.strip() for t in targets.split(",") if t.strip()),
            layers=tuple(int(i) for i in layers.split(",") if i.strip()) if layers else None,
        )

    def flags(self) -> dict[str, object]:
        """The LoraTrainConfig fields this shape sets."""
        return {
            "rank": self.rank,
            "alpha": self.lora_alpha,
            "targets": ",".join(self.targets),
            "layers": ",".join(map(str, self.layers)) if self.layers else "",
        }
