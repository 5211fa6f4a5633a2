"""The numpy-only tier: config, the Stage table, the Pattern registry and its generators, edges,
fan-in statistics, routing files. Importing the package registers every routing family."""

from . import families  # noqa: F401  (registers sink-heavy, zipf, hot-block in the Pattern registry)
