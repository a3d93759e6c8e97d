//! Built-in scenarios, embedded from the repository's `scenarios/` folder so
//! that the binary and the Python package carry them.

pub struct Builtin {
    pub name: &'static str,
    pub toml: &'static str,
}

/// `"name"` is `scenarios/name.toml`; `"name" in "dir"` is `scenarios/dir/name.toml`.
macro_rules! builtin {
    ($($name:literal $(in $dir:literal)?),* $(,)?) => {
        &[$(Builtin { name: $name, toml: include_str!(concat!("../../../scenarios/", $($dir, "/",)? $name, ".toml")) }),*]
    };
}

pub const BUILTINS: &[Builtin] = builtin!(
    "default",
    "two-vms-one-pcpu",
    "anubis-table1",
    "anubis-table1-rows",
    "anubis-table1-two-hops",
    "anubis-fig5",
    "anubis-fig3",
    "anubis-fig9",
    "anubis-fig6b",
    "anubis-fig7",
    "anubis-fig8",
    "vcpu-stacking",
    "lock-holder-preemption",
    "stalled-running-task",
    "bench-mixed-64",
    "bench-simpy-rr",
    "vsched-fig2",
    "vsched-fig3",
    "irs-parsec",
    "irs-npb",
    "vsched-fig10",
    "vsched-fig11",
    "vsched-fig14",
    "vsched-fig15",
    "uvf-fig7a",
    "uvf-fig7b",
    "uvf-fig7c",
    "uvf-fig8",
    "uvf-fig9",
    "uvf-fig10",
    "uvf-table2",
    "tableau-fig5-bg-none" in "tableau",
    "tableau-fig5-bg-io" in "tableau",
    "tableau-fig5-bg-cpu" in "tableau",
    "tableau-fig6-bg-none" in "tableau",
    "tableau-fig6-bg-io" in "tableau",
    "tableau-fig6-bg-cpu" in "tableau",
    "tableau-fig7" in "tableau",
    "vsched-fig4-straggler",
    "vsched-fig4-stacked",
    "vsched-fig21",
    "vsched-fig12",
    "vsched-fig18",
    "vsched-fig19",
    "irs-fig1",
    "irs-fig1b",
    "irs-fig7",
    "irs-fig8",
    "irs-fig9",
    "irs-fig10",
    "irs-fig11",
    "irs-fig12",
    "irs-fig13",
    "eevdf-wakeup-latency",
    "vsched-fig16",
    "vsched-fig13",
    "tableau-sla-peak" in "tableau",
);

/// The ground-truth cases of `vmsched real compare --suite groundtruth`
/// (docs/groundtruth.md): run for real on the machine at hand, so they are
/// not among the built-ins the golden test stores.
pub const GROUNDTRUTH: &[Builtin] = builtin!(
    "gt-nice-share" in "groundtruth",
    "gt-periodic-alone" in "groundtruth",
    "gt-periodic-beside-hog" in "groundtruth",
    "gt-periodic-custom-slice" in "groundtruth",
    "gt-server-30" in "groundtruth",
    "gt-server-80" in "groundtruth",
    "gt-barrier" in "groundtruth",
    "gt-barrier-beside-hog" in "groundtruth",
    "gt-pipe-pingpong" in "groundtruth",
    "gt-filler-beside-server" in "groundtruth",
);

pub fn find(name: &str) -> Option<&'static Builtin> {
    BUILTINS.iter().find(|b| b.name == name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_builtin_parses_and_is_named_after_its_file() {
        for b in BUILTINS.iter().chain(GROUNDTRUTH) {
            let s = crate::parse(b.toml, &[]).unwrap_or_else(|e| panic!("{}: {e}", b.name));
            assert_eq!(s.name, b.name);
            assert!(!s.description.is_empty(), "{} has no description", b.name);
        }
    }
}
