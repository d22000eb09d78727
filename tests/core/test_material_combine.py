"""How a contact combines its two sides' friction and restitution (SimulationSettings.material_combine):
the add-on's mean by default, Bullet's products (friction clamped at 10) for a Blender Rigid Body world."""
from __future__ import annotations

import numpy as np
import pytest

from addon.core.model import Material
from addon.core.model_builder import ModelBuilder
from addon.core.settings import (BULLET_MAX_FRICTION, MATERIAL_COMBINE_BULLET, SimulationSettings,
                                 derive_solver_parameters)


def two_materials():
    builder = ModelBuilder(0.1)
    builder.add_body(np.zeros((1, 3)), mass=1.0, material=Material(friction=0.2, restitution=0.6))
    builder.add_static_mesh([[0, 0, 0], [1, 0, 0], [0, 1, 0]], [[0, 1, 2]],
                            material=Material(friction=1.0, restitution=1.0))
    builder.add_ground_plane(material=Material(friction=20.0, restitution=0.0))
    return builder.finalize()


def test_the_default_combines_by_the_means():
    params = derive_solver_parameters(two_materials(), SimulationSettings())
    assert params.friction[0, 1] == pytest.approx(np.sqrt(0.2))
    assert params.restitution[0, 1] == pytest.approx(0.8)


def test_bullets_rule_takes_the_products_and_clamps_the_friction():
    params = derive_solver_parameters(two_materials(), SimulationSettings(material_combine=MATERIAL_COMBINE_BULLET))
    assert params.friction[0, 1] == pytest.approx(0.2)
    assert params.restitution[0, 1] == pytest.approx(0.6)
    assert params.friction[1, 2] == BULLET_MAX_FRICTION  # 1.0 x 20
    assert params.restitution[0, 2] == 0.0
    assert params.friction[0, 0] == pytest.approx(0.04)


def test_an_unknown_rule_is_refused():
    with pytest.raises(ValueError, match="material combine must be one of mean, bullet, got 'max'"):
        SimulationSettings(material_combine="max")
