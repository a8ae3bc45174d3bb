"""How cases run: the case runner, each case in forked processes, workers, allocators, distributed ranks."""
