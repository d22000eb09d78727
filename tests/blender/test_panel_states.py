"""Every panel of the add-on drawn in every bake state (nothing baked, no OpenCL device, a bake in
progress, baked to keyframes, baked to instances, an instance cache missing) and under every value
of each of its settings, into a layout that refuses a property, operator, icon or layout argument
Blender does not know: a renamed property fails here instead of reaching users as a broken panel."""
from __future__ import annotations

import ast
import inspect
from pathlib import Path

import pytest

from prb_helpers import Drawn, StrictLayout, add_cube, bpy, draw_panel, fresh_scene

import addon.blender as blender  # noqa: E402
from addon.blender import bake_instances, cpu_driver, operators, panels, preferences, properties  # noqa: E402
from addon.core import device as core_device  # noqa: E402
from addon.core.contact_geometry import CONTACT_GEOMETRIES, CONTACT_GEOMETRY  # noqa: E402
from test_bake_paths import _Event, _operator, _WindowContext  # noqa: E402

STATES = ("nothing baked", "no OpenCL device", "baking", "baked to keyframes", "baked to instances",
          "instance cache missing", "Rigid Body world baked")
EVERY_SETTING = "nothing baked, each value of each setting"
SCENE_SETTINGS = "PRB_SceneSettings"


def addon_panels() -> list:
    """Every Panel and AddonPreferences class of the add-on, those registered only without numpy too."""
    classes = {c for module in blender._modules() for c in getattr(module, "classes", ())}
    classes |= set(preferences.fallback_classes)
    return sorted((c for c in classes if issubclass(c, (bpy.types.Panel, bpy.types.AddonPreferences))),
                  key=lambda c: c.__name__)


def draw_all(drawn: Drawn) -> list:
    """Every panel into layouts recording into ``drawn`` (the summary recomputed, as Refresh does);
    the names of those drawn (poll() allowing)."""
    panels._summary["stale"] = True
    return [c.__name__ for c in addon_panels() if draw_panel(c, StrictLayout(drawn))]


def each_setting_value(group):
    """(name, value) for each value of each enum and boolean property of ``group``."""
    for prop in group.bl_rna.properties:
        if prop.is_readonly or getattr(prop, "is_array", False):
            continue
        if prop.type == "ENUM" and not prop.is_enum_flag:
            values = [item.identifier for item in prop.enum_items]
        elif prop.type == "BOOLEAN":
            values = [True, False]
        else:
            continue
        for value in values:
            yield prop.identifier, value


def draw_every_setting(drawn: Drawn, group) -> None:
    """Every panel once per value of each of ``group``'s enum and boolean settings (the others
    as they are): each branch of a draw() that a single setting picks."""
    for name, value in each_setting_value(group):
        before = getattr(group, name)
        setattr(group, name, value)
        try:
            draw_all(drawn)
        finally:
            setattr(group, name, before)


def draw_every_setting_per_geometry(drawn: Drawn, scene) -> None:
    """``draw_every_setting`` of the scene's settings under each contact geometry: a setting drawn
    only for some geometries (Stiffness, for contacts that are springs) is drawn in each of its values."""
    s = scene.prb_settings
    before = s.contact_geometry
    try:
        for geometry in CONTACT_GEOMETRIES:
            s.contact_geometry = geometry
            draw_every_setting(drawn, s)
    finally:
        s.contact_geometry = before


@pytest.fixture(scope="module")
def states(registered, tmp_path_factory):
    """{state: (panels drawn, Drawn)}: a cube above a static ground, one state after the other; and
    EVERY_SETTING: what the panels drew under each value of each setting, and with an object
    that cannot be simulated active."""
    out = {}
    path = tmp_path_factory.mktemp("panels") / "scene.blend"
    with pytest.MonkeyPatch.context() as monkeypatch:
        scene = fresh_scene(1, 4)
        bpy.ops.mesh.primitive_plane_add(size=10.0)
        bpy.context.object.prb.role = "STATIC"
        cube = add_cube("Cube", (0.0, 0.0, 1.0))
        bpy.context.view_layer.objects.active = cube
        bpy.ops.wm.save_as_mainfile(filepath=str(path))

        drawn = Drawn()
        out["nothing baked"] = draw_all(drawn), drawn
        drawn = Drawn()
        draw_every_setting_per_geometry(drawn, scene)
        draw_every_setting(drawn, cube.prb)
        bpy.ops.object.empty_add(location=(3.0, 0.0, 0.0))  # active: an object that cannot be simulated
        empty = bpy.context.object
        empty.prb.role = "DYNAMIC"
        draw_all(drawn)
        assert "Only mesh objects and instancers can be simulated" in drawn.labels
        bpy.data.objects.remove(empty)
        bpy.context.view_layer.objects.active = cube
        out[EVERY_SETTING] = None, drawn

        def no_platform():
            raise core_device.OpenCLUnavailable("No OpenCL platform found: install an OpenCL driver")

        with pytest.MonkeyPatch.context() as no_device:
            no_device.setattr(core_device, "list_devices", no_platform)
            no_device.setattr(cpu_driver, "needed", lambda: True)  # Intel's runtime neither fetched nor pip's
            properties.refresh_devices()
            drawn = Drawn()
            out["no OpenCL device"] = draw_all(drawn), drawn
        properties.refresh_devices()

        monkeypatch.setattr(operators, "STEP_BUDGET", 0.0)  # one frame per timer event
        op, context = _operator(monkeypatch), _WindowContext()
        assert op.invoke(context, _Event("LEFTMOUSE", "PRESS")) == {"RUNNING_MODAL"}
        assert op.modal(context, _Event("TIMER")) == {"RUNNING_MODAL"}
        assert 0 < op._job.frames_done < op._job.frames_total
        drawn = Drawn()
        out["baking"] = draw_all(drawn), drawn
        while (result := op.modal(context, _Event("TIMER"))) == {"RUNNING_MODAL"}:
            pass
        assert result == {"FINISHED"}, op.reports

        drawn = Drawn()
        out["baked to keyframes"] = draw_all(drawn), drawn
        assert bpy.ops.prb.clear_bake() == {"FINISHED"}
        scene.prb_settings.bake_mode = "INSTANCES"
        assert bpy.ops.prb.simulate_bake() == {"FINISHED"}
        (cache,) = bake_instances.cache_objects(scene)
        drawn = Drawn()
        out["baked to instances"] = draw_all(drawn), drawn

        Path(bake_instances.cache_file(cache)).unlink()
        bpy.ops.wm.save_mainfile()
        bpy.ops.wm.open_mainfile(filepath=str(path))
        bpy.context.view_layer.objects.active = bpy.data.objects["Cube"]
        drawn = Drawn()
        out["instance cache missing"] = draw_all(drawn), drawn

        # a scene of Blender's Rigid Body world after its bake: the world's line, and the button that
        # turns the world back on
        scene = fresh_scene(1, 4)
        bpy.ops.rigidbody.world_add()
        scene.rigidbody_world.point_cache.frame_end = 4
        for name, x in (("A", 0.0), ("B", 2.0)):
            bpy.ops.mesh.primitive_cube_add(size=0.5, location=(x, 0.0, 1.0))
            bpy.context.object.name = name
            bpy.ops.rigidbody.object_add()
        assert bpy.ops.prb.simulate_bake() == {"FINISHED"}
        drawn = Drawn()
        out["Rigid Body world baked"] = draw_all(drawn), drawn
        assert "2 active, 0 passive, 0 constraints from the Rigid Body world" in drawn.labels
        assert "prb.restore_rigid_body_world" in drawn.operators
    return out


@pytest.mark.parametrize("state", STATES)
def test_every_panel_draws_in_every_bake_state(states, state):
    drawn_panels, drawn = states[state]
    assert drawn_panels == [c.__name__ for c in addon_panels()]
    text = "\n".join(drawn.labels)
    assert ("1 object baked" in text) == (state == "baked to keyframes"), text
    assert (("PRB_SceneSettings", "cache_folder") in drawn.props) == state.startswith(("baked to instances",
                                                                                        "instance cache"))
    assert ("cache file missing, bake again" in text) == (state == "instance cache missing"), text
    assert ("No OpenCL device: see the tooltip of Device" in text) == (state == "no OpenCL device"), text
    assert ("preferences.addon_show" in drawn.operators) == (state == "no OpenCL device")  # to Get CPU Driver
    assert "prb.simulate_bake" in drawn.operators


def _names(node, namespace) -> set:
    """The strings an argument can be: a literal, either side of `a if c else b`, or a class's
    bl_idname."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return {node.value}
    if isinstance(node, ast.IfExp):
        return _names(node.body, namespace) | _names(node.orelse, namespace)
    if isinstance(node, ast.Attribute) and node.attr == "bl_idname" and isinstance(node.value, ast.Name):
        return {namespace[node.value.id].bl_idname}
    raise AssertionError(f"a name this test cannot read: {ast.unparse(node)}")


def names_in_the_draw_code() -> tuple[set, set]:
    """(property names, operator idnames) that the panels' draw code passes to prop() and operator()."""
    props, operator_ids = set(), set()
    for code, namespace in ((panels, vars(panels)), (preferences, vars(preferences)),
                            (bake_instances.draw_bake_to, vars(bake_instances))):
        for node in ast.walk(ast.parse(inspect.getsource(code))):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
                if node.func.attr == "prop":
                    props |= _names(node.args[1], namespace)
                elif node.func.attr == "operator":
                    operator_ids |= _names(node.args[0], namespace)
    return props, operator_ids


def test_the_states_and_settings_draw_every_name_the_panels_use(states):
    """Every prop() and operator() the draw code names ran through the strict layout in some state
    (a name in a branch no state reached would go unchecked)."""
    props, operator_ids = names_in_the_draw_code()
    drawn_props = {name for _, (_, drawn) in states.items() for _, name in drawn.props}
    drawn_operators = {idname for _, (_, drawn) in states.items() for idname in drawn.operators}
    assert len(props) > 25 and len(operator_ids) >= 4
    assert props - drawn_props == set()
    assert operator_ids - drawn_operators == set()


@pytest.mark.parametrize("stiffness_mode", ["AUTO", "MANUAL"])
@pytest.mark.parametrize("geometry", CONTACT_GEOMETRIES)
def test_stiffness_is_drawn_only_where_contacts_are_springs(registered, geometry, stiffness_mode):
    """Stiffness (and, set to Manual, its target) are rows of the Simulation panel only for a
    contact geometry whose contacts are springs: solved contacts have no stiffness to set. Sleeping
    is drawn for every geometry (Rigid Voxels sleep by islands)."""
    scene = fresh_scene(1, 4)
    s = scene.prb_settings
    s.contact_geometry, s.stiffness_mode = geometry, stiffness_mode
    drawn = Drawn()
    assert draw_panel(panels.PRB_PT_scene, StrictLayout(drawn))
    springs = CONTACT_GEOMETRY[geometry].springs
    assert (SCENE_SETTINGS, "contact_geometry") in drawn.props
    assert ((SCENE_SETTINGS, "stiffness_mode") in drawn.props) == springs
    assert ((SCENE_SETTINGS, "target_penetration") in drawn.props) == (springs and stiffness_mode == "MANUAL")
    assert (SCENE_SETTINGS, "use_sleep") in drawn.props
    assert ((SCENE_SETTINGS, "sleep_speed") in drawn.props) == s.use_sleep


@pytest.mark.parametrize("draw, refused", [
    (lambda layout: layout.prop(bpy.context.scene.prb_settings, "sleep_sped"), "no property 'sleep_sped'"),
    (lambda layout: layout.prop(bpy.context.scene, "use_gravty"), "no property 'use_gravty'"),
    (lambda layout: layout.operator("prb.simulate_bak"), "no operator 'prb.simulate_bak'"),
    (lambda layout: setattr(layout.operator("prb.simulate_bake"), "engine", "opencl"), "no property 'engine'"),
    (lambda layout: layout.label(text="x", icon="PHYSIC"), "icon 'PHYSIC' does not exist"),
    (lambda layout: layout.column(aligned=True), "no argument 'aligned'"),
    (lambda layout: layout.row().lable(text="x"), "UILayout has no 'lable'"),
    (lambda layout: setattr(layout.box(), "use_property_splt", True), "no writable attribute"),
])
def test_the_layout_refuses_names_blender_does_not_know(registered, draw, refused):
    with pytest.raises((AttributeError, TypeError), match=refused):
        draw(StrictLayout())
