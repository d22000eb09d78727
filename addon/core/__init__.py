"""bpy-free simulation core: scene description (model), settings, engines (OpenCL and NumPy reference)."""
from .model import Material, Model
from .model_builder import ModelBuilder
from .rotations import quaternion_to_matrix
from .settings import SimulationSettings, SolverParameters, derive_solver_parameters
from .state import BodyState

__all__ = [
    "BodyState", "Material", "Model", "ModelBuilder", "SimulationSettings", "SolverParameters",
    "derive_solver_parameters", "quaternion_to_matrix",
]
