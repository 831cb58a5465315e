"""Latency profiles: a `LatencyModel` (timely_core's one model of what an engine
iteration costs) together with where it came from and the serving setting it
describes (KV capacity, tokens and generations per iteration).

The simulator runs the service's real scheduling code in virtual time on a
profile directly: measured on a real engine (`lrtrace profile-engine`, which also
measures the service's own time per iteration, `service_overhead_s`) or derived
from a published one (the paper's Table 1). Measured profiles are JSON files in
`lrtrace/profiles/`, validated on load; the paper's is built from its one
definition in `timely_core.engine.sim.latency`.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from pydantic import Field, ValidationError

from lrtrace.errors import LrtraceError
from lrtrace.outputs import check_file, write_atomically
from lrtrace.trace_format import one_line
from timely_core.engine.sim.latency import LatencyModel

PROFILE_DIR = Path(__file__).resolve().parent / "profiles"
NAME_PATTERN = r"^[a-z0-9][a-z0-9_.-]{0,63}$"  # also a file name in PROFILE_DIR


class LatencyProfile(LatencyModel):
    name: str = Field(pattern=NAME_PATTERN)
    description: str
    source: str  # "paper" or "measured"
    kv_capacity_tokens: int = Field(gt=0, description="device KV capacity of the setting")
    max_batched_tokens: int = Field(default=2048, gt=0)
    kv_bytes_per_token: int = Field(default=131072, gt=0)
    # the setting's cap on generations per iteration (its engine's max_num_seqs): a
    # replay's max batch unless --max-batch is given; None: the service's default
    max_batch_size: int | None = Field(default=None, ge=1)
    derivation: str = ""  # how the coefficients were obtained, with the fit's error
    samples: int = Field(default=0, ge=0)
    rel_error_p50: float | None = None  # measured profiles: |fit - measured| / measured
    rel_error_p95: float | None = None


def path_of(name: str) -> Path:
    return PROFILE_DIR / f"{name}.json"


def available() -> list[str]:
    return sorted({*BUILTIN, *(p.stem for p in PROFILE_DIR.glob("*.json"))})


def profile_path(name_or_path: str) -> Path | None:
    """The file `load` reads for `name_or_path`: a path with a suffix as given, a
    name in lrtrace/profiles/; None for a built-in profile."""
    if name_or_path in BUILTIN:
        return None
    path = Path(name_or_path)
    return path if path.suffix else path_of(name_or_path)


def load(name_or_path: str) -> LatencyProfile:
    """A profile by name (built in, or from lrtrace/profiles/) or by file path."""
    path = profile_path(name_or_path)
    if path is None:
        return BUILTIN[name_or_path]
    if Path(name_or_path).is_dir():
        raise LrtraceError(
            f"latency profile {name_or_path}: it is a directory; give a profile's name or "
            "its .json file"
        )
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise LrtraceError(
            f"unknown latency profile {name_or_path!r}; available: {', '.join(available())}"
        ) from None
    except OSError as err:
        raise LrtraceError(f"cannot read profile {path}: {err.strerror}") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise LrtraceError(f"{path}: malformed profile ({err})") from None
    try:
        return LatencyProfile.model_validate(doc)
    except ValidationError as err:
        raise LrtraceError(f"{path}: invalid profile: {one_line(err)}") from None


def check_name(name: str) -> None:
    """Refuse a name a profile cannot have (before measuring one under it)."""
    if not re.fullmatch(NAME_PATTERN, name):
        raise LrtraceError(
            f"--name {name!r}: a profile name is 1-64 lowercase letters, digits, '.', '_' "
            "or '-', starting with a letter or digit"
        )


def save(profile: LatencyProfile, path: Path | None = None) -> Path:
    """Write atomically; the directory must exist (a mistyped one is refused, not made)."""
    path = path or path_of(profile.name)
    check_file(path, "profile")
    write_atomically(path, (profile.model_dump_json(indent=2) + "\n").encode(), "profile")
    return path


def _paper_profile() -> LatencyProfile:
    """The paper's setting, from its one definition in timely_core (the simulated
    latency model `PAPER_LLAMA3_8B_RTX4090`, where the derivation is written down)."""
    from timely_core.engine.sim import latency as paper

    return LatencyProfile(
        **paper.PAPER_LLAMA3_8B_RTX4090.model_dump(),
        name="paper-llama3-8b-rtx4090",
        description="TimelyLLM paper setting: Llama3-8B fp16 on an RTX 4090 (Table 1)",
        source="paper",
        kv_capacity_tokens=paper.PAPER_KV_CAPACITY_TOKENS,
        max_batched_tokens=paper.PAPER_MAX_BATCHED_TOKENS,
        kv_bytes_per_token=paper.PAPER_KV_BYTES_PER_TOKEN,
        max_batch_size=paper.PAPER_MAX_NUM_SEQS,
        derivation=(
            "Table 1: prefill 2884 tokens = 328 ms, decode ~22 ms/token; context cost from "
            "KV bytes/token (128 KiB) over 1008 GB/s; decode per-sequence compute = prefill "
            "per-token compute; fixed part 21.5 ms so a batch-1 decode at 2.9k context is "
            "22 ms. Serving configuration of TimelyLLM's code for every policy (vLLM "
            "max_num_seqs=8, gpu_memory_utilization=0.8, prefix caching on): max batch 8, "
            "~3.0 GB of KV (timely_core.engine.sim.latency.PAPER_LLAMA3_8B_RTX4090)"
        ),
    )


PAPER_PROFILE = _paper_profile()
BUILTIN: dict[str, LatencyProfile] = {PAPER_PROFILE.name: PAPER_PROFILE}
"""Profiles defined in code rather than measured into a file."""
