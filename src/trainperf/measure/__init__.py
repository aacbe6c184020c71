"""What the parent measures around a child: NVML samples, GPU hygiene and placement, the host, the run's figures."""
