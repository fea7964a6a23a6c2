"""One way to run a command for the control plane, the tests and the benchmarks: its output captured, a time limit,
optionally inside a network namespace, and a failure that says what failed."""

from __future__ import annotations

import subprocess


def sh(
    *command: str, check: bool = True, netns: str | None = None, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    """Run ``command`` (in network namespace ``netns`` when given: ``ip netns exec``) and return what it did;
    ``check``: a non-zero exit raises ``RuntimeError`` naming the command and its standard error."""
    argv = [*(("ip", "netns", "exec", netns) if netns else ()), *command]
    done = subprocess.run(argv, capture_output=True, text=True, check=False, timeout=timeout)
    if check and done.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)}: exit {done.returncode}: {done.stderr.strip() or done.stdout.strip()}")
    return done
