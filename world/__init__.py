"""The tiny world: synthetic families where the truth is known, and external loaders.

Described in docs/methods/shared.md (The tiny world and its roles); schema in world/README.md.
"""

from world.generate import FAMILIES, generate_world

__all__ = ["FAMILIES", "generate_world"]
