"""Read Kubernetes YAML/JSON as ``kubectl get -o yaml`` writes it into a ``Snapshot``.

Accepts files, folders (recursively, ``*.yaml``, ``*.yml``, ``*.json``), ``-`` for stdin,
multi-document YAML and ``kind: List``. Every error names the file, the document index
and the field path, on one line.
"""

from __future__ import annotations

import contextlib
import gc
import json
import pathlib
import sys
from collections.abc import Iterable, Iterator
from typing import Any, TextIO

import yaml

from operators.api.errors import FieldError
from operators.engine.cluster.snapshot import Snapshot, SnapshotBuilder

SUFFIXES = (".yaml", ".yml", ".json")
# libyaml's safe loader when PyYAML was built with it (its wheels are): 5x the pure-Python one on large dumps
SAFE_LOADER: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class LoadError(Exception):
    """A snapshot source that cannot be read; the message is one line naming file, document and field."""


def expand_paths(paths: Iterable[str]) -> Iterator[str]:
    """Files in the order given; folders expand to their YAML/JSON files, sorted, recursively."""
    for text in paths:
        if text == "-":
            yield text
            continue
        path = pathlib.Path(text)
        if path.is_dir():
            found = sorted(item for item in path.rglob("*") if item.is_file() and item.suffix in SUFFIXES)
            yield from (str(item) for item in found)
        elif path.is_file():
            yield text
        else:
            raise LoadError(f"{text}: no such file or directory")


def read_documents(name: str, stream: TextIO) -> Iterator[tuple[int, Any]]:
    """(document number, counted from 1, parsed document) for every non-empty document of one source."""
    text = stream.read()
    if name.endswith(".json") or text.lstrip().startswith(("{", "[")):
        try:
            document = json.loads(text)
        except json.JSONDecodeError as error:
            if name.endswith(".json"):
                raise LoadError(
                    f"{name}: not valid JSON: {error.msg} (line {error.lineno}, column {error.colno})"
                ) from None
        except RecursionError:
            raise LoadError(f"{name}: nested too deeply to be a Kubernetes object") from None
        except ValueError as error:  # e.g. an integer beyond Python's int-string conversion limit
            raise LoadError(f"{name}: not valid JSON: {str(error).splitlines()[0][:200]}") from None
        else:
            yield 1, document
            return
    try:
        for index, document in enumerate(yaml.load_all(text, Loader=SAFE_LOADER), start=1):
            if document is not None:
                yield index, document
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark is not None else ""
        problem = getattr(error, "problem", None) or str(error).splitlines()[0]
        raise LoadError(f"{name}: not valid YAML: {problem}{where}") from None
    except RecursionError:
        raise LoadError(f"{name}: nested too deeply to be a Kubernetes object") from None
    except (ValueError, TypeError, OverflowError) as error:  # a scalar the YAML constructor cannot build
        raise LoadError(f"{name}: not valid YAML: {str(error).splitlines()[0][:200]}") from None


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """The cyclic garbage collector off while a dump is read: parsing allocates millions of containers (none in a
    cycle), and the collections they set off walk everything parsed so far — two thirds of libyaml's time on a
    20k-node dump."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def load_snapshot(paths: Iterable[str], stdin: TextIO | None = None) -> Snapshot:
    """Load every object of every source into one snapshot."""
    with collector_paused():
        return _load_snapshot(paths, stdin)


def _load_snapshot(paths: Iterable[str], stdin: TextIO | None) -> Snapshot:
    builder = SnapshotBuilder()
    for name in expand_paths(paths):
        if name == "-":
            documents = list(read_documents("<stdin>", stdin or sys.stdin))
            label = "<stdin>"
        else:
            try:
                with open(name, encoding="utf-8") as handle:
                    documents = list(read_documents(name, handle))
            except OSError as error:
                raise LoadError(f"{name}: cannot read: {error.strerror}") from None
            except UnicodeDecodeError:
                raise LoadError(f"{name}: not a UTF-8 text file") from None
            label = name
        for index, document in documents:
            where = f"{label}: document {index}"
            try:
                builder.add(document, where)
            except FieldError as error:
                raise LoadError(f"{where}: {error}") from None
            except RecursionError:
                raise LoadError(f"{where}: nested too deeply to be a Kubernetes object") from None
            except (TypeError, AttributeError, ValueError, OverflowError) as error:  # a shape no reader expected
                raise LoadError(f"{where}: not a Kubernetes object of its kind: {error}") from None
    return builder.build()
