"""Snapshots and scene builders for the Blender-layer tests."""
from __future__ import annotations

import bpy  # noqa: E402


def data_counts() -> dict:
    names = ("objects", "meshes", "actions", "materials", "collections", "images", "node_groups", "textures",
             "curves", "lights", "cameras", "scenes", "worlds")
    return {n: len(getattr(bpy.data, n)) for n in names}


def action_snapshot(action):
    from addon.blender.bake import action_fcurves

    if action is None:
        return None
    curves = []
    for fc in action_fcurves(action):
        keys = [(tuple(k.co), k.interpolation, tuple(k.handle_left), tuple(k.handle_right)) for k in fc.keyframe_points]
        curves.append((fc.data_path, fc.array_index, keys))
    slots = [s.identifier for s in action.slots] if hasattr(action, "slots") else []
    return dict(name=action.name, curves=sorted(curves), slots=slots, custom=sorted(action.keys()))


def object_snapshot(obj) -> dict:
    ad = obj.animation_data
    slot = None
    if ad is not None and "action_slot" in ad.bl_rna.properties and ad.action_slot is not None:
        slot = ad.action_slot.identifier
    return dict(
        location=tuple(obj.location), rotation_mode=obj.rotation_mode, euler=tuple(obj.rotation_euler),
        quaternion=tuple(obj.rotation_quaternion), axis_angle=tuple(obj.rotation_axis_angle),
        scale=tuple(obj.scale), matrix_world=[tuple(r) for r in obj.matrix_world],
        has_animation_data=ad is not None, action=action_snapshot(ad.action if ad else None), slot=slot,
        custom=sorted(k for k in obj.keys() if k != "prb"),  # 4.2/4.5 list registered property storage too
        parent=obj.parent.name if obj.parent else None,
    )


def scene_snapshot() -> dict:
    scene = bpy.context.scene
    return dict(
        frame=(scene.frame_current, scene.frame_subframe),
        counts=data_counts(),
        objects={o.name: object_snapshot(o) for o in bpy.data.objects},
        actions={a.name: action_snapshot(a) for a in bpy.data.actions},
        selected=sorted(o.name for o in bpy.context.selected_objects),
    )


def add_cube(name, location, size=0.4, rotation=(0.0, 0.0, 0.0), rotation_mode="XYZ", role="DYNAMIC"):
    bpy.ops.mesh.primitive_cube_add(size=size, location=location, rotation=rotation)
    obj = bpy.context.object
    obj.name = name
    if rotation_mode != "XYZ":
        m = obj.matrix_world.copy()
        obj.rotation_mode = rotation_mode
        obj.matrix_world = m
    obj.prb.role = role
    return obj


def fresh_scene(frame_start=1, frame_end=12):
    bpy.ops.wm.read_factory_settings(use_empty=True)
    scene = bpy.context.scene
    scene.frame_start, scene.frame_end = frame_start, frame_end
    scene.frame_set(frame_start)
    return scene


_UI_LAYOUT = bpy.types.UILayout.bl_rna
_PARAMETER_TYPES = {"STRING": str, "BOOLEAN": bool, "INT": int, "FLOAT": (int, float)}


class Drawn:
    """What draw() calls put in a StrictLayout: label texts, (struct, property) names, operator idnames."""

    def __init__(self):
        self.labels: list[str] = []
        self.props: set[tuple[str, str]] = set()
        self.operators: set[str] = set()


def _arguments(function, args, kwargs) -> dict:
    """``function``'s (a UILayout function's bl_rna) arguments by name, refused as Blender would:
    too many, an unknown keyword, a required one missing, a value of the wrong type, an enum value
    (an icon) that does not exist."""
    inputs = [p for p in function.parameters if not p.is_output]
    if len(args) > len(inputs):
        raise TypeError(f"UILayout.{function.identifier}() takes {len(inputs)} arguments, got {len(args)}")
    bound = dict(zip((p.identifier for p in inputs), args))
    for name, value in kwargs.items():
        if name not in function.parameters or function.parameters[name].is_output or name in bound:
            raise TypeError(f"UILayout.{function.identifier}() has no argument {name!r} (or got it twice)")
        bound[name] = value
    for p in inputs:
        if p.is_required and p.identifier not in bound:
            raise TypeError(f"UILayout.{function.identifier}() needs {p.identifier!r}")
        if p.identifier not in bound:
            continue
        value = bound[p.identifier]
        if p.type == "ENUM" and value not in p.enum_items:
            raise TypeError(f"UILayout.{function.identifier}(): {p.identifier} {value!r} does not exist")
        wanted = _PARAMETER_TYPES.get(p.type)
        if wanted and not isinstance(value, wanted):
            raise TypeError(f"UILayout.{function.identifier}(): {p.identifier} must be {p.type}, got {value!r}")
    return bound


class _OperatorProperties:
    """What layout.operator() returns: only the operator's own properties can be set."""

    def __init__(self, rna):
        object.__setattr__(self, "_rna", rna)

    def __setattr__(self, name, value):
        if name not in self._rna.properties:
            raise AttributeError(f"operator {self._rna.identifier} has no property {name!r}")
        object.__setattr__(self, name, value)


class StrictLayout:
    """A stand-in for a panel's layout, without a window, that refuses what Blender's own would: a
    function or attribute UILayout lacks, an argument it does not take or an icon it does not know,
    a property the data does not have (``data.bl_rna.properties``), an operator that is not
    registered. A renamed property or operator fails the draw here instead of in a user's panel.
    Records what is drawn in ``drawn`` (shared with the sub-layouts)."""

    def __init__(self, drawn: Drawn | None = None):
        object.__setattr__(self, "drawn", drawn if drawn is not None else Drawn())

    def __setattr__(self, name, value):
        rna = _UI_LAYOUT.properties.get(name)
        if rna is None or rna.is_readonly or name == "rna_type":
            raise AttributeError(f"UILayout has no writable attribute {name!r}")
        object.__setattr__(self, name, value)

    def __getattr__(self, name):
        function = _UI_LAYOUT.functions.get(name)
        if function is None:
            raise AttributeError(f"UILayout has no {name!r}")

        def call(*args, **kwargs):
            arguments = _arguments(function, args, kwargs)
            if name == "label":
                self.drawn.labels.append(arguments.get("text", ""))
            elif name in ("prop", "prop_enum", "prop_menu_enum", "props_enum", "prop_search", "prop_tabs_enum"):
                data, prop = arguments["data"], arguments["property"]
                rna = getattr(data, "bl_rna", None)
                if rna is None or prop not in rna.properties:
                    raise AttributeError(f"{getattr(rna, 'identifier', type(data).__name__)} has no property {prop!r}")
                self.drawn.props.add((rna.identifier, prop))
            elif name == "operator":
                idname = arguments["operator"]
                module, _, op = idname.partition(".")
                try:
                    rna = getattr(getattr(bpy.ops, module), op).get_rna_type()
                except (AttributeError, KeyError) as missing:
                    raise AttributeError(f"no operator {idname!r} is registered") from missing
                self.drawn.operators.add(idname)
                return _OperatorProperties(rna)
            outputs = [p for p in function.parameters if p.is_output]
            if outputs and outputs[0].type == "POINTER" and outputs[0].fixed_type.identifier == "UILayout":
                return StrictLayout(self.drawn)
            return None

        return call


def draw_panel(panel_class, layout: StrictLayout, context=None) -> bool:
    """``panel_class``'s draw_header() and draw() into ``layout`` in ``context`` (bpy.context), when
    its poll() allows; whether it was drawn."""
    context = context or bpy.context
    poll = getattr(panel_class, "poll", None)
    if poll is not None and not poll(context):
        return False
    panel = type("Panel", (), {"layout": layout})()
    if hasattr(panel_class, "draw_header"):
        panel_class.draw_header(panel, context)
    panel_class.draw(panel, context)
    return True


def draw_labels(panel_class) -> list:
    """The labels ``panel_class.draw`` makes in the current context."""
    layout = StrictLayout()
    panel_class.draw(type("Panel", (), {"layout": layout})(), bpy.context)
    return layout.drawn.labels
