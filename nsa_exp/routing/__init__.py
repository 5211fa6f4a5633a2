"""The numpy-only tier: config, the Stage table, the Pattern registry and its generators, edges,
fan-in statistics, routing files. Importing the package registers every routing family."""

from . import families, tiles  # noqa: F401  (registers sink-heavy, zipf, hot-block, then the tile-shared variants)
