"""The suite's simplest kubectl calls, answered in process (hack/control_plane/rest.py), print what kubectl prints
for them against the real API server; every other form, and every call that fails, is kubectl's own."""

from __future__ import annotations

import json
import subprocess
from typing import Any

import pytest

from hack.control_plane.cluster import ControlPlane
from hack.control_plane.rest import Rest
from tests.support.e2e import create_namespace, delete_namespace, eventually, example

pytestmark = pytest.mark.e2e

NAMESPACE = "in-process-kubectl"


def by_kubectl(cluster: ControlPlane, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(cluster.bin_dir / "kubectl"), f"--kubeconfig={cluster.kubeconfig}", *args],
                          capture_output=True, text=True, check=False, timeout=60)  # fmt: skip


def test_the_simplest_reads_print_what_kubectl_prints(cluster: ControlPlane) -> None:
    create_namespace(cluster, NAMESPACE)
    try:
        objects: list[dict[str, Any]] = [
            {"apiVersion": "v1", "kind": "ConfigMap",
             "metadata": {"name": f"c{n}", "namespace": NAMESPACE, "labels": {"tier": "a" if n < 2 else "b"}},
             "data": {"n": str(n)}}
            for n in range(3)
        ]  # fmt: skip
        (group,) = example("appgroup-a1.yaml")  # read afresh: changing it changes no one else's
        group["metadata"]["namespace"] = NAMESPACE
        cluster.kubectl("apply", "-f", "-", stdin=json.dumps({"apiVersion": "v1", "kind": "List",
                                                               "items": [*objects, group]}))  # fmt: skip
        # the controller that publishes kube-root-ca.crt in every namespace does it in its own time: there first,
        # so that both answers list the same ConfigMaps
        root_ca = ("get", "cm", "kube-root-ca.crt", "-n", NAMESPACE, "-o", "json")
        eventually(lambda: by_kubectl(cluster, *root_ca).returncode == 0, 60, "kube-root-ca.crt published")
        answers = Rest(cluster.server, cluster.admin_context())
        forms = [
            ("get", "configmaps", "-n", NAMESPACE, "-o", "json"),
            ("get", "cm", "c1", "-n", NAMESPACE, "-o", "json"),  # a short name, one object
            ("get", "configmap", "-n", NAMESPACE, "-l", "tier=a", "-o", "json"),  # a selector
            ("get", "-l", "tier in (b)", "cm", "-A", "-o", "json"),  # every namespace, flags first
            ("get", "appgroup", "-n", NAMESPACE, "-o", "json"),  # a CRD: its group's version and kind
            ("get", "ag", group["metadata"]["name"], "-n", NAMESPACE, "-o", "json"),
            ("get", "crd", "appgroups.appgroup.diktyo.x-k8s.io", "-o", "json"),  # cluster-scoped, another group
            ("get", "namespace", NAMESPACE, "-o", "json"),
            ("get", "--raw", f"/api/v1/namespaces/{NAMESPACE}/configmaps/c2"),
        ]
        for args in forms:
            mine, theirs = answers.answer(args), by_kubectl(cluster, *args)
            assert mine is not None, args
            assert (mine.returncode, theirs.returncode) == (0, 0), (args, theirs.stderr)
            assert json.loads(mine.stdout) == json.loads(theirs.stdout), args
        listed = json.loads(answers.answer(forms[2]).stdout)  # type: ignore[union-attr]
        assert [item["metadata"]["name"] for item in listed["items"]] == ["c0", "c1"]  # not only equal: right
        assert {(item["apiVersion"], item["kind"]) for item in listed["items"]} == {("v1", "ConfigMap")}

        # left to kubectl: the forms it prints otherwise, and whatever does not succeed
        for args in (("get", "cm", "-n", NAMESPACE), ("get", "cm", "c9", "-n", NAMESPACE, "-o", "json"),
                     ("get", "no-such-kind", "-o", "json"), ("get", "--raw", "/api/v1/no-such")):  # fmt: skip
            assert answers.answer(args) is None, args
        missing = cluster.kubectl("get", "cm", "c9", "-n", NAMESPACE, "-o", "json", check=False)
        assert missing.returncode == 1 and "NotFound" in missing.stderr  # kubectl's own error

        # ControlPlane.kubectl answers these itself: no kubectl process is started for them
        def no_process(*args: Any, **kwargs: Any) -> Any:
            raise AssertionError(f"a process started: {args}")

        with pytest.MonkeyPatch.context() as patched:
            patched.setattr(subprocess, "run", no_process)
            for args in forms:
                assert json.loads(cluster.kubectl(*args).stdout) == json.loads(answers.answer(args).stdout), args  # type: ignore[union-attr]

        deleted = answers.answer(("delete", "--raw", f"/api/v1/namespaces/{NAMESPACE}/configmaps/c0"))
        assert deleted is not None and json.loads(deleted.stdout)["kind"] in ("ConfigMap", "Status")
        left = by_kubectl(cluster, "get", "cm", "-n", NAMESPACE, "-l", "tier", "-o", "json")
        assert [item["metadata"]["name"] for item in json.loads(left.stdout)["items"]] == ["c1", "c2"]
    finally:
        delete_namespace(cluster, NAMESPACE)
