//! Kernel profiles: which mechanisms and tunables a host or guest kernel
//! version has. `host.kernel` and `vm.guest.kernel` name a profile; the
//! profile's settings are defaults written into the scenario before it is
//! checked, so any single setting can still be overridden in the file or with
//! `--set`, and every setting a profile makes is validated by the one schema.
//!
//! Each paper's experiments name the kernels of its testbed (its setup
//! section), so its baseline is the one the paper measured against.

use crate::scenario::ScenarioError;

/// One setting: a dotted key relative to the table the profile applies to
/// (`host` or a VM's `guest`) and its value in TOML syntax.
pub type Setting = (&'static str, &'static str);

pub struct KernelProfile {
    pub name: &'static str,
    pub description: &'static str,
    /// Defaults for the `host` table when the host runs this kernel.
    pub host: &'static [Setting],
    /// Defaults for a VM's `guest` table when the guest runs this kernel.
    pub guest: &'static [Setting],
}

/// The profile a scenario gets when it names none: the Linux release whose
/// `kernel/sched/fair.c` the CFS model follows (the last before EEVDF).
pub const DEFAULT_KERNEL: &str = "linux-6.5";

/// Steal time excluded from the task clock: CONFIG_PARAVIRT_TIME_ACCOUNTING,
/// merged in Linux 3.1 (commit 095c0aa83e52), on in distribution kernels
/// since; every profile below has it.
const STEAL_ACCOUNTING: Setting = ("steal_accounting", "true");

pub const PROFILES: &[KernelProfile] = &[
    KernelProfile {
        name: "linux-3.2",
        description: "Linux 3.2 host (KVM) and guest, the testbed of the demand-based coordinated scheduling paper (ASPLOS'13, section 5)",
        host: &[],
        guest: &[STEAL_ACCOUNTING],
    },
    KernelProfile {
        name: "linux-3.18",
        description: "Linux 3.18.4 guest (and dom0), the testbed of the IRS paper (Middleware'17, section 5)",
        host: &[],
        guest: &[STEAL_ACCOUNTING],
    },
    KernelProfile {
        name: "linux-4.4",
        description: "Linux 4.4.0 guest (Ubuntu 16.04.3), the testbed of the Tableau paper (EuroSys'18, section 7)",
        host: &[],
        guest: &[STEAL_ACCOUNTING],
    },
    KernelProfile {
        name: "linux-4.14",
        description: "Linux 4.14.0 guest (Ubuntu 18.04), the guests of the Anubis paper (SoCC'23, section 6)",
        host: &[],
        guest: &[STEAL_ACCOUNTING],
    },
    KernelProfile {
        name: "linux-5.10",
        description: "Linux 5.10.90 host (KVM), the host of the Anubis paper (SoCC'23, section 6)",
        host: &[],
        guest: &[STEAL_ACCOUNTING],
    },
    KernelProfile {
        name: "linux-6.1",
        description: "Linux 6.1.36 host (KVM) and guest, the testbed of the vSched paper (EuroSys'25, section 5.1)",
        host: &[],
        guest: &[STEAL_ACCOUNTING],
    },
    KernelProfile {
        name: "linux-6.5",
        description: "Linux 6.5 host (KVM) and guest: the last CFS release, whose fair.c the model follows (default)",
        host: &[],
        guest: &[STEAL_ACCOUNTING],
    },
];

pub fn find(name: &str) -> Option<&'static KernelProfile> {
    PROFILES.iter().find(|p| p.name == name)
}

pub fn names() -> String {
    PROFILES.iter().map(|p| p.name).collect::<Vec<_>>().join(", ")
}

/// Where a profile applies in the scenario document.
#[derive(Clone, Copy)]
enum Level {
    Host,
    Guest,
}

/// Writes the settings of the kernels the scenario names into its document,
/// under every key the document does not set itself.
pub fn apply_profiles(doc: &mut toml::Table) -> Result<(), ScenarioError> {
    if let Some(host) = table_at(doc, "host")? {
        apply(host, "host", Level::Host)?;
    } else {
        let mut host = toml::Table::new();
        apply(&mut host, "host", Level::Host)?;
        if !host.is_empty() {
            doc.insert("host".into(), toml::Value::Table(host));
        }
    }
    if let Some(toml::Value::Array(vms)) = doc.get_mut("vm") {
        for (i, vm) in vms.iter_mut().enumerate() {
            let Some(vm) = vm.as_table_mut() else { continue };
            let guest = vm.entry("guest").or_insert_with(|| toml::Value::Table(toml::Table::new()));
            if let Some(guest) = guest.as_table_mut() {
                apply(guest, &format!("vm[{i}].guest"), Level::Guest)?;
            }
        }
    }
    Ok(())
}

fn table_at<'a>(doc: &'a mut toml::Table, key: &str) -> Result<Option<&'a mut toml::Table>, ScenarioError> {
    match doc.get_mut(key) {
        None => Ok(None),
        Some(toml::Value::Table(t)) => Ok(Some(t)),
        Some(_) => Err(ScenarioError { path: key.into(), reason: "must be a table".into() }),
    }
}

fn apply(table: &mut toml::Table, path: &str, level: Level) -> Result<(), ScenarioError> {
    let name = match table.get("kernel") {
        None => DEFAULT_KERNEL.to_string(),
        Some(toml::Value::String(s)) => s.clone(),
        Some(_) => return Err(ScenarioError { path: format!("{path}.kernel"), reason: "must be a kernel profile name (a string)".into() }),
    };
    let profile = find(&name).ok_or_else(|| ScenarioError {
        path: format!("{path}.kernel"),
        reason: format!("unknown kernel profile `{name}`; known: {}", names()),
    })?;
    let settings = match level {
        Level::Host => profile.host,
        Level::Guest => profile.guest,
    };
    for (key, value) in settings {
        set_default(table, key, value);
    }
    Ok(())
}

/// Inserts `value` at dotted `key` unless something is already there.
pub(crate) fn set_default(table: &mut toml::Table, key: &str, value: &str) {
    let (head, last) = match key.rsplit_once('.') {
        Some((h, l)) => (Some(h), l),
        None => (None, key),
    };
    let mut t = table;
    for seg in head.into_iter().flat_map(|h| h.split('.')) {
        let entry = t.entry(seg).or_insert_with(|| toml::Value::Table(toml::Table::new()));
        match entry.as_table_mut() {
            Some(inner) => t = inner,
            // Not a table: the schema check reports the user's value.
            None => return,
        }
    }
    if !t.contains_key(last) {
        let parsed: toml::Table = format!("v = {value}").parse().expect("profile values are TOML literals");
        t.insert(last.into(), parsed["v"].clone());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_profile_value_parses_and_names_are_unique() {
        let mut seen = std::collections::BTreeSet::new();
        for p in PROFILES {
            assert!(seen.insert(p.name), "duplicate profile {}", p.name);
            for (key, value) in p.host.iter().chain(p.guest) {
                let mut t = toml::Table::new();
                set_default(&mut t, key, value);
                assert!(!t.is_empty(), "{}: {key}", p.name);
            }
        }
        assert!(find(DEFAULT_KERNEL).is_some());
    }

    #[test]
    fn unknown_kernels_are_named_with_the_known_ones() {
        let base = "name='t'\nduration_ms=1\n[[vm]]\nname='a'\n";
        let e = crate::parse(base, &["host.kernel='linux-9'".into()]).unwrap_err();
        assert_eq!(e.path, "host.kernel");
        assert!(e.reason.contains("linux-9") && e.reason.contains(DEFAULT_KERNEL), "{e}");
        let e = crate::parse(base, &["vm[0].guest.kernel='bsd'".into()]).unwrap_err();
        assert_eq!(e.path, "vm[0].guest.kernel");
        let s = crate::parse(base, &["vm[0].guest.kernel='linux-3.2'".into()]).unwrap();
        assert_eq!((s.host.kernel.as_str(), s.vms[0].guest.kernel.as_str()), (DEFAULT_KERNEL, "linux-3.2"));
    }

    #[test]
    fn a_profile_fills_only_unset_keys() {
        let mut t: toml::Table = "a = 1\n[b]\nc = 2\n".parse().unwrap();
        set_default(&mut t, "a", "5");
        set_default(&mut t, "b.c", "5");
        set_default(&mut t, "b.d", "true");
        set_default(&mut t, "e.f", "'x'");
        assert_eq!(t.to_string(), "a = 1\n\n[b]\nc = 2\nd = true\n\n[e]\nf = \"x\"\n");
    }
}
