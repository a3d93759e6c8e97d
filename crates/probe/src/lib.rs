//! vmsched-probe (work in progress)
