"""kopf handlers: thin shells that read the API, call :mod:`operators.engine` and write the result."""
