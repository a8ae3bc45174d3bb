"""What a run prints and writes: tables, the summary, the run page, the dashboard, cross-run reports."""
