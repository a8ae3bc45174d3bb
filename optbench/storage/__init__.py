"""What a run keeps: records, baselines, histories, run folders, the environment key."""
