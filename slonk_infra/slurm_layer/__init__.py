"""Pulumi component resources: thin shells that map the pure renderers' output onto resources."""
