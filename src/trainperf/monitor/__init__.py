"""Parent-side monitoring: NVML sampling of memory, power, energy, clocks and throttling."""
