"""shrinkbert: make BERT models small and fast without losing what they know.

The front door: the Python API below, the `shrinkbert` CLI (shrinkbert.cli) and the recipe
runner (shrinkbert.recipe) all call the same stage functions, generated from one registry
(shrinkbert.stages). The rooms install inside this namespace: shrinkbert.teachers, .students,
.compress, .eval, and the plumbing in .core.
"""
from shrinkbert import api
from shrinkbert.api import Artifact
from shrinkbert.stages import API_STAGES

__all__ = ["Artifact", *API_STAGES]


def __getattr__(name: str):
    """`shrinkbert.distill` and the other stage functions, built on first use (shrinkbert.api):
    their signatures import the stage's module, which `import shrinkbert` alone should not pay."""
    if name in API_STAGES:
        return getattr(api, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(API_STAGES))
