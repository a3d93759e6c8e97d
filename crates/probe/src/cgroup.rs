//! The RWC action (vSched §3.4): confine a cgroup's cpuset to the vCPUs worth
//! placing tasks on. cgroup v2 is preferred; on a v1 or hybrid machine the v1
//! cpuset hierarchy is used (Documentation/admin-guide/cgroup-v2.rst "Cpuset";
//! Documentation/admin-guide/cgroup-v1/cpusets.rst).
use std::io;
use std::path::{Path, PathBuf};

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CpusetFile {
    pub version: &'static str,
    pub cgroup_dir: PathBuf,
    pub cpus_file: PathBuf,
}

/// Finds the cpuset hierarchy from /proc/self/mounts: a cgroup2 mount whose
/// root delegates the cpuset controller, else a v1 mount with the cpuset option.
pub fn cpuset_root() -> Result<(&'static str, PathBuf), String> {
    let mounts = std::fs::read_to_string("/proc/self/mounts").map_err(|e| format!("cannot read /proc/self/mounts: {e}"))?;
    let mut v1 = None;
    for line in mounts.lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.len() < 4 {
            continue;
        }
        let dir = PathBuf::from(f[1]);
        if f[2] == "cgroup2" {
            let controllers = std::fs::read_to_string(dir.join("cgroup.controllers")).unwrap_or_default();
            if controllers.split_whitespace().any(|c| c == "cpuset") {
                return Ok(("v2", dir));
            }
        } else if f[2] == "cgroup" && f[3].split(',').any(|o| o == "cpuset") {
            v1 = Some(dir);
        }
    }
    v1.map(|d| ("v1", d)).ok_or_else(|| "no cpuset cgroup hierarchy is mounted (neither v2 with the cpuset controller nor v1 cpuset)".to_string())
}

/// Resolves a cgroup path such as "/vmsched" or "machine.slice/app".
pub fn locate(cgroup: &str) -> Result<CpusetFile, String> {
    let (version, root) = cpuset_root()?;
    let relative = cgroup.trim_start_matches('/');
    if relative.split('/').any(|c| c == "..") {
        return Err(format!("cgroup {cgroup:?} must not contain '..'"));
    }
    let cgroup_dir = root.join(relative);
    if !cgroup_dir.is_dir() {
        return Err(format!("cgroup {cgroup:?} does not exist under the {version} cpuset hierarchy {}", root.display()));
    }
    let cpus_file = cgroup_dir.join("cpuset.cpus");
    if !cpus_file.exists() {
        return Err(format!(
            "{} has no cpuset.cpus: enable the controller in its parent first (echo +cpuset > {}/cgroup.subtree_control)",
            cgroup_dir.display(),
            cgroup_dir.parent().unwrap_or(Path::new("/")).display()
        ));
    }
    Ok(CpusetFile { version, cgroup_dir, cpus_file })
}

pub fn read_cpus(file: &CpusetFile) -> Result<String, String> {
    std::fs::read_to_string(&file.cpus_file)
        .map(|s| s.trim().to_string())
        .map_err(|e| format!("cannot read {}: {e}", file.cpus_file.display()))
}

/// Writes a CPU list. A cgroup file takes one write(2) of the whole value, so
/// it is written directly rather than through a temporary file.
pub fn write_cpus(file: &CpusetFile, list: &str) -> Result<(), String> {
    std::fs::write(&file.cpus_file, list).map_err(|e| match e.kind() {
        io::ErrorKind::PermissionDenied => format!("permission denied writing {}: the RWC action needs root", file.cpus_file.display()),
        _ => format!("the kernel refused cpuset {list:?} for {}: {e}", file.cpus_file.display()),
    })
}
