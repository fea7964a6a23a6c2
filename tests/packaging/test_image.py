"""The Dockerfile and the kind end-to-end script, checked where no Docker engine runs."""

from __future__ import annotations

import pathlib
import re
import shutil
import subprocess

ROOT = pathlib.Path(__file__).resolve().parents[2]


def test_dockerfile_is_multi_stage_pinned_and_non_root() -> None:
    text = (ROOT / "Dockerfile").read_text()
    stages = re.findall(r"^FROM (\S+)", text, re.M)
    assert len(stages) == 2 and "AS build" in text
    base = re.search(r"^ARG BASE=(\S+)$", text, re.M)
    assert base and re.fullmatch(r"python:\d+\.\d+\.\d+-slim-\w+", base.group(1))  # an exact version, not latest
    users = re.findall(r"^USER (\S+)$", text, re.M)
    assert users == ["65532:65532"]  # the uid the chart's securityContext expects
    assert "65532" in (ROOT / "helm" / "netaware" / "templates" / "_helpers.tpl").read_text()
    assert re.search(r'^ENTRYPOINT \["netaware"\]$', text, re.M)


def test_image_dependencies_are_locked_with_hashes_and_match_the_package() -> None:
    """Every runtime dependency of pyproject.toml is in requirements/image.lock, at a version inside the
    package's range, with hashes; the Dockerfile installs from it with --require-hashes."""
    import tomllib

    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    lock = (ROOT / "requirements" / "image.lock").read_text()
    entries = re.findall(r"^([A-Za-z0-9_.-]+)==(\S+) \\$", lock, re.M)
    pinned = {canonicalize_name(name): version for name, version in entries}
    blocks = re.split(r"\n(?=[A-Za-z0-9_.-]+==)", lock.split("\n", 4)[-1])
    assert all("--hash=sha256:" in block for block in blocks if "==" in block)
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    for text in declared:
        requirement = Requirement(text)
        name = canonicalize_name(requirement.name)
        assert name in pinned, f"{name} is not locked"
        assert requirement.specifier.contains(pinned[name]), (name, pinned[name], str(requirement.specifier))
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert len(re.findall(r"pip (?:download|install) .*--require-hashes", dockerfile)) == 2
    assert "--no-deps" in dockerfile
    assert "@sha256:<digest>" in dockerfile  # how to pin the base image's digest is documented


def test_kind_e2e_script_parses_and_refuses_without_docker(tmp_path: pathlib.Path) -> None:
    script = ROOT / "hack" / "kind-e2e.sh"
    assert subprocess.run(["bash", "-n", str(script)], check=False).returncode == 0
    for tool in ("dirname",):  # a PATH with the shell's helpers and no docker
        found = shutil.which(tool)
        assert found
        (tmp_path / tool).symlink_to(found)
    done = subprocess.run(
        [str(shutil.which("bash")), str(script)],
        capture_output=True,
        text=True,
        check=False,
        env={"PATH": str(tmp_path)},
    )
    assert done.returncode == 2 and "docker is required" in done.stderr
