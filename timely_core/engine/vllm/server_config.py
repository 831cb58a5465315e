"""Configuration of the vLLM server engine (`engine: vllm-server`)."""

from __future__ import annotations

from urllib.parse import urlparse

from pydantic import BaseModel, ConfigDict, Field, field_validator


class VllmServerConfig(BaseModel):
    """Where the vLLM servers are and how long to wait for them.

    Each URL is a vLLM OpenAI-compatible server (`vllm serve` / `python -m
    vllm.entrypoints.openai.api_server`) started with `--enable-prefix-caching
    --scheduling-policy priority --enable-prompt-tokens-details`, and for plans under
    grammars `--logits-processors` with grammar_args.PROCESSOR_FQCN (a server without
    it gets no grammar request). A server that fails, or hangs, is left out for
    `retry_after_s`, doubled for each failure in a row (up to 16 times as long), and
    gets a stream again only once its /health answers within `connect_timeout_s`;
    one serving another model is left out for good."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    urls: list[str] = Field(min_length=1)
    connect_timeout_s: float = Field(default=2.0, gt=0, le=60)
    # a server that sends nothing on any stream for this long while it holds a
    # request is hung: left out, its generations resume on another server
    token_timeout_s: float = Field(default=60.0, gt=0, le=3600)
    retry_after_s: float = Field(default=5.0, ge=0, le=3600)
    max_generations: int = Field(default=64, ge=1, le=4096)
    # a robot's requests go to the server holding its prefix unless that server runs
    # this many more generations than the least loaded one
    affinity_slack: int = Field(default=8, ge=0)
    metrics_period_s: float = Field(default=1.0, ge=0, le=60)

    @field_validator("urls")
    @classmethod
    def _http_urls(cls, urls: list[str]) -> list[str]:
        for url in urls:
            parsed = urlparse(url)
            if parsed.scheme not in ("http", "https") or not parsed.hostname:
                raise ValueError(f"vLLM server URL {url!r} is not an http(s)://host:port URL")
        if len(set(urls)) != len(urls):
            raise ValueError(f"vLLM server URLs repeat: {urls}")
        return [u.rstrip("/") for u in urls]
