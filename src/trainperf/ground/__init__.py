"""What every part of a run stands on: its settings (``settings``: command line, environment,
ini, defaults, read straight down) and its folder (``folder.RunFolder``: where each file of a run
lives). The case lifecycle, the launch of children, the results history, the fleet, the studies,
the reports and the command all read them; they import nothing of those."""
