"""`--log-format json`: one JSON object per line, UTC timestamps, tracebacks kept, the keys of the object a line is
about; every long-running command takes it."""

from __future__ import annotations

import json
import logging
import pathlib
import subprocess
import sys
import time
import urllib.request

import pytest
import yaml

from hack.control_plane.ports import free_port
from operators.logs import JsonFormatter


def test_json_lines() -> None:
    record = logging.LogRecord("netaware.run", logging.WARNING, __file__, 1, "lost %s", ("the lease",), None)
    record.created, record.msecs = 0.25, 250
    entry = json.loads(JsonFormatter().format(record))
    assert entry == {
        "ts": "1970-01-01T00:00:00.250Z",
        "level": "warning",
        "logger": "netaware.run",
        "msg": "lost the lease",
    }
    try:
        raise ValueError("boom")
    except ValueError:
        import sys

        failed = logging.LogRecord("x", logging.ERROR, __file__, 1, "failed", (), sys.exc_info())
    line = JsonFormatter().format(failed)
    assert "\n" not in line and "ValueError: boom" in json.loads(line)["error"]


def test_a_line_about_an_object_carries_its_keys_in_json_and_not_in_text() -> None:
    from operators.logs import TEXT_FORMAT, about

    record = logging.LogRecord("netaware.gates", logging.WARNING, __file__, 1, "pod %s: gate not removed", ("a/p",),
                               None)  # fmt: skip
    record.__dict__.update(about("Pod", "a", "p", node="n-1", appgroup=None))
    entry = json.loads(JsonFormatter().format(record))
    assert {key: entry[key] for key in ("kind", "namespace", "name", "node")} == {
        "kind": "Pod", "namespace": "a", "name": "p", "node": "n-1"}  # fmt: skip
    assert "appgroup" not in entry  # unknown keys left out, not null
    assert logging.Formatter(TEXT_FORMAT).format(record).endswith("netaware.gates: pod a/p: gate not removed")
    with pytest.raises(ValueError, match="not an object key"):
        about("Pod", "a", "p", colour="red")


@pytest.mark.parametrize("command", ["run", "webhook", "extender", "probe", "agent"])
def test_every_long_running_command_logs_json_when_told(command: str) -> None:
    from click.testing import CliRunner

    from operators.cli.main import cli

    done = CliRunner().invoke(cli, [command, "--help"])
    assert done.exit_code == 0 and "--log-format [text|json]" in done.output, done.output


def test_the_webhook_logs_a_broken_namespace_default_as_json_with_the_namespace(tmp_path: pathlib.Path) -> None:
    """The webhook process, as the chart runs it with logFormat json: its lines are JSON, and the line about a
    broken namespace default names the Namespace in fields of its own."""
    broken = {"netaware.io/default-egress-bandwidth": "lots"}
    namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "shop", "annotations": broken}}
    snapshot = tmp_path / "cluster.yaml"
    snapshot.write_text(yaml.safe_dump_all([namespace]))
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "operators.cli", "webhook", "--insecure", "--port", str(port), "-f", str(snapshot),
         "--log-format", "json"],
        stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        lines = read_until(process, "listening on")
        pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "shop"},
               "spec": {"containers": [{"name": "c", "image": "i"}]}}  # fmt: skip
        review = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                  "request": {"uid": "u", "operation": "CREATE", "namespace": "shop", "object": pod,
                              "kind": {"group": "", "version": "v1", "kind": "Pod"}}}  # fmt: skip
        request = urllib.request.Request(f"http://127.0.0.1:{port}/mutate-pods", json.dumps(review).encode(),
                                         {"Content-Type": "application/json"})  # fmt: skip
        with urllib.request.urlopen(request, timeout=10) as answer:
            assert json.loads(answer.read())["response"]["allowed"] is True
        lines += read_until(process, "shop")
    finally:
        process.terminate()
        process.wait(timeout=20)
    entries = [json.loads(line) for line in lines if line.strip()]  # every line is JSON
    (about_shop,) = [entry for entry in entries if entry.get("kind") == "Namespace"]
    assert (about_shop["name"], about_shop["level"]) == ("shop", "warning")
    assert "netaware.io/default-egress-bandwidth" in about_shop["msg"]


def read_until(process: subprocess.Popen[str], text: str, within: float = 30) -> list[str]:
    deadline = time.monotonic() + within
    lines: list[str] = []
    while time.monotonic() < deadline and process.stderr is not None:
        line = process.stderr.readline()
        if not line:
            break
        lines.append(line)
        if text in line:
            return lines
    raise AssertionError(f"{text!r} not logged: {lines}")
