"""What `pip install netaware` gives a user, outside the checkout: the wheel carries the example cluster, the
configurations and the CRDs, `netaware demo` converges from it, and without the emulator extra it says which extra
to install."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys
import zipfile

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]


def run(*args: str | pathlib.Path, cwd: pathlib.Path) -> subprocess.CompletedProcess[str]:
    env = {key: value for key, value in os.environ.items() if key not in ("PYTHONPATH", "VIRTUAL_ENV")}
    return subprocess.run(
        [str(a) for a in args], check=False, cwd=cwd, env=env, capture_output=True, text=True, timeout=300
    )


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> pathlib.Path:
    out = tmp_path_factory.mktemp("dist")
    built = run(sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", out, ROOT, cwd=out)
    assert built.returncode == 0, built.stderr
    (found,) = out.glob("netaware-*.whl")
    return found


def test_the_wheel_carries_the_example_cluster_the_configurations_and_the_crds(wheel: pathlib.Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    for folder, source in (("crds", ROOT / "crds"), ("examples", ROOT / "hack" / "examples")):
        for path in source.glob("*.yaml"):
            assert f"operators/bundled/{folder}/{path.name}" in names
    assert {
        "operators/bundled/configs/scheduler-config.yaml",
        "operators/bundled/configs/descheduler-policy.yaml",
    } <= names
    assert not any(name.startswith(("hack/", "crds/", "tests/")) for name in names)


@pytest.mark.timeout(900)
def test_netaware_demo_converges_from_the_installed_wheel(wheel: pathlib.Path, tmp_path: pathlib.Path) -> None:
    made = run(sys.executable, "-m", "venv", tmp_path / "venv", cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    pip, netaware = tmp_path / "venv" / "bin" / "pip", tmp_path / "venv" / "bin" / "netaware"
    installed = run(pip, "install", "-q", wheel, cwd=tmp_path)
    assert installed.returncode == 0, installed.stderr
    bare = run(netaware, "demo", cwd=tmp_path)
    assert bare.returncode != 0
    assert "needs the emulator extra: pip install 'netaware[emulator]'" in bare.stderr
    assert "Traceback" not in bare.stderr + bare.stdout
    extra = run(pip, "install", "-q", f"{wheel}[emulator]", cwd=tmp_path)
    assert extra.returncode == 0, extra.stderr
    demo = run(netaware, "demo", cwd=tmp_path)
    assert demo.returncode == 0, demo.stdout[-2000:] + demo.stderr[-2000:]
    assert "every component converged" in demo.stdout
