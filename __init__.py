"""Particle Rigid Bodies: Blender extension entry point (see blender_manifest.toml).

Blender imports this package as ``bl_ext.<repository>.particle_rigid_bodies``; everything lives in
``addon/`` (``addon.core`` is bpy-free, ``addon.blender`` is the add-on itself).
"""


def register():
    from .addon import blender

    blender.register()


def unregister():
    from .addon import blender

    blender.unregister()
