"""Support code the tests share (object builders, polling, the real kernel's world); no test module imports another
test module."""
