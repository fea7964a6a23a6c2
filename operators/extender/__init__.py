"""The kube-scheduler extender: an aiohttp shell over :mod:`operators.engine.scheduling.schedule`."""
