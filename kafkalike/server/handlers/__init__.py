"""One module per API key; each registers itself with ``registry.handles``."""
