"""The I/O tier: strict JSON, schemas (loading, validation, regeneration from the vocabulary), the
atomic store, config files and run metadata. Imports :mod:`nsa_exp.core` only; never the checks."""
