"""What a bake runs with (``BakeOptions``): the scene's settings read once into the core's settings,
with the CLI's or a caller's overrides on top; and BakeError, a reason the bake cannot run."""
from __future__ import annotations

import math
from dataclasses import dataclass, field, fields

from . import rigid_body_world
from ..core.settings import ConversionSettings, FrameSettings, SimulationSettings
from .properties import BAKE_MODE_ITEMS, contact_geometry_gone

BAKE_MODES = tuple(identifier for identifier, _label, _description in BAKE_MODE_ITEMS)


class BakeError(Exception):
    """A user-facing reason the bake cannot run (no objects, bad settings, no OpenCL)."""


def manual_stiffness(s) -> bool:
    """Whether the scene's Stiffness Target applies: Stiffness set to Manual, or a target set in a
    file saved before Stiffness existed (its mode was never set), which then keeps its meaning."""
    if s.stiffness_mode == "MANUAL":
        return True
    return not s.is_property_set("stiffness_mode") and s.is_property_set("target_penetration")


def _scene_values(scene) -> dict:
    """The scene's add-on settings (``Scene.prb_settings``) by the names of the core settings' fields
    they fill (the frames and gravity alone where the add-on has none)."""
    values = dict(frame_start=scene.frame_start, frame_end=scene.frame_end, gravity=scene_gravity(scene))
    if rigid_body_world.is_setup(scene):  # its gravity, time scale, cache range and Bullet's combining
        values.update(rigid_body_world.world_values(scene))
    s = getattr(scene, "prb_settings", None)
    if s is None:
        return values
    if not s.use_scene_frame_range:
        values.update(frame_start=s.frame_start, frame_end=s.frame_end)
    values.update(
        frame_step=s.frame_step,
        substeps=s.substeps if s.substeps_mode == "MANUAL" else None,
        radius=s.particle_radius if s.radius_mode == "MANUAL" else None,
        max_particles=s.max_particles,
        target_penetration=s.target_penetration if manual_stiffness(s) else None,
        contact_geometry=s.contact_geometry,
        sleep_speed=s.sleep_speed if s.use_sleep else 0.0,
        sleep_time=s.sleep_time,
        device=s.device if s.device not in ("", "AUTO") else None,
        bake_mode=s.bake_mode,
        cache_folder=s.cache_folder,
    )
    return values


@dataclass
class BakeOptions:
    """What a bake runs with: the core's settings, each of which checks its own values, and how the
    job runs and writes the result."""

    frames: FrameSettings = field(default_factory=FrameSettings)
    conversion: ConversionSettings = field(default_factory=ConversionSettings)
    simulation: SimulationSettings = field(default_factory=SimulationSettings)
    backend: str = "opencl"
    bake_mode: str = BAKE_MODES[0]  # or "INSTANCES" (bake_instances.py)
    cache_folder: str | None = None  # instances: where the point cache goes; None: bake_instances' default
    # simulated seconds per second of the scene's frames (the Rigid Body world's Speed)
    time_scale: float = 1.0

    def __post_init__(self):
        if self.bake_mode not in BAKE_MODES:
            raise BakeError(f"bake mode must be one of {', '.join(BAKE_MODES)}, got {self.bake_mode!r}")
        if not (self.time_scale > 0 and math.isfinite(self.time_scale)):
            raise BakeError(f"the Rigid Body world's Speed (time scale) must be a finite number more than 0, got "
                            f"{self.time_scale:g}")

    @classmethod
    def from_scene(cls, scene, **overrides) -> "BakeOptions":
        """The scene's settings with ``overrides`` (those not None) on top, each given by the name of
        the field it sets (``frame_step``, ``radius``, ``contact_geometry``, ``bake_mode``...). A value
        the core refuses raises BakeError with the core's message."""
        values = _scene_values(scene)
        values.update((name, value) for name, value in overrides.items() if value is not None)
        if values.get("contact_geometry") == "":  # a Contacts choice this version does not have
            raise BakeError(contact_geometry_gone(scene.prb_settings))

        def take(kind):
            names = {f.name for f in fields(kind)}
            return kind(**{name: values.pop(name) for name in list(values) if name in names})

        try:
            settings = dict(frames=take(FrameSettings), conversion=take(ConversionSettings),
                            simulation=take(SimulationSettings))
        except ValueError as exc:
            raise BakeError(str(exc)) from exc
        return cls(**settings, **values)


def scene_gravity(scene) -> tuple:
    return tuple(scene.gravity) if scene.use_gravity else (0.0, 0.0, 0.0)


def frame_rate(scene) -> float:
    return scene.render.fps / scene.render.fps_base


def read_world(scene):
    """The scene's Rigid Body world as the bake's setup (rigid_body_world.read_world), or None where the
    add-on's roles apply; a setup it cannot bake raises BakeError naming the object."""
    try:
        return rigid_body_world.read_world(scene)
    except rigid_body_world.WorldRefused as exc:
        raise BakeError(str(exc)) from exc
