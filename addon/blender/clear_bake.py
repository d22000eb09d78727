"""Clear Bake: an object's bake action removed, and the action, slot and transform it had before its
first bake given back (the bookkeeping bake.py keeps in custom properties)."""
from __future__ import annotations

import bpy

from .bake import (BOOKKEEPING, HAD_ANIM, PREV_ACTION, PREV_SLOT, REST, apply_rest_values, assign_action,
                   is_bake_action, plain_value)


def clear_bake(obj) -> bool:
    """Remove the object's bake and give it back its previous action and transform. True if it had one."""
    return clear_bakes([obj]) == 1


def clear_bakes(objects) -> int:
    """Clear Bake of many objects (see ``clear_bake``); returns how many had a bake.

    The bake actions left without users are removed in one batch at the end: removing IDs one by
    one costs Blender a pass over all data-blocks each (10,000 objects: minutes instead of
    seconds)."""
    cleared = 0
    unused = {}
    for obj in objects:
        ad = obj.animation_data
        current = ad.action if ad else None
        if not is_bake_action(current) and REST not in obj:
            continue
        cleared += 1
        previous = obj.get(PREV_ACTION)
        slot = obj.get(PREV_SLOT)
        had_ad = bool(obj.get(HAD_ANIM, True))
        rest = plain_value(obj.get(REST))  # copy: deleting the property below frees its array
        if ad is not None and is_bake_action(current):
            ad.action = None
            unused[current.name] = current
        if previous is not None:
            assign_action(obj, previous, slot)
        elif not had_ad and ad is not None and not ad.drivers and not ad.nla_tracks:
            obj.animation_data_clear()
        for key in BOOKKEEPING:
            if key in obj:
                del obj[key]
        if rest is not None:
            apply_rest_values(obj, list(rest))
    bpy.data.batch_remove([action for action in unused.values() if action.users == 0])
    return cleared
