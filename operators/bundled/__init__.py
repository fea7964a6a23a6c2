"""What ships with netaware as data, one copy each, mapped onto the repository's folders by the packaging
(``pyproject.toml``): ``crds`` (the CustomResourceDefinitions, ``crds/``), ``examples`` (the example cluster,
``hack/examples/``) and ``configs`` (the default scheduler and descheduler configurations, ``hack/configs/``).
Read with :func:`folder`, from a wheel or a checkout alike."""

from __future__ import annotations

import importlib.resources
from importlib.resources.abc import Traversable

FOLDERS = ("crds", "examples", "configs")


def folder(name: str) -> Traversable:
    """The bundled folder ``name`` (one of :data:`FOLDERS`)."""
    if name not in FOLDERS:
        raise ValueError(f"no bundled folder {name!r}; there are {', '.join(FOLDERS)}")
    return importlib.resources.files(f"{__name__}.{name}")


def yaml_files(name: str) -> list[Traversable]:
    """The YAML files of the bundled folder ``name``, by file name."""
    return sorted((item for item in folder(name).iterdir() if item.name.endswith(".yaml")), key=lambda i: i.name)
