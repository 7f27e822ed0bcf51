"""Only the C tree walk (shared/_treewalk.c); everything else is in pyproject.toml.

Optional: where no C compiler is found the install still succeeds and the hot path uses
the numpy walk (shared.tree_eval says which one is live)."""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "shared._treewalk", ["shared/_treewalk.c"], extra_compile_args=["-O3"], optional=True
        )
    ]
)
