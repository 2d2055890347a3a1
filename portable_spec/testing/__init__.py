"""Test and benchmark harnesses that ship with the package (simulations are labelled, never presented as devices)."""
