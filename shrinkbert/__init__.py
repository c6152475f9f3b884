"""The front door: the `shrinkbert` CLI and the recipe runner that chains stages."""
