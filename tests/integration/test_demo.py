"""`netaware demo`: the whole suite against the emulator converges and shows every component."""

from __future__ import annotations

import pytest

from operators.demo import run_demo

pytestmark = pytest.mark.integration


async def test_demo_converges_and_shows_every_component() -> None:
    lines: list[str] = []
    code = await run_demo(lines.append, within=60)
    text = "\n".join(lines)
    assert code == 0, text
    for section in (
        "== AppGroups (topology order)",
        "== NetworkTopology costs",
        "== NodeSLO network QoS",
        "== pods through the webhook and the extender",
        "== AppGroup placements",
        "== NetworkTopology allocated bandwidth",
        "== one descheduling cycle (dry run)",
    ):
        assert section in text
    assert "a1 (KahnSort): p1 -> p2 -> p3" in text
    assert "net-topology-test NetperfCosts zone: Z1->Z2=5" in text
    assert "n-5: total 10G" in text
    assert "'kubernetes.io/egress-request': '100Mi'" in text  # the webhook's patch, from the AppGroup
    assert "a1-p1-demo-0@n-2" in text, text  # bound where the extender scored best
    assert text.endswith("every component converged")


async def test_demo_reports_what_did_not_converge(monkeypatch: pytest.MonkeyPatch) -> None:
    from operators import demo

    monkeypatch.setattr(demo, "CONTROLLERS", ("appgroup",))  # no NetworkTopology controller: costs never come
    lines: list[str] = []
    assert await run_demo(lines.append, within=2) == 1
    assert lines[-1] == "\nNOT CONVERGED: NetworkTopology costs: not reached within 2s"
