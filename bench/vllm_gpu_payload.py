"""vLLM for an offline GPU host, in parts small enough to carry: for bench/vllm_gpu.py.

The lent GPU machines have CUDA 13, Python 3.12 and torch 2.11, no package index, and
take at most 64 MiB per call with the repository. vLLM 0.33 (the GPU image's) pins
torch 2.14 and 0.28 to 0.32 pin 2.13; vLLM 0.26 pins the machines' torch 2.11, and its
kernels are built for CUDA 13. Its wheel is 290 MB, most of it attention kernels the
FlashInfer and Triton backends do not use, so this keeps vLLM's Python code and its
core kernels (`_C_stable_libtorch`), adds FlashInfer and the packages vLLM imports that
the machines lack (the machines' own torch, transformers, numpy and CUDA libraries are
used), and splits the archive into parts of at most `--part-mb`:

    python bench/vllm_gpu_payload.py .gpu      # .gpu/part.00 ... and .gpu/run.sh

Carry one part per call, back to back (`carry: [".gpu/part.00"]`, command `mkdir -p
/tmp/stage && cp .gpu/part.* /tmp/stage/`: a machine that stays warm between calls is
the same machine, so /tmp keeps them: the next call must come within the machine's
30 s of warmth); the last call carries the last part and run.sh, and after the copy
runs `.gpu/run.sh`, which joins the parts, installs them under /tmp and runs
bench/vllm_gpu.py once per configuration. Run so on an H200 on 2026-11-29 (docker/
README.md has the results): staging the parts took about a minute of device time,
the machine's start included, and the two configurations ran in 343 s, 227 s of it
vLLM building FlashInfer's kernels by JIT at its first engine start.
"""

from __future__ import annotations

import argparse
import io
import lzma
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from pathlib import Path

VLLM = "vllm==0.26.0"
# kernels of attention backends and features the check does not use
DROPPED = (
    "vllm/vllm_flash_attn/_vllm_fa",
    "vllm/_moe_C",
    "vllm/_flashmla",
    "vllm/_qutlass_C",
    "vllm/vllm-rs",
    "vllm/third_party/deep_gemm/",
    "vllm/third_party/fmha_sm100/",
    "vllm/entrypoints/serve/instrumentator/static/",
)
# what vLLM 0.26 and Timely import that the GPU image lacks, resolved for vLLM 0.26
# (its server's optional extras left out: cloud CLI, telemetry exporters, MCP)
PACKAGES = [
    "annotated_types==0.8.0",
    "apache_tvm_ffi==0.1.10",
    "astor==0.8.1",
    "blake3==1.0.11",
    "cachetools==8.0.2",
    "cbor2==6.3.0",
    "compressed_tensors==0.17.0",
    "depyf==0.20.0",
    "dill==0.4.1",
    "docstring_parser==0.18.0",
    "fastapi==0.136.3",
    "flashinfer_python==0.6.14",
    "httpcore2==2.16.2",
    "httptools==0.9.0",
    "httpx2==2.16.2",
    "ijson==3.6.0",
    "interegular==0.3.3",
    "jiter==0.19.0",
    "jmespath==1.1.0",
    "jsonschema==4.26.0",
    "jsonschema_specifications==2025.9.1",
    "lark==1.2.2",
    "llguidance==1.7.6",
    "lm_format_enforcer==0.11.3",
    "loguru==0.7.3",
    "mistral_common==1.13.1",
    "model_hosting_container_standards==0.1.16",
    "msgspec==0.22.0",
    "nvtx==0.2.15",
    "openai==3.57.0",
    "openai_harmony==0.0.8",
    "opentelemetry_api==1.45.2",
    "opentelemetry_sdk==1.45.2",
    "opentelemetry_semantic_conventions==0.66b2",
    "opentelemetry_semantic_conventions_ai==0.5.1",
    "outlines_core==0.2.14",
    "partial_json_parser==0.2.1.1.post7",
    "prometheus_fastapi_instrumentator==8.1.0",
    "pybase64==1.5.1",
    "pycountry==26.2.16",
    "pydantic==2.14.4",
    "pydantic_core==2.50.5",
    "pydantic_extra_types==2.11.1",
    "pydantic_settings==2.16.3",
    "python_dotenv==1.2.4",
    "python_json_logger==4.2.0",
    "python_multipart==0.0.34",
    "pyzmq==27.3.0",
    "referencing==0.37.0",
    "rpds_py==2026.9.1",
    "setproctitle==1.3.8",
    "sniffio==1.3.1",
    "sse_starlette==3.7.0",
    "starlette==1.10.0",
    "text2num==3.1.0",
    "truststore==0.10.5",
    "typing_extensions==4.16.0",
    "typing_inspection==0.4.5",  # pydantic 2.14's; the image's 0.4.2 lacks what it reads
    "uvicorn==0.54.0",
    "watchfiles==1.3.0",
    "xgrammar==0.2.7",
]
PLATFORMS = [f"manylinux_2_{n}_x86_64" for n in (5, 17, 24, 26, 27, 28, 31, 34, 35)] + [
    "manylinux2014_x86_64",
    "manylinux1_x86_64",
]
# bench/vllm_gpu.py per configuration (its label's start), each under its own time
# limit (seconds): a fresh machine's first vLLM engine builds FlashInfer's sampling
# kernels by JIT (about 2 minutes, also under Triton attention), FlashInfer attention
# its own (about 2 more). The FlashInfer and Triton runs are recorded in
# bench/results/vllm_gpu_h200_*.json; run.sh's argument runs others.
RUNS = "KV:400"

RUN_SH = """#!/bin/bash
# Joins the parts staged in /tmp/stage, installs them under /tmp and runs
# bench/vllm_gpu.py (from the repository root) once per "label-start:seconds" in $1
# (default "{runs}")
repo=$PWD
cd /tmp/stage || exit 1
cat part.* > payload.tar && tar xf payload.tar || {{ echo "payload incomplete"; exit 1; }}
mkdir -p /tmp/vllmroot && tar xJf vllm.tar.xz -C /tmp/vllmroot || exit 1
# vLLM's model code imports vllm_flash_attn, which refuses to load without the FA
# kernels this payload leaves out; the FlashInfer and Triton backends never call them
sed -i 's/^if not (FA2_AVAILABLE or FA3_AVAILABLE):/if False:  # FA kernels not carried/' \\
  /tmp/vllmroot/vllm/vllm_flash_attn/__init__.py
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site wheels/*.whl
cd "$repo"
export PYTHONPATH=$repo:/tmp/vllmroot:/tmp/site PYTHONUNBUFFERED=1 VLLM_CACHE_ROOT=/tmp/vllmcache
nvidia-smi -L
for pair in ${{1:-{runs}}}; do
  only=${{pair%%:*}}
  timeout "${{pair##*:}}" python3 bench/vllm_gpu.py --only "$only" \\
    --out "$OUT/vllm_gpu_$only.json" > "$OUT/log_$only.txt" 2>&1
  echo "== $only rc=$?"
  grep -v -E " INFO | DEBUG |^\\s*$|it/s\\]" "$OUT/log_$only.txt" | tail -40
done
"""


def download(requirements: list[str], folder: Path) -> None:
    platforms = [arg for p in PLATFORMS for arg in ("--platform", p)]
    subprocess.run(
        [
            *(sys.executable, "-m", "pip", "download", "--quiet", "--no-deps"),
            *("--only-binary=:all:", "--python-version", "3.12", "--implementation", "cp"),
            *platforms,
            *("--dest", str(folder), *requirements),
        ],
        check=True,
    )


def stripped_vllm(wheel: Path) -> bytes:
    """vLLM's wheel without DROPPED, as an xz-compressed tar."""
    out = io.BytesIO()
    with (
        zipfile.ZipFile(wheel) as source,
        lzma.open(out, "wb", preset=8) as packed,
        tarfile.open(fileobj=packed, mode="w") as archive,
    ):
        for member in source.infolist():
            if member.is_dir() or member.filename.startswith(DROPPED):
                continue
            data = source.read(member)
            info = tarfile.TarInfo(member.filename)
            info.size = len(data)
            info.mode = 0o755 if member.filename.endswith(".so") else 0o644
            archive.addfile(info, io.BytesIO(data))
    return out.getvalue()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path, help="folder for the parts and run.sh")
    parser.add_argument("--part-mb", type=float, default=39.0, help="largest part, MB")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as scratch:
        work = Path(scratch)
        download([VLLM], work / "vllm")
        download(PACKAGES, work / "wheels")
        payload = io.BytesIO()
        with tarfile.open(fileobj=payload, mode="w") as archive:
            archive.add(work / "wheels", arcname="wheels")
            core = stripped_vllm(next((work / "vllm").glob("vllm-*.whl")))
            info = tarfile.TarInfo("vllm.tar.xz")
            info.size = len(core)
            archive.addfile(info, io.BytesIO(core))
    data = payload.getvalue()
    size = int(args.part_mb * 1e6)
    args.out.mkdir(parents=True, exist_ok=True)
    for index, start in enumerate(range(0, len(data), size)):
        (args.out / f"part.{index:02d}").write_bytes(data[start : start + size])
    (args.out / "run.sh").write_text(RUN_SH.format(runs=RUNS))
    (args.out / "run.sh").chmod(0o755)
    print(f"{len(data) / 1e6:.1f} MB in {-(-len(data) // size)} parts under {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
