"""The objects a bake takes (``pick_objects``), the panel's estimate of what they need, and what
refuses them before anything is converted: a transform that is not finite, a constraint a keyframe
bake cannot undo, an instancer in a keyframe bake."""
from __future__ import annotations

import numpy as np

from . import instancers
from ..core.device_buffers import estimate_device_memory
from ..core.settings import ROLE_DYNAMIC, ROLE_FOLLOW_SELECTION, ROLE_IGNORED, ROLE_STATIC
from .bake_options import BakeError, BakeOptions


def pick_objects(context, selected=None, world=None):
    """(dynamic, static) objects for Simulate & Bake.

    With the scene's Rigid Body world (``world``, read_world): its ACTIVE objects and its PASSIVE ones.
    Else dynamic: objects whose role is Dynamic, plus selected mesh objects whose role is Follow Selection;
    static: objects whose role is Static Collider. Ignored objects never take part.
    """
    if world is not None:
        return list(world.active), list(world.passive)
    scene = context.scene
    if selected is None:
        selected = list(getattr(context, "selected_objects", None) or [])
    objects = list(scene.objects)
    dynamic = [o for o in objects if o.prb.role == ROLE_DYNAMIC]
    seen = set(o.name for o in dynamic)
    for o in selected:
        if o.type == "MESH" and o.prb.role == ROLE_FOLLOW_SELECTION and o.name not in seen:
            dynamic.append(o)
            seen.add(o.name)
    static = [o for o in objects if o.prb.role == ROLE_STATIC and o.name not in seen]
    return dynamic, static


def estimate(context, dynamic, options: BakeOptions | None = None) -> dict:
    """Cheap estimate for the panel: bodies, particles (from bounding boxes), memory in bytes.

    An instancer (instancers.py) counts as its instances, each with its mesh's bounding box."""
    radius = options.conversion.radius if options else None
    counts, volumes = [], []
    per_instancer = {}
    if dynamic and any(instancers.may_instance(o) for o in dynamic):
        per_instancer = instancers.instance_volumes(context.evaluated_depsgraph_get(), dynamic)
    for o in dynamic:
        if o.name in per_instancer:
            for count, volume in per_instancer[o.name]:
                counts.append(count)
                volumes.append(volume)
            continue
        dims = np.asarray(o.dimensions, dtype=np.float64)
        counts.append(1)
        volumes.append(float(np.prod(np.maximum(dims, 1e-9))))
    counts, volumes = np.array(counts, dtype=np.int64), np.array(volumes, dtype=np.float64)
    bodies = int(counts.sum())
    instanced = {name: sum(count for count, _v in entries) for name, entries in per_instancer.items()}
    # a body whose size is NaN or infinite (its transform is: the bake refuses it, transform_problem)
    # counts as a body without particles
    counts, volumes = counts[np.isfinite(volumes)], volumes[np.isfinite(volumes)]
    if not len(volumes):
        return dict(bodies=bodies, particles=0, memory=0, radius=radius, instancers=instanced)
    if radius is None:
        # same spirit as the automatic radius: the smallest body about 3 particles across
        radius = max(volumes.min() ** (1.0 / 3.0) / 6.0, 1e-4)
    particles = int((counts * np.maximum(1.0, volumes / (2 * radius) ** 3)).sum())
    memory = int(estimate_device_memory(particles, bodies, options.simulation.contact_geometry if options else None))
    return dict(bodies=bodies, particles=particles, memory=memory, radius=radius, instancers=instanced)


def transform_problem(objects) -> str | None:
    """The first of ``objects`` taking part (not Ignored) whose transform holds a NaN or infinity, as
    the line that refuses the bake (scene_objects.transform_problem); None when every one is finite."""
    from .scene_objects import transform_problem as problem_of

    for obj in objects:
        if obj.prb.role != ROLE_IGNORED:
            problem = problem_of(obj)
            if problem:
                return problem
    return None


def refuse_instancers(context, dynamic) -> None:
    """Keyframes need an object per body: instancers bake to instances only (why: instancers.py)."""
    candidates = [o for o in dynamic if instancers.may_instance(o)]
    if not candidates:
        return
    counts = instancers.count_instances(context.evaluated_depsgraph_get(), candidates)
    if counts:
        raise BakeError(instancers_message(counts))


def instancers_message(counts: dict) -> str:
    names = ", ".join(f"{name} ({count:,} instances)" for name, count in counts.items())
    return (f"instancers bake to Instances only: {names}. Keyframes need an object per body: set Bake To: "
            "Instances")


def format_bytes(n: int) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1024 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024.0
    return f"{n:.1f} GB"


# Keys go on the object's own channels and its constraints act on top of them afterwards. That is
# undone exactly only when the constraint's result is a fixed matrix times the channels' matrix: a Child
# Of using every channel, to a target that does not move (local_channels then writes the keys in the
# space the constraint puts them in). Any other constraint depends on the channels themselves (Copy
# Rotation replaces the rotation, Limit Location clamps it, Track To turns the body), so the baked motion
# would not be the simulated one.
_CHILD_OF_CHANNELS = tuple(f"use_{kind}_{axis}" for kind in ("location", "rotation", "scale") for axis in "xyz")


def constraint_problems(obj) -> list[str]:
    problems = []
    for con in obj.constraints:
        if con.mute or con.influence == 0.0:
            continue
        what = f"{obj.name}: {con.type.replace('_', ' ').title()} constraint '{con.name}'"
        if con.type != "CHILD_OF":
            problems.append(what)
        elif con.influence != 1.0 or not all(getattr(con, name, True) for name in _CHILD_OF_CHANNELS):
            problems.append(f"{what} (not every channel, or influence below 1)")
        elif con.target is not None and animated_chain(con.target):
            problems.append(f"{what} (its target moves)")
    return problems


def animated_chain(obj) -> bool:
    while obj is not None:
        ad = obj.animation_data
        if ad and (ad.action is not None or len(ad.drivers) or len(ad.nla_tracks)):
            return True
        if len(obj.constraints):
            return True
        obj = obj.parent
    return False
