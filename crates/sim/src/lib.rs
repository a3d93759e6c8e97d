//! vmsched-sim
