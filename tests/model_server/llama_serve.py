"""`python -m llama_cpp.server`, with llama.cpp's extra weight buffer types turned off.

    python tests/model_server/llama_serve.py --model M.gguf --host 127.0.0.1 --port N ...

The arguments are `llama_cpp.server`'s own. Two changes, both for llama-cpp-python 0.3.36
on this kind of machine, neither to what the server answers:

- Every model is loaded with `use_extra_bufts = False`. llama-cpp-python builds llama.cpp for
  the machine it is installed on (`GGML_NATIVE`), so on a CPU that reports AMX its matrix
  kernels use AMX tiles; in a VM that does not let a process use them (this Firecracker VM:
  `ldtilecfg` in `ggml_backend_amx_mul_mat`) the first decode is a SIGSEGV. Without the extra
  buffer types the weights stay in plain CPU buffers (no AMX, no repacking): slower, it runs.
- With `logprobs`, `Llama._create_completion` finds each generated token's top alternatives
  with `sorted(zip(logprobs, range(n_vocab)), reverse=True)`: a Python sort of the whole
  vocabulary per token, 262,144 entries for Gemma 3 (~0.4 s a token, ~5 s a decision). The
  `zip` it calls is replaced, in that module only, by one that hands `sorted` the top
  `_TOP` pairs of such a call (found with numpy) and passes every other call through; the
  slice the server takes (`[:top_logprobs]`, at most 20 in the OpenAI API) is the same.
"""

from __future__ import annotations

import builtins
import runpy
from typing import Any

import llama_cpp.llama
import llama_cpp.llama_cpp as bindings
import numpy as np

_TOP = 20

_default = bindings.llama_model_default_params


def _plain_buffers() -> bindings.llama_model_params:
    params = _default()
    params.use_extra_bufts = False
    return params


def _zip(*iterables: Any) -> Any:
    if len(iterables) == 2:
        scores, indices = iterables
        if (
            isinstance(scores, np.ndarray)
            and scores.ndim == 1
            and isinstance(indices, range)
            and indices == range(len(scores))
        ):
            top = np.argpartition(scores, -_TOP)[-_TOP:] if len(scores) > _TOP else indices
            return [(scores[i], int(i)) for i in top]
    return builtins.zip(*iterables)  # noqa: B905 - llama.py's own calls, passed through as they are


# `Llama.__init__` calls `llama_cpp.llama_cpp.llama_model_default_params()` at load time.
bindings.llama_model_default_params = _plain_buffers
# A module global shadows the builtin for `llama_cpp.llama`'s own code only.
llama_cpp.llama.zip = _zip  # type: ignore[attr-defined]

if __name__ == "__main__":
    runpy.run_module("llama_cpp.server", run_name="__main__", alter_sys=True)
