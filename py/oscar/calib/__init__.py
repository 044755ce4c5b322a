"""Calibration: activation capture, covariances, clip search, rotations, the simulated cache
that scores calibration's choices, the rotation zoo and the Hugging Face Hub. Imports the core."""
