"""The ``netaware`` command line: thin, every decision comes from :mod:`operators.engine`."""
