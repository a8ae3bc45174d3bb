"""Studies anyone can rerun: agreement with an independent timer, A/A, order, drift, calibration, variance
components."""
