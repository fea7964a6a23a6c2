"""Data, not code: bundled in the wheel as a package of netaware (see operators/bundled)."""
