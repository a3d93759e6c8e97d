//! vmsched-plan (work in progress)
