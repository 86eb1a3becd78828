"""Shared test configuration. Servers live in their own modules under tests/."""
