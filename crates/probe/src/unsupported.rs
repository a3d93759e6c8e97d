//! Non-Linux stand-ins: the probers read Linux interfaces (/proc/stat steal,
//! schedstat, sched_setaffinity), so elsewhere every entry point says so.
use serde_json::Value;

const NEEDS_LINUX: &str = "the vCPU probers need Linux (they read /proc/stat steal time and pin threads with sched_setaffinity)";

#[derive(Clone, Debug, Default, serde::Deserialize)]
pub struct ProbeConfig {}

pub struct Session;

impl Session {
    pub fn new(_cfg: ProbeConfig) -> Result<Self, String> {
        Err(NEEDS_LINUX.into())
    }
}

pub fn probe_once(_cfg: ProbeConfig) -> Result<Value, String> {
    Err(NEEDS_LINUX.into())
}

pub fn bench(_cfg: ProbeConfig, _repeats: u32) -> Result<Value, String> {
    Err(NEEDS_LINUX.into())
}
