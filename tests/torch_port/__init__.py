"""torch's own test files, ported to run against torch and against symgrad (see harness.py)."""
