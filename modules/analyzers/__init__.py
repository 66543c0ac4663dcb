"""Analysers: measurements, inbox items and roadmap items judged into ranked gaps."""
