//! Index types. Entities live in flat vectors and refer to each other by index.
pub type PcpuId = u32;
/// Global vCPU index (across all VMs).
pub type VcpuId = u32;
pub type TaskId = u32;
pub type VmId = u32;
