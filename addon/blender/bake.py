"""Writing simulated world transforms as keyframes; clear_bake.py undoes it (Clear Bake).

Everything here works on whole arrays: world matrices of all objects on all keyed frames are built
with numpy, turned into the object's own local channels (local_channels.py: location + rotation in
its rotation mode, after its parent and delta transforms), and written per F-curve with ``foreach_set``.

Bookkeeping (custom properties, hidden from the UI by the leading underscore):
- ``action["prb_bake"]``: marks an action made by this add-on (value: the object's name at bake time).
- ``obj["_prb_previous_action"]``: the action the object had before its first bake (an ID reference,
  which also keeps the action alive while it is unassigned); absent when it had none.
- ``obj["_prb_previous_slot"]``: identifier of that action's slot (layered actions, 4.4+).
- ``obj["_prb_rest"]``: location and rotation values before the first bake, restored by Clear Bake.
- ``obj["_prb_had_animation_data"]``: whether the object had animation data before the first bake.
A re-bake keeps these (they describe the state before *any* bake) and replaces only the bake action.
Each object gets its own action, "PRB_Bake_<object name>", whose one slot (4.4+) is "PRB Bake".
"""
from __future__ import annotations

import bpy
import numpy as np

from .local_channels import Channels

BAKE_MARK = "prb_bake"
PREV_ACTION = "_prb_previous_action"
PREV_SLOT = "_prb_previous_slot"
REST = "_prb_rest"
HAD_ANIM = "_prb_had_animation_data"
BOOKKEEPING = (PREV_ACTION, PREV_SLOT, REST, HAD_ANIM)
GROUP_NAME = "Object Transforms"
# The slot of every bake action (layered actions, 4.4+). Each object has its own action, named
# after it; the slot is not renamed per object because renaming a slot costs Blender a pass over
# every data-block (it updates the slot name wherever the action is used): 10,000 objects x 250
# frames wrote in 14.8 s with a slot per object name against 8.6 s without (bpy 5.0.1, 3 runs).
SLOT_NAME = "PRB Bake"


def layered_actions() -> bool:
    """True for Blender 4.4+ (slotted/layered actions); ``action.fcurves`` is gone in 5.0."""
    return "slots" in bpy.types.Action.bl_rna.properties


def bake_action_name(obj) -> str:
    return f"PRB_Bake_{obj.name}"


def is_bake_action(action) -> bool:
    return action is not None and action.get(BAKE_MARK) is not None


def has_bake(obj) -> bool:
    ad = obj.animation_data
    return bool(ad and is_bake_action(ad.action)) or REST in obj


_LINEAR = None


def _linear_value() -> int:
    global _LINEAR
    if _LINEAR is None:
        _LINEAR = bpy.types.Keyframe.bl_rna.properties["interpolation"].enum_items["LINEAR"].value
    return _LINEAR


def _vector_handle_value() -> int:
    return bpy.types.Keyframe.bl_rna.properties["handle_left_type"].enum_items["VECTOR"].value


def _new_fcurve_factory(action):
    """A function (data_path, index) -> FCurve for a fresh action, and the slot (or None)."""
    if layered_actions():
        slot = action.slots.new(id_type="OBJECT", name=SLOT_NAME)
        layer = action.layers.new("Layer")
        strip = layer.strips.new(type="KEYFRAME")
        bag = strip.channelbag(slot, ensure=True)
        group = bag.groups.new(GROUP_NAME)

        def new(path, index):
            fc = bag.fcurves.new(path, index=index)
            fc.group = group
            return fc
        return new, slot

    action.id_root = "OBJECT"

    def new(path, index):
        return action.fcurves.new(path, index=index, action_group=GROUP_NAME)
    return new, None


class _KeyTemplate:
    """An action holding the bake's F-curves keyed at the bake's frames (values 0), copied per object.

    Its keys already have LINEAR interpolation and VECTOR handle types, so an object's action is
    ``copy()`` + rename + its values (``co``) + ``update()``: copying the action is cheaper than
    creating slot, layer, strip, group and F-curves and adding keys and setting three enums per
    F-curve (1000 objects x 6 F-curves x 250 frames: 0.92 s -> 0.70 s).

    Vector handles point along the straight segments the LINEAR keys draw, so switching a baked
    curve to Bezier keeps its shape, and update() computes them faster than auto-clamped ones
    (1000 objects x 250 frames: ~0.2 s less). Writing the handles with foreach_set instead of
    update() is slower: ``handle_left``/``handle_right``, like ``co``, have no raw storage access
    (C get/set functions), so foreach_set sets them key by key, even from float32 buffers (~0.19 s
    per 1.5 M keys for each of the two; ``co`` from float64 takes ~5x longer than from float32),
    against ~0.1-0.18 s for update() on all curves.
    """

    # sorts after the bake's actions, so each copy lands at the end of bpy.data.actions (see
    # _creation_order); it lives only inside one write, which no redraw interrupts
    NAME = "~PRB_Bake_Template"

    def __init__(self, frames: np.ndarray, rotation_path: str, rotation_count: int):
        self.action = bpy.data.actions.new(self.NAME)
        try:
            new, _slot = _new_fcurve_factory(self.action)
            count = len(frames)
            co = np.zeros((count, 2), dtype=np.float32)
            co[:, 0] = frames
            # uint8 is the enums' storage type: foreach_set then copies the buffer instead of
            # setting the enum key by key
            interpolation = np.full(count, _linear_value(), dtype=np.uint8)
            handle_types = np.full(count, _vector_handle_value(), dtype=np.uint8)
            for path, channels in (("location", 3), (rotation_path, rotation_count)):
                for index in range(channels):
                    kp = new(path, index).keyframe_points
                    kp.add(count)
                    kp.foreach_set("co", co.ravel())
                    kp.foreach_set("interpolation", interpolation)
                    kp.foreach_set("handle_left_type", handle_types)
                    kp.foreach_set("handle_right_type", handle_types)
            # (data path, index) of each F-curve in the order a copy lists them
            self.order = [(fc.data_path, fc.array_index) for fc in _fcurves_of_copy(self.action)[1]]
        except BaseException:
            bpy.data.actions.remove(self.action)
            raise

    def remove(self) -> None:
        bpy.data.actions.remove(self.action)


def _fcurves_of_copy(action):
    """(slot or None, F-curves) of an action made from a _KeyTemplate."""
    if layered_actions():
        slot = action.slots[0]
        # channelbag(slot) rather than channelbags[0]: F-curves reached through the longer RNA
        # path carry more ancestor pointers, which foreach_set copies for every key (co: ~5x slower)
        return slot, action.layers[0].strips[0].channelbag(slot).fcurves
    return None, action.fcurves


class _KeyTemplates:
    """The templates of one write, by (frames, rotation path, rotation channel count)."""

    def __init__(self):
        self.templates: dict = {}

    def get(self, frames: np.ndarray, channels: Channels) -> _KeyTemplate:
        key = (frames.tobytes(), channels.rotation_path, channels.rotation.shape[1])
        template = self.templates.get(key)
        if template is None:
            template = self.templates[key] = _KeyTemplate(frames, *key[1:])
        return template

    def remove(self) -> None:
        for template in self.templates.values():
            template.remove()
        self.templates.clear()


def write_action(obj, frames: np.ndarray, channels: Channels, templates: _KeyTemplates | None = None):
    """Create the bake action of ``obj`` with its keys; does not assign it. Returns (action, slot).

    Keys: LINEAR interpolation, VECTOR handles (placed by ``FCurve.update()``), values written with
    foreach_set as float32 (``co``'s storage type). ``templates``: shared by the calls of one write
    (the caller removes them); without it, a template is made and removed for this object alone.
    """
    frames = np.asarray(frames, dtype=np.float64)
    own_templates = templates is None
    if own_templates:
        templates = _KeyTemplates()
    try:
        template = templates.get(frames, channels)
        action = template.action.copy()
    finally:
        if own_templates:
            templates.remove()
    try:
        action.name = bake_action_name(obj)
        action[BAKE_MARK] = obj.name
        slot, fcurves = _fcurves_of_copy(action)
        _write_values(list(zip(fcurves, template.order)), frames, channels)
    except BaseException:
        bpy.data.actions.remove(action)
        raise
    return action, slot


def _channel_values(channels: Channels) -> dict:
    values = {("location", i): channels.location[:, i] for i in range(3)}
    values.update({(channels.rotation_path, i): channels.rotation[:, i] for i in range(channels.rotation.shape[1])})
    return values


def _write_values(curves, frames: np.ndarray, channels: Channels) -> None:
    """Key values into F-curves that already have a key at each of ``frames``: [(fcurve, (path, index))]."""
    values = _channel_values(channels)
    co = np.empty((len(frames), 2), dtype=np.float32)
    co[:, 0] = frames
    flat = co.ravel()
    for fc, key in curves:
        co[:, 1] = values[key]
        fc.keyframe_points.foreach_set("co", flat)
        fc.update()


def _reusable_curves(action, frames: np.ndarray, channels: Channels):
    """For an earlier bake action (``is_bake_action``): its F-curves as [(fcurve, (path, index))]
    if a re-bake can write its values into them in place (exactly the bake's channels, each keyed
    LINEAR on exactly these frames, untouched by hand, used by this object alone), with their keys'
    ``co`` as read (float32, for the rollback) in the same order. Otherwise (None, None)."""
    if action.users != 1:
        return None, None
    if layered_actions():
        if len(action.slots) != 1 or len(action.layers) != 1 or len(action.layers[0].strips) != 1:
            return None, None
    curves = action_fcurves(action)
    keys = [(fc.data_path, fc.array_index) for fc in curves]
    if sorted(keys) != sorted(_channel_values(channels)):
        return None, None
    count = len(frames)
    linear = _linear_value()
    key_frames = frames.astype(np.float32)
    interpolation = np.empty(count, dtype=np.uint8)
    saved = []
    for fc in curves:
        points = fc.keyframe_points
        if len(points) != count:
            return None, None
        co = np.empty(2 * count, dtype=np.float32)
        points.foreach_get("co", co)
        points.foreach_get("interpolation", interpolation)
        if not np.array_equal(co[0::2], key_frames) or np.any(interpolation != linear):
            return None, None
        saved.append(co)
    return list(zip(curves, keys)), saved


def _rest_values(obj) -> list[float]:
    return [*obj.location, *obj.rotation_euler, *obj.rotation_quaternion, *obj.rotation_axis_angle]


def apply_rest_values(obj, values) -> None:
    obj.location = values[0:3]
    obj.rotation_euler = values[3:6]
    obj.rotation_quaternion = values[6:10]
    obj.rotation_axis_angle = values[10:14]


def assign_action(obj, action, slot_identifier: str | None) -> None:
    ad = obj.animation_data or obj.animation_data_create()
    ad.action = action
    if action is not None and layered_actions():
        slot = None
        if slot_identifier:
            slot = next((s for s in action.slots if s.identifier == slot_identifier), None)
        if slot is None and len(action.slots) == 1:
            slot = action.slots[0]
        if slot is not None:
            ad.action_slot = slot


def plain_value(value):
    """A Python copy of a custom property value (ID references stay references)."""
    if value is None or isinstance(value, (bpy.types.ID, str, int, float, bool)):
        return value
    if hasattr(value, "to_list"):
        return value.to_list()
    if hasattr(value, "to_dict"):
        return value.to_dict()
    return value


class _ObjectSnapshot:
    """Enough of an object's animation state to put it back exactly (for an all-or-nothing write)."""

    def __init__(self, obj):
        self.obj = obj
        ad = obj.animation_data
        self.had_ad = ad is not None
        self.action = ad.action if ad else None
        self.slot = ad.action_slot.identifier if (ad and layered_actions() and ad.action_slot) else None
        self.props = {key: plain_value(obj[key]) for key in BOOKKEEPING if key in obj}
        self.rest = _rest_values(obj)

    def restore(self):
        obj = self.obj
        for key in BOOKKEEPING:
            if key in obj:
                del obj[key]
        for key, value in self.props.items():
            obj[key] = value
        if self.had_ad:
            assign_action(obj, self.action, self.slot)
        elif obj.animation_data is not None:
            obj.animation_data_clear()
        apply_rest_values(obj, self.rest)


def _restore_values(curves, saved) -> None:
    """Put back the keys' ``co`` that _reusable_curves read before a rewrite in place."""
    for (fc, _key), co in zip(curves, saved):
        fc.keyframe_points.foreach_set("co", co)
        fc.update()


def _creation_order(channels_list: list[Channels]) -> list[int]:
    """Indices of ``channels_list`` by ascending object name: the order to create bake actions in.

    Blender keeps ``bpy.data.actions`` sorted by name (``id_sort_by_name``), and placing a new or
    renamed ID costs it a walk from the end of the list back to the ID's place. In ascending name
    order each new "PRB_Bake_<name>" (and each template copy, whose name sorts last) belongs at
    the end of the list; in descending order (faster at 1,000 objects),
    each one walks back over all the bake's actions made before it: 10,000 objects x 250 frames
    took 8.6 s that way and 7.5 s this way (bpy 5.0.1, 3 runs each; without per-object slot names).
    """
    names = [ch.obj.name.lower() for ch in channels_list]
    return sorted(range(len(names)), key=names.__getitem__)


def write_bake(frames, channels_list: list[Channels]) -> list:
    """Write the bake of every object at once: all of it, or (on any error) none of it.

    Objects keep their previous (non-bake) action in a custom property. An earlier bake action of
    the object gets the new values in place when it still has the bake's keys on the same frames,
    and is replaced otherwise (removed once the new keys are in place). Returns the bake actions.
    """
    frames = np.asarray(frames, dtype=np.float64)
    snapshots = []
    created = [None] * len(channels_list)  # (new action, slot identifier)
    kept = [None] * len(channels_list)  # earlier bake actions rewritten in place
    rewritten = []  # (their curves, their keys' earlier co), for the rollback
    replaced = []
    templates = _KeyTemplates()
    order = _creation_order(channels_list)
    try:
        for i in order:
            ch = channels_list[i]
            obj = ch.obj
            snapshots.append(_ObjectSnapshot(obj))
            ad = obj.animation_data
            current = ad.action if ad else None
            baked = is_bake_action(current)
            if not baked and REST not in obj:  # first bake: remember what the user had
                if current is not None:
                    obj[PREV_ACTION] = current
                    if layered_actions() and ad.action_slot is not None:
                        obj[PREV_SLOT] = ad.action_slot.identifier
                obj[HAD_ANIM] = ad is not None
                obj[REST] = _rest_values(obj)
            curves, saved = _reusable_curves(current, frames, ch) if baked else (None, None)
            if curves is not None:
                # a re-bake over the same frames writes into the earlier bake's keys: creating a
                # new action and removing the old one cost Blender a pass over all data-blocks
                # each (10,000 objects: ~25 s against ~5 s)
                rewritten.append((curves, saved))
                _write_values(curves, frames, ch)
                current[BAKE_MARK] = obj.name
                kept[i] = current
                continue
            if baked:
                replaced.append(current)
            action, slot = write_action(obj, frames, ch, templates)
            created[i] = (action, slot.identifier if slot is not None else None)
        # assigned only once all actions exist: an assignment makes Blender's next copy or rename
        # of a layered action cost a pass over the data-blocks (10,000 objects: ~25 % of the write)
        for i in order:
            if created[i] is not None:
                assign_action(channels_list[i].obj, *created[i])
    except BaseException:
        for curves, saved in rewritten:
            _restore_values(curves, saved)
        for snap in reversed(snapshots):
            snap.restore()
        bpy.data.batch_remove([made[0] for made in created if made is not None])
        raise
    finally:
        templates.remove()
    created = [kept[i] if made is None else made[0] for i, made in enumerate(created)]
    # one batch: removing IDs one by one costs Blender a pass over all data-blocks each
    unused = {action.name: action for action in replaced if action.users == 0}  # once each
    bpy.data.batch_remove(list(unused.values()))
    taken = None
    for ch, action in zip(channels_list, created):  # take the plain name back from the replaced bake
        name = bake_action_name(ch.obj)
        if action.name != name:
            if taken is None:  # a set: `name in bpy.data.actions` searches the whole list
                taken = {a.name for a in bpy.data.actions}
            if name not in taken:
                taken.discard(action.name)
                action.name = name
                taken.add(name)
    return created


def action_fcurves(action) -> list:
    """All F-curves of an action, layered (4.4+) or legacy."""
    if action is None:
        return []
    if layered_actions():
        out = []
        for layer in action.layers:
            for strip in layer.strips:
                for bag in getattr(strip, "channelbags", ()):
                    out.extend(bag.fcurves)
        if out or not hasattr(action, "fcurves"):
            return out
    return list(action.fcurves)
