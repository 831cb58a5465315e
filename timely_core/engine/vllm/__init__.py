"""The vLLM backends: vLLM's engine in process (`engine: vllm`) and one or more vLLM
OpenAI-compatible servers (`engine: vllm-server`). vLLM is imported only here, and
only when one of them is built: `timely_core` runs without it."""
