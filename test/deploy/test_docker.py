"""The deployment image, checked statically (base images cannot be pulled here): the base tag is
the official sglang image of the pinned release for torch's CUDA, every COPY source exists or is
the wheel ``scripts/build_wheel.sh`` writes, that wheel is what gets installed, the entry point
is the serve script with a health check, and the commands the image and ``serve-qwen36.sh`` run
parse with sglang's launcher parser (our flags included) and ask for DDTREE."""

from __future__ import annotations

import argparse
import json
import re
import shlex
import subprocess
import tomllib
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = ROOT / "docker" / "Dockerfile"
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())


def _image_release() -> str:
    """The sglang release the image is built on: the measured one (compat/releases.py), which
    the pyproject's dependency range admits."""
    from packaging.specifiers import SpecifierSet

    from sglang_ddtree.compat.releases import MEASURED_RELEASE

    (dep,) = [d for d in PYPROJECT["project"]["dependencies"] if d.startswith("sglang")]
    assert MEASURED_RELEASE in SpecifierSet(dep[len("sglang"):]), dep
    return MEASURED_RELEASE


def _instructions():
    """Dockerfile instructions as (KEYWORD, argument text), continuation lines joined."""
    text = re.sub(r"\\\n", " ", DOCKERFILE.read_text())
    out = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            kw, _, rest = line.partition(" ")
            out.append((kw.upper(), rest.strip()))
    return out


def _wheel_name() -> str:
    return f"sglang_ddtree-{PYPROJECT['project']['version']}-cp312-cp312-linux_x86_64.whl"


def test_base_image_is_the_pinned_sglang_release_for_torchs_cuda():
    (base,) = [arg for kw, arg in _instructions() if kw == "FROM"]
    cuda = torch.version.cuda
    assert cuda is not None, "the pinned torch is a CUDA build"
    assert base == f"lmsysorg/sglang:v{_image_release()}-cu{cuda.replace('.', '')}", base


def test_every_copy_source_exists_and_the_copied_wheel_is_installed():
    copies = [shlex.split(arg) for kw, arg in _instructions() if kw == "COPY"]
    assert copies
    wheel_dest = None
    for args in copies:
        *sources, dest = args
        for src in sources:
            if src.endswith(".whl"):
                # Built, not checked in: exactly the wheel build_wheel.sh writes to dist/.
                assert src == f"dist/{_wheel_name()}", src
                assert 'OUT=${1:-dist}' in (ROOT / "scripts" / "build_wheel.sh").read_text()
                wheel_dest = dest.rstrip("/") + "/" + Path(src).name
            else:
                assert (ROOT / src).exists(), src
    assert wheel_dest is not None, "the image must install our wheel"
    runs = " ".join(arg for kw, arg in _instructions() if kw == "RUN")
    assert f"pip install --no-deps --no-cache-dir {wheel_dest}" in runs, runs
    assert f"sglang.__version__ == '{_image_release()}'" in runs


def test_entry_point_and_health_check():
    ins = dict((kw, arg) for kw, arg in _instructions() if kw in ("ENTRYPOINT", "CMD", "HEALTHCHECK", "EXPOSE"))
    assert json.loads(ins["ENTRYPOINT"]) == ["sglang-ddtree-serve"]
    assert "COPY docker/serve.sh /usr/local/bin/sglang-ddtree-serve" in DOCKERFILE.read_text()
    assert ins["EXPOSE"] == "30000" and "http://127.0.0.1:30000/health" in ins["HEALTHCHECK"]


@pytest.fixture(scope="module")
def launcher_parser():
    from sglang.srt.plugins import load_plugins

    load_plugins()  # as sglang's launcher does: our ServerArgs with the DDTREE flags
    import sglang.srt.server_args as sa

    p = argparse.ArgumentParser(exit_on_error=False)
    sa.ServerArgs.add_cli_args(p)
    return p


def _launch_flags(cmdline: str) -> list:
    argv = shlex.split(cmdline)
    assert argv[:3] == ["python3", "-m", "sglang.launch_server"], argv
    return argv[3:]


def _serve(*args) -> str:
    r = subprocess.run(["bash", str(ROOT / "docker" / "serve.sh"), "--print", *args], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return r.stdout


def test_the_images_default_command_serves_ddtree(launcher_parser):
    (cmd,) = [json.loads(arg) for kw, arg in _instructions() if kw == "CMD"]
    ns = launcher_parser.parse_args(_launch_flags(_serve(*cmd)))
    assert ns.speculative_algorithm == "DDTREE"
    assert ns.model_path == "/models/target" and ns.speculative_draft_model_path == "/models/drafter"
    assert ns.host == "0.0.0.0" and ns.port == 30000 and ns.tp_size == 1


def test_serve_qwen36_replicas_parse_and_cover_the_gpus(launcher_parser, tmp_path):
    table = tmp_path / "step_cost.json"
    table.write_text("{}")
    r = subprocess.run(["bash", str(ROOT / "docker" / "serve-qwen36.sh"), "--target", "/data/qwen36", "--draft",
                        "/data/dflash", "--tp", "2", "--replicas", "4", "--step-cost", str(table), "--print",
                        "--", "--mem-fraction-static", "0.85"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    runs = [shlex.split(line) for line in r.stdout.splitlines()]
    assert len(runs) == 4
    devices, ports = [], []
    for run in runs:
        image = run.index("sglang-ddtree:0.1.0.dev0")
        devices.append(run[run.index("--gpus") + 1])
        ports.append(run[run.index("-p") + 1])
        assert f"{table}:/config/step_cost.json:ro" in run
        ns = launcher_parser.parse_args(_launch_flags(_serve(*run[image + 1:])))
        assert ns.tp_size == 2 and ns.speculative_algorithm == "DDTREE"
        assert ns.speculative_ddtree_budget == "auto" and ns.speculative_ddtree_step_cost == "/config/step_cost.json"
        assert ns.mem_fraction_static == 0.85
    assert devices == ['"device=0,1"', '"device=2,3"', '"device=4,5"', '"device=6,7"']
    assert ports == ["30000:30000", "30001:30000", "30002:30000", "30003:30000"]
    bad = subprocess.run(["bash", str(ROOT / "docker" / "serve-qwen36.sh"), "--target", "t", "--draft", "d",
                          "--tp", "4", "--replicas", "3", "--print"], capture_output=True, text=True)
    assert bad.returncode == 2 and "does not fit 8 GPUs" in bad.stderr
