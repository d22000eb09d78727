"""The velocity solve's settings (Rigid Voxels' contacts, kernels/61_pair_colouring.cl and
62_pair_solve.cl; the solve itself is tested in test_coloured_solve.py, test_manifold.py and
test_rigid_step.py): the defaults each contact geometry gives and the settings refused."""
import pytest

from addon.core import SimulationSettings
from addon.core.settings import derive_solver_parameters
from tests.core.helpers import column_of_cubes


@pytest.mark.parametrize("settings, message", [
    ({"contact_geometry": "particles", "solve_passes": 4},
     r"Particles \(fast\) contacts are springs: they take no solve passes and are detected every substep, "
     r"got 4 solve passes, 0 relax passes, 1 substeps per detection"),
    ({"contact_geometry": "particles", "relax_passes": 1}, "contacts are springs: they take no solve passes"),
    ({"contact_geometry": "voxels", "solve_passes": 0}, "Rigid Voxels need at least one solve pass, got 0"),
    ({"contact_geometry": "voxels", "solve_passes": -1}, "solve passes must be a whole number from 0 to 64"),
    ({"contact_geometry": "voxels", "solve_passes": 2.5}, "solve passes must be a whole number"),
    ({"contact_geometry": "voxels", "relax_passes": 100}, "relax passes must be a whole number from 0 to 64"),
    ({"contact_geometry": "voxels", "solve_slop": 0.0}, "solve slop"),
    ({"contact_geometry": "voxels", "solve_push_speed": float("inf")}, "push speed"),
    ({"contact_geometry": "voxels", "solve_hertz_fraction": 2.0}, "hertz fraction"),
])
def test_bad_solve_settings_are_refused_with_one_message(settings, message):
    with pytest.raises(ValueError, match=message):
        SimulationSettings(**settings)


def test_rigid_voxels_are_the_default_and_solve_their_contacts_at_the_rigid_step():
    """The default contacts are Rigid Voxels', solved at Box2D's step: 1/240 s substeps, 2 solve and
    2 relax passes, detection every 4 substeps, soft at a quarter of the substep rate beyond a slop of
    a thousandth of the radius, speculative contacts; Particles are springs, with no
    solve, detected every substep, their substep from their stiffness."""
    default = SimulationSettings()
    assert default == SimulationSettings(contact_geometry="voxels")
    assert not default.contact_springs
    assert (default.solve_passes, default.relax_passes, default.substeps_per_detection) == (2, 2, 4)
    assert (default.solve_slop, default.solve_hertz_fraction) == (0.001, 0.25)
    assert default.speculative_margin > 0.0
    model = column_of_cubes(2).finalize()
    assert derive_solver_parameters(model, default).substep == pytest.approx(1 / 240)
    for geometry in ("particles",):
        settings = SimulationSettings(contact_geometry=geometry)
        assert settings.contact_springs
        assert (settings.solve_passes, settings.relax_passes, settings.substeps_per_detection) == (0, 0, 1)
        assert settings.target_penetration == pytest.approx(0.05) and settings.speculative_margin == 0.0
        # the springs' substep follows their stiffness (1.9 ms for these cubes), shorter than the solve's
        assert derive_solver_parameters(model, settings).substep < 1 / 240
