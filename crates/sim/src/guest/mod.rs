//! The guest kernel's scheduler, one instance per VM. It sees its vCPUs only as
//! a Linux guest does, through [`GuestView`]: whether each is preempted (the
//! KVM steal-time page's `preempted` flag) and the steal time published to it.

pub mod linux;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HostState {
    Running,
    /// Runnable on the host but not running (accrues steal).
    Preempted,
    Halted,
}

pub struct GuestView<'a> {
    pub now: u64,
    /// Host state of each of this VM's vCPUs (VM-local index).
    pub host_state: &'a [HostState],
    /// Steal time KVM has published to each vCPU (updated when it enters).
    pub steal_published: &'a [u64],
}

/// What a guest tick asks of the engine.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct TickOut {
    /// The current task should be switched out.
    pub resched: bool,
    /// An idle vCPU received work and must be woken (reschedule IPI).
    pub kick: Option<u32>,
}
