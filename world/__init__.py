"""The tiny world (SPEC 11): synthetic families where the truth is known, and external loaders."""

from world.generate import FAMILIES, generate_world

__all__ = ["FAMILIES", "generate_world"]
