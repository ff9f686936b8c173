"""``scripts/llama-server.sh``'s model and GPU settings (the binary is cached by this tier)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "llama-server.sh"


def _start(tmp_path: Path, **env: str) -> subprocess.CompletedProcess[str]:
    environment = {**os.environ, "AX3L_RUN_DIR": str(tmp_path), "AX3L_LLAMA_PORT": "1", **env}
    return subprocess.run(
        [str(SCRIPT), "start"], env=environment, capture_output=True, text=True, timeout=120
    )


def test_a_missing_model_file_is_a_clear_error(tmp_path: Path) -> None:
    """AX3L_LLAMA_MODEL naming no file stops before anything starts, naming the setting."""
    found = _start(tmp_path, AX3L_LLAMA_MODEL=str(tmp_path / "nothing.gguf"))
    assert found.returncode == 1
    assert "AX3L_LLAMA_MODEL" in found.stderr and "no such file" in found.stderr
    assert not (tmp_path / "llama-server.pid").exists()


def test_gpu_layers_must_be_a_number(tmp_path: Path) -> None:
    """AX3L_LLAMA_GPU_LAYERS that is not a count of layers is refused at once."""
    found = _start(tmp_path, AX3L_LLAMA_GPU_LAYERS="all")
    assert found.returncode == 2 and "AX3L_LLAMA_GPU_LAYERS" in found.stderr


def test_gpu_layers_without_the_cuda_toolkit_say_what_is_missing(tmp_path: Path) -> None:
    """Layers on a GPU need a CUDA build: without nvcc the script says so and builds nothing."""
    if shutil.which("nvcc"):
        pytest.skip("nvcc is here: the script would build a CUDA llama-server")
    found = _start(tmp_path, AX3L_LLAMA_GPU_LAYERS="99")
    assert found.returncode == 1
    assert "nvcc" in found.stderr and "compose.llama-gpu.yaml" in found.stderr
