"""The dK/dV makespan model (numpy + scipy only): occupancy -> slots, an event-driven schedule of
CSR rows over the slots, the fit of its parameters to designed calibration routings, predictions,
and the split / heaviest-first what-if schedules (docs/MODEL.md)."""
