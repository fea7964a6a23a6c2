"""Support code the tests share (builders of cluster objects); no test module imports another."""
