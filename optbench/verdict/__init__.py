"""The verdict and its statistics: intervals, the history-based test, the gate, change points."""
