"""Facts about the machine and the money: CPU probes, machine facts, run conditions, costs."""
