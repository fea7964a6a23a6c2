"""The in-process Kubernetes API emulator (tests and ``netaware demo``); needs the ``emulator`` extra."""

from operators.emulator.server import ApiEmulator

__all__ = ["ApiEmulator"]
