"""What a case is and how one is observed: the case, workloads and training, clocks, timing rounds, memory,
accuracy, proof of effect."""
