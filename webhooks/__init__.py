"""The bandwidth admission webhook (a thin aiohttp shell over :mod:`operators.engine`)."""
