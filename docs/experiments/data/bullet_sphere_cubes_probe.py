"""Probe (E10 of docs/experiments/contact-solve.md): the 1000-cube pile of bench/scenes.py cube_pile in
Bullet (pybullet, a rigid-body solver with sequential impulses and static friction), with each cube
a box, a compound of the same 27 spheres our engine uses, or a compound of their 27 voxels. Same geometry as ours, a rigid
solve instead of spring-dashpot contacts: does the sphere-cube pile stand like the box pile?

Needs pybullet, which is not a dependency of the project:
    pip install --target /tmp/pbsite pybullet
    PYTHONPATH=/tmp/pbsite:. .venv/bin/python docs/experiments/data/bullet_sphere_cubes_probe.py \
        --shape spheres --out OUT.json
"""
from __future__ import annotations

import argparse
import json
import math
import platform
import sys
import time
from pathlib import Path

import numpy as np
import pybullet as pb

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

from addon.core.shapes import cube_particles  # noqa: E402
from bench.contact_figures import pile_figures  # noqa: E402
from bench.scenes import cube_pile  # noqa: E402


class State:
    def __init__(self, position, orientation, velocity, angular_velocity):
        self.position, self.orientation = position, orientation
        self.velocity, self.angular_velocity = velocity, angular_velocity


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shape", choices=["box", "spheres", "voxels"], required=True,
                    help="box: one unit box; spheres: our 27 particles (radius 1/6); voxels: 27 boxes of side 1/3")
    ap.add_argument("--cubes", type=int, default=1000)
    ap.add_argument("--per-edge", type=int, default=3, help="spheres or voxels along a cube's edge")
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--hz", type=float, default=240.0)
    ap.add_argument("--iterations", type=int, default=10)
    ap.add_argument("--friction", type=float, default=0.5)
    ap.add_argument("--contact-stiffness", type=float, default=0.0,
                    help="N/m: soft contacts (pybullet contactStiffness) instead of Bullet's rigid ones")
    ap.add_argument("--contact-damping", type=float, default=0.0, help="N s/m, with --contact-stiffness")
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    model = cube_pile(args.cubes)
    # cube_pile gives particles in world space: each body's centre and its lattice's (the cube's) tilt
    centres = model.body_position
    tilts = model.body_lattice_orientation  # (w, x, y, z)
    pb.connect(pb.DIRECT)
    pb.setGravity(0, 0, -9.81)
    pb.setPhysicsEngineParameter(fixedTimeStep=1.0 / args.hz, numSolverIterations=args.iterations)
    # Bullet multiplies the two bodies' friction: sqrt(mu) on each gives mu for every pair
    mu = math.sqrt(args.friction)
    ground = pb.createMultiBody(0, pb.createCollisionShape(pb.GEOM_BOX, halfExtents=[200, 200, 1]),
                                basePosition=[0, 0, -1])
    pb.changeDynamics(ground, -1, lateralFriction=mu, restitution=0.0)
    if args.shape == "box":
        shape = pb.createCollisionShape(pb.GEOM_BOX, halfExtents=[0.5, 0.5, 0.5])
    else:
        # createCollisionShapeArray keeps at most 16 shapes; a URDF link takes all 27
        urdf = Path(args.out).with_suffix(".urdf")
        cell = 1.0 / args.per_edge
        element = (f'<sphere radius="{cell / 2:.6f}"/>' if args.shape == "spheres"
                   else f'<box size="{cell:.6f} {cell:.6f} {cell:.6f}"/>')
        spheres = "".join(f'\n<collision><origin xyz="{x:.6f} {y:.6f} {z:.6f}"/><geometry>{element}</geometry>'
                          f'</collision>' for x, y, z in cube_particles(1.0, args.per_edge))
        urdf.write_text(f'<robot name="sphere_cube"><link name="cube"><inertial><mass value="1000"/>'
                        f'<inertia ixx="{1000.0 / 6}" iyy="{1000.0 / 6}" izz="{1000.0 / 6}" ixy="0" ixz="0" '
                        f'iyz="0"/></inertial>{spheres}</link></robot>')
    bodies = []
    for c, q in zip(centres, tilts):
        if args.shape == "box":
            b = pb.createMultiBody(1000.0, shape, basePosition=c.tolist(), baseOrientation=[q[1], q[2], q[3], q[0]])
        else:
            b = pb.loadURDF(str(urdf), basePosition=c.tolist(), baseOrientation=[q[1], q[2], q[3], q[0]],
                            flags=pb.URDF_USE_INERTIA_FROM_FILE)
        # a solid unit cube's inertia whatever the collision shape
        pb.changeDynamics(b, -1, lateralFriction=mu, restitution=0.0, localInertiaDiagonal=[1000.0 / 6] * 3,
                          linearDamping=0.0, angularDamping=0.0)
        if args.contact_stiffness > 0:
            pb.changeDynamics(b, -1, contactStiffness=args.contact_stiffness, contactDamping=args.contact_damping)
        bodies.append(b)
    identity = np.tile([1.0, 0.0, 0.0, 0.0], (len(bodies), 1))

    def state():
        pos, orn, vel, ang = [], [], [], []
        for b in bodies:
            p, o = pb.getBasePositionAndOrientation(b)
            v, w = pb.getBaseVelocity(b)
            pos.append(p), orn.append([o[3], o[0], o[1], o[2]]), vel.append(v), ang.append(w)
        return State(np.array(pos), np.array(orn), np.array(vel), np.array(ang))

    out = {"probe": "bullet_sphere_cubes_probe", "shape": args.shape, "per_edge": args.per_edge,
           "cubes": args.cubes, "hz": args.hz,
           "solver_iterations": args.iterations, "friction_per_pair": args.friction,
           "contact_stiffness": args.contact_stiffness, "contact_damping": args.contact_damping,
           "pybullet": pb.getAPIVersion(), "python": platform.python_version(), "checkpoints": {}}
    steps_done, start = 0, time.perf_counter()
    for checkpoint in (1.0, 3.0, 5.0, args.seconds):
        target = int(round(checkpoint * args.hz))
        while steps_done < target:
            pb.stepSimulation()
            steps_done += 1
        figures = pile_figures(state(), identity)
        out["checkpoints"][f"{checkpoint:g}"] = figures
        print(checkpoint, figures, flush=True)
    out["wall_s"] = time.perf_counter() - start
    Path(args.out).write_text(json.dumps(out, indent=2) + "\n")


if __name__ == "__main__":
    main()
