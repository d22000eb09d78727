"""Our side of bench/destruction.py on a machine without Blender (the GPU machine has no bpy module):
the add-on converts the .blend where bpy is, and the core simulates the saved model where the GPU is.

    # here (bpy): the scene as the bake converts it, with the figures' bookkeeping
    PYTHONPATH=. .venv/bin/python bench/destruction.py --export-model out/destruction_2000.model.pkl
    PYTHONPATH=. .venv/bin/python bench/destruction.py --bricks-per-course 400 --export-model out/destruction_8000.model.pkl
    # the GPU machine (carry out/): the core alone, each frame timed, the same figures
    python bench/destruction.py --model out/destruction_2000.model.pkl --device gpu --out bench/results/destruction_2000_ours_h100.json

The file holds the core ``Model`` (bodies, particles, colliders, the Animated ball's path, the joints
once the conversion makes them), the simulation's settings, frame rate and substeps as the job chose
them, and which bodies are the bricks and which bricks each constraint glues. The figures are read
from the bodies' poses (centre of mass and principal frame) at the first and last frame: a brick's
centre of mass is its origin, so shifts and turns of glued pairs are the objects' own. Timing covers
the simulation only (``Simulation.frames``); conversion and keys stay on the machine with bpy
(``run_ours`` in bench/destruction.py times the whole bake there).
"""
from __future__ import annotations

import pickle
import time
from dataclasses import replace

import numpy as np

FORMAT = "destruction-model-1"


def export_model(blend: str, path: str, allow_unglued: bool) -> dict:
    """Convert ``blend`` as the add-on's bake does (its Rigid Body world, no roles) and save the model."""
    import bpy

    import addon.blender as addon_blender
    from addon.blender.bake_objects import pick_objects
    from addon.blender.bake_options import BakeOptions, read_world
    from addon.blender.job import BakeJob
    from bench.destruction import _release_frame, scene_parts

    bpy.ops.wm.open_mainfile(filepath=blend, load_ui=False)
    addon_blender.register()
    try:
        scene = bpy.context.scene
        bricks, ball, pairs = scene_parts(bpy, scene)
        world = read_world(scene)
        note = world.constraints_note()
        if note and not allow_unglued:
            raise SystemExit(f"export: {note}. Pass --allow-unglued to export the unglued wall anyway")
        dynamic, static = pick_objects(bpy.context, selected=[], world=world)
        options = BakeOptions.from_scene(scene)
        job = BakeJob(bpy.context, dynamic, static, options, world=world)
        job.check()
        started = time.perf_counter()
        job.start()
        convert_s = time.perf_counter() - started
        try:
            sim = job.sim
            body_of = {link.object_name: link.body_index for link in job.links}
            saved = {"format": FORMAT, "blend": blend, "model": sim.model,
                     "settings": replace(sim.settings, device=options.simulation.device),
                     "frame_rate": 1.0 / sim.frame_duration, "substeps_per_frame": sim.substeps_per_frame,
                     "frames": job.frames_total, "brick_bodies": np.array([body_of[o.name] for o in bricks]),
                     "ball_body": body_of.get(ball.name) if ball is not None else None,
                     "release_frame_index": (_release_frame(ball) - scene.frame_start) if ball is not None else None,
                     "pairs": pairs, "glue_simulated": note is None, "constraints_note": note,
                     "convert_and_engine_s": convert_s}
        finally:
            job.cancel()
        with open(path, "wb") as handle:
            pickle.dump(saved, handle, protocol=pickle.HIGHEST_PROTOCOL)
        return {k: v for k, v in saved.items() if k in ("frames", "glue_simulated", "convert_and_engine_s")}
    finally:
        addon_blender.unregister()


def pose_matrices(positions: np.ndarray, orientations: np.ndarray) -> np.ndarray:
    from addon.core.rotations import quaternion_to_matrix

    out = np.tile(np.eye(4), (len(positions), 1, 1))
    out[:, :3, :3] = quaternion_to_matrix(orientations)
    out[:, :3, 3] = positions
    return out


def run_model(path: str, device: str | None) -> dict:
    """Simulate a saved model with the core (no bpy) and read the destruction's figures."""
    from addon.core.simulation import Simulation
    from bench.destruction import _peak_memory_mb, frame_timing, outcome

    with open(path, "rb") as handle:
        saved = pickle.load(handle)
    if saved.get("format") != FORMAT:
        raise SystemExit(f"{path} is not a model written by --export-model ({FORMAT})")
    settings = saved["settings"] if device is None else replace(saved["settings"], device=device)
    started = time.perf_counter()
    sim = Simulation(saved["model"], settings, frame_rate=saved["frame_rate"],
                     substeps_per_frame=saved["substeps_per_frame"])
    stamps, poses, ball_positions = [], {}, {}
    last = saved["frames"]
    release = saved["release_frame_index"]
    for frame in sim.frames(last):
        stamps.append(time.perf_counter())
        if frame.index in (0, last):
            poses[frame.index] = pose_matrices(frame.positions[saved["brick_bodies"]],
                                               frame.orientations[saved["brick_bodies"]])
        if saved["ball_body"] is not None and release is not None and frame.index in (release, release + 1):
            ball_positions[frame.index] = frame.positions[saved["ball_body"]].copy()
    out = {"engine": "particle_rigid_bodies (core, from an exported model)", "device": sim.device_name,
           "model": path, **frame_timing(stamps), "setup_s": stamps[0] - started,
           "substeps_per_frame": sim.substeps_per_frame, "particles": int(sim.model.particle_count),
           "particle_radius": float(sim.model.particle_radius), "glue_simulated": saved["glue_simulated"],
           "constraints_note": saved["constraints_note"],
           "convert_and_engine_s_where_exported": saved["convert_and_engine_s"],
           "result": outcome(poses[0], poses[last], saved["pairs"]), "peak_memory_mb": _peak_memory_mb()}
    if len(ball_positions) == 2:
        out["ball_speed_after_release_mps"] = float(
            np.linalg.norm(ball_positions[release + 1] - ball_positions[release]) * saved["frame_rate"])
    return out
