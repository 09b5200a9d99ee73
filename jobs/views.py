"""Job and node-operation pages."""
