"""The merge patch a status write sends: applied to what was there, it gives exactly the new status (RFC 7386),
removed keys included — a merge patch of the new status alone would keep them."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from operators.emulator.patching import merge_patch
from operators.kube import merge_patch_between

leaves = st.one_of(st.integers(-5, 5), st.text(max_size=3), st.lists(st.integers(0, 3), max_size=3))
documents = st.recursive(
    st.dictionaries(st.sampled_from("abcde"), leaves, max_size=4),
    lambda children: st.dictionaries(st.sampled_from("abcde"), st.one_of(leaves, children), max_size=4),
    max_leaves=12,
)


def test_by_hand() -> None:
    old = {"networkQOS": {"classes": {"lsr": {"ingressLimit": "1G"}, "be": {"ingressLimit": "500M"}}, "total": "1G"}}
    new = {"networkQOS": {"classes": {"lsr": {"ingressLimit": "2G"}}, "total": "1G"}}
    assert merge_patch_between(old, new) == {"networkQOS": {"classes": {"lsr": {"ingressLimit": "2G"}, "be": None}}}
    assert merge_patch_between({"a": [1, 2]}, {"a": [1]}) == {"a": [1]}  # lists are replaced whole
    assert merge_patch_between({"a": 1}, {"a": 1}) == {}


# no deadline: under the whole suite's load it failed once and its example passed when run again (Hypothesis keeps
# failing examples and replays them first), the 200 ms per example being the only timing in it
@settings(deadline=None)
@given(old=documents, new=documents)
def test_applied_to_the_old_status_it_gives_the_new(old: dict[str, Any], new: dict[str, Any]) -> None:
    assert merge_patch(old, merge_patch_between(old, new)) == new
