"""Sweeps: plans of routing points x T (:mod:`.plan`), their execution (:mod:`.run`) and tidy table
(:mod:`.table`); routing files as points (:mod:`.files`)."""
