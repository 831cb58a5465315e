"""Raw access to safetensors files: each tensor's dtype, shape and bytes as stored, and
the file's header exactly, so a file reassembled from blocks is bit-identical to the
one partitioned (safetensors' writers order and pad as they choose)."""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass
from pathlib import Path

import torch
from safetensors import deserialize
from safetensors.torch import save

# safetensors dtype names -> torch dtypes, for writing blocks as ordinary safetensors
# files that any reader (the engine) opens.
_TORCH_DTYPES = {
    "F64": torch.float64,
    "F32": torch.float32,
    "F16": torch.float16,
    "BF16": torch.bfloat16,
    "I64": torch.int64,
    "I32": torch.int32,
    "I16": torch.int16,
    "I8": torch.int8,
    "U8": torch.uint8,
    "BOOL": torch.bool,
    "F8_E4M3": torch.float8_e4m3fn,
    "F8_E5M2": torch.float8_e5m2,
}
_DTYPE_NAMES = {v: k for k, v in _TORCH_DTYPES.items()}


@dataclass(frozen=True)
class RawTensor:
    dtype: str  # safetensors name (F32, BF16, ...)
    shape: tuple[int, ...]
    data: bytes


@dataclass(frozen=True)
class RawFile:
    header: bytes  # the 8-byte length and the JSON header, as in the file
    tensors: dict[str, RawTensor]

    def offsets(self) -> dict[str, tuple[int, int]]:
        """Each tensor's [begin, end) in the data section."""
        table = json.loads(self.header[8:])
        return {
            k: (v["data_offsets"][0], v["data_offsets"][1])
            for k, v in table.items()
            if k != "__metadata__"
        }


def read_raw(path: Path) -> RawFile:
    """The header and every tensor of a safetensors file, bytes untouched."""
    content = path.read_bytes()
    if len(content) < 8:
        raise ValueError(f"{path} is not a safetensors file (only {len(content)} bytes)")
    (length,) = struct.unpack("<Q", content[:8])
    try:
        tensors = {
            name: RawTensor(info["dtype"], tuple(info["shape"]), bytes(info["data"]))
            for name, info in deserialize(content)
        }
    except Exception as error:  # safetensors raises its own error types
        raise ValueError(f"{path} is not a readable safetensors file: {error}") from error
    return RawFile(content[: 8 + length], tensors)


def assemble(header: bytes, tensors: dict[str, RawTensor]) -> bytes:
    """The file whose header is `header`, each tensor's bytes at its recorded offsets."""
    table = json.loads(header[8:])
    size = max((v["data_offsets"][1] for k, v in table.items() if k != "__metadata__"), default=0)
    data = bytearray(size)
    for name, info in table.items():
        if name == "__metadata__":
            continue
        begin, end = info["data_offsets"]
        raw = tensors[name].data
        if len(raw) != end - begin:
            raise ValueError(f"tensor {name!r}: {len(raw)} bytes, the header says {end - begin}")
        data[begin:end] = raw
    return header + bytes(data)


def to_torch(raw: RawTensor) -> torch.Tensor:
    if raw.dtype not in _TORCH_DTYPES:
        raise ValueError(
            f"dtype {raw.dtype} is not one the zoo stores ({', '.join(_TORCH_DTYPES)})"
        )
    flat = (
        torch.frombuffer(bytearray(raw.data), dtype=torch.uint8)
        if raw.data
        else torch.empty(0, dtype=torch.uint8)
    )
    return flat.view(_TORCH_DTYPES[raw.dtype]).reshape(raw.shape)


def from_torch(tensor: torch.Tensor) -> RawTensor:
    tensor = tensor.detach().cpu().contiguous()
    if tensor.dtype not in _DTYPE_NAMES:
        raise ValueError(f"dtype {tensor.dtype} is not one the zoo stores")
    data = tensor.reshape(-1).view(torch.uint8).numpy().tobytes()
    return RawTensor(_DTYPE_NAMES[tensor.dtype], tuple(tensor.shape), data)


def save_tensors(tensors: dict[str, RawTensor], metadata: dict[str, str]) -> bytes:
    """An ordinary safetensors file of `tensors`."""
    return save({k: to_torch(v) for k, v in tensors.items()}, metadata=metadata)


def load_tensors(content: bytes) -> dict[str, RawTensor]:
    return {
        name: RawTensor(info["dtype"], tuple(info["shape"]), bytes(info["data"]))
        for name, info in deserialize(content)
    }
