"""netaware: a network-aware scheduling stack for Kubernetes.

The pure core lives in :mod:`operators.api` (models, quantities, keys) and
:mod:`operators.engine` (decisions as functions of a cluster snapshot); every
other package is a thin shell that moves data in and out of it.
"""

__version__ = "0.2.0"
