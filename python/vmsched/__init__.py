"""vmsched: a laboratory for CPU scheduling in virtualized clouds."""
