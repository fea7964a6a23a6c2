"""The extender protocol's two large bodies at the size of large clusters, without a Python object per node.

kube-scheduler sends the same ``NodeNames`` list pod after pod and reads back a ``HostPriorityList`` with an
entry per node: at 20,000 nodes, parsing the one and building the other cost more than deciding.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import orjson


@dataclass
class NameListMemo:
    """The last ``NodeNames`` list as it ends an ExtenderArgs body (``,"NodeNames":[...]}``, as Go's encoder writes
    it) and as parsed: a body that ends with it is parsed without it, and its names are the very list object of
    the first body (which makes every later comparison an identity check)."""

    suffix: bytes = b""
    names: list[str] | None = None

    def split(self, body: bytes) -> tuple[bytes, list[str]] | None:
        """The body without the held list (a JSON object again), and the list; None if it does not end with it.

        The split is exact: a valid JSON object with at least one member followed by ``,"NodeNames":<list>}`` is
        that object with one more member, the last (which wins over an earlier key of the same name, as in a
        full parse). The caller checks the first part is such an object."""
        if self.names is None or not body.endswith(self.suffix):
            return None
        return body[: len(body) - len(self.suffix)] + b"}", self.names

    def learn(self, body: bytes, names: list[str]) -> None:
        """Hold ``names`` (checked, parsed from ``body``) if ``body`` ends with them as orjson encodes them."""
        suffix = b',"NodeNames":' + orjson.dumps(names) + b"}"
        if body.endswith(suffix):
            self.suffix, self.names = suffix, names


_SPACE, _ONE, _ZERO = ord(" "), ord("1"), ord("0")


class PriorityTemplate:
    """A ``HostPriorityList`` for a list of names, encoded once, with the score first in each entry and two
    characters wide (``{"Score": 7,"Host":"n-1"}``: JSON allows the space), so every score sits at a known
    offset and an answer is the template with 2 bytes per node written by numpy. Scores are 0..10 (the
    extender's scale)."""

    def __init__(self, names: list[str]) -> None:
        entries = [b'{"Score":00,"Host":' + orjson.dumps(name) + b"}" for name in names]
        text = b"[" + b",".join(entries) + b"]"
        starts = np.cumsum([1] + [len(entry) + 1 for entry in entries], dtype=np.intp)[: len(entries)]
        self._bytes: npt.NDArray[np.uint8] = np.frombuffer(text, dtype=np.uint8)
        self._tens: npt.NDArray[np.intp] = starts + len(b'{"Score":')
        self._ones: npt.NDArray[np.intp] = self._tens + 1

    def encode(self, scores: npt.NDArray[np.int64]) -> bytes:
        """The answer for one score per name, in the names' order."""
        answer = self._bytes.copy()
        answer[self._tens] = np.where(scores >= 10, _ONE, _SPACE)
        answer[self._ones] = _ZERO + scores % 10
        return answer.tobytes()
