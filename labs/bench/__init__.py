"""Benchmarks: every speed and memory figure of the project, measured the same way every time.

Each figure is a ``Figure(name, value, unit, target, met)``; ``gpulab bench`` prints them as a table and JSON.
Benchmarks are never timed tests: they report numbers, they do not fail a build.
"""
