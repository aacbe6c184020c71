"""Profiler traces: the capture plan (shared by parent and child), the Kineto-JSON analysis and the
trace diff. Nothing here imports torch: the analysis runs on recorded traces, on any machine."""
