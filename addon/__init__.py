"""Particle rigid bodies for Blender.

``addon.core`` is the simulation core and imports only numpy and pyopencl; ``addon.blender`` is the
Blender layer (bpy). Importing this package imports neither, so the core is usable without Blender.
"""
