//! Table formats: JSON for people and a compact, versioned, checksummed binary
//! layout for machines (documented byte by byte in docs/plan.md). Both rebuild
//! the slice table on load, so a reader never trusts a stored index.

use serde::{Deserialize, Serialize};
use std::collections::HashMap;

use crate::table::{Allocation, CoreTable, Placement, Table, VcpuEntry};

pub const JSON_FORMAT: &str = "vmsched-tableau-table";
pub const FORMAT_VERSION: u16 = 1;
pub const BINARY_MAGIC: &[u8; 8] = b"VMSTABLE";

#[derive(Serialize, Deserialize)]
struct JsonTable {
    format: String,
    version: u16,
    table_length_ns: u64,
    cores: Vec<JsonCore>,
    vcpus: Vec<VcpuEntry>,
}

#[derive(Serialize, Deserialize)]
struct JsonCore {
    core: u32,
    slice_ns: u64,
    slice_count: usize,
    home_vcpus: Vec<JsonVcpuRef>,
    allocations: Vec<JsonAllocation>,
}

#[derive(Serialize, Deserialize)]
struct JsonVcpuRef {
    vm: String,
    vcpu: u32,
}

#[derive(Serialize, Deserialize)]
struct JsonAllocation {
    vm: String,
    vcpu: u32,
    start_ns: u64,
    end_ns: u64,
}

pub fn to_json(table: &Table) -> String {
    let name = |v: u32| (table.vcpus[v as usize].vm.clone(), table.vcpus[v as usize].vcpu);
    let doc = JsonTable {
        format: JSON_FORMAT.into(),
        version: FORMAT_VERSION,
        table_length_ns: table.table_length_ns,
        cores: table
            .cores
            .iter()
            .map(|c| JsonCore {
                core: c.core,
                slice_ns: c.slice_ns,
                slice_count: c.slices.len(),
                home_vcpus: c.home_vcpus.iter().map(|&v| JsonVcpuRef { vm: name(v).0, vcpu: name(v).1 }).collect(),
                allocations: c
                    .allocations
                    .iter()
                    .map(|a| JsonAllocation { vm: name(a.vcpu).0, vcpu: name(a.vcpu).1, start_ns: a.start_ns, end_ns: a.end_ns })
                    .collect(),
            })
            .collect(),
        vcpus: table.vcpus.clone(),
    };
    let mut text = serde_json::to_string_pretty(&doc).expect("table serializes");
    text.push('\n');
    text
}

pub fn from_json(text: &str) -> Result<Table, String> {
    let doc: JsonTable = serde_json::from_str(text).map_err(|e| e.to_string())?;
    if doc.format != JSON_FORMAT || doc.version != FORMAT_VERSION {
        return Err(format!("not a {JSON_FORMAT} version {FORMAT_VERSION} document"));
    }
    let index: HashMap<(&str, u32), u32> =
        doc.vcpus.iter().enumerate().map(|(i, v)| ((v.vm.as_str(), v.vcpu), i as u32)).collect();
    let find = |vm: &str, vcpu: u32| index.get(&(vm, vcpu)).copied().ok_or_else(|| format!("unknown vCPU {vm}/{vcpu}"));
    let mut cores = Vec::with_capacity(doc.cores.len());
    for c in &doc.cores {
        let allocations = c
            .allocations
            .iter()
            .map(|a| Ok(Allocation { vcpu: find(&a.vm, a.vcpu)?, start_ns: a.start_ns, end_ns: a.end_ns }))
            .collect::<Result<Vec<_>, String>>()?;
        let home = c.home_vcpus.iter().map(|h| find(&h.vm, h.vcpu)).collect::<Result<Vec<_>, String>>()?;
        cores.push(CoreTable::new(c.core, allocations, home, doc.table_length_ns));
    }
    Ok(Table { table_length_ns: doc.table_length_ns, cores, vcpus: doc.vcpus })
}

fn placement_code(p: Placement) -> u8 {
    match p {
        Placement::Dedicated => 0,
        Placement::Partitioned => 1,
        Placement::Split => 2,
        Placement::Clustered => 3,
    }
}

fn placement_from(code: u8) -> Result<Placement, String> {
    Ok(match code {
        0 => Placement::Dedicated,
        1 => Placement::Partitioned,
        2 => Placement::Split,
        3 => Placement::Clustered,
        _ => return Err(format!("unknown placement code {code}")),
    })
}

/// Encodes the table in the binary layout of docs/plan.md (little-endian,
/// CRC-32 trailer).
pub fn to_binary(table: &Table) -> Vec<u8> {
    let mut names: Vec<&str> = Vec::new();
    let mut name_index: HashMap<&str, u32> = HashMap::new();
    for v in &table.vcpus {
        name_index.entry(v.vm.as_str()).or_insert_with(|| {
            names.push(v.vm.as_str());
            names.len() as u32 - 1
        });
    }
    let mut out = Vec::new();
    out.extend_from_slice(BINARY_MAGIC);
    out.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
    out.extend_from_slice(&0u16.to_le_bytes());
    out.extend_from_slice(&(names.len() as u32).to_le_bytes());
    out.extend_from_slice(&table.table_length_ns.to_le_bytes());
    out.extend_from_slice(&(table.vcpus.len() as u32).to_le_bytes());
    out.extend_from_slice(&(table.cores.len() as u32).to_le_bytes());
    for name in &names {
        out.extend_from_slice(&(name.len() as u16).to_le_bytes());
        out.extend_from_slice(name.as_bytes());
    }
    for v in &table.vcpus {
        out.extend_from_slice(&name_index[v.vm.as_str()].to_le_bytes());
        out.extend_from_slice(&v.vcpu.to_le_bytes());
        out.extend_from_slice(&v.utilization.to_le_bytes());
        out.extend_from_slice(&v.latency_ms.to_le_bytes());
        out.extend_from_slice(&v.period_ns.to_le_bytes());
        out.extend_from_slice(&v.budget_ns.to_le_bytes());
        out.extend_from_slice(&[placement_code(v.placement), 0, 0, 0]);
    }
    for c in &table.cores {
        out.extend_from_slice(&c.core.to_le_bytes());
        out.extend_from_slice(&(c.allocations.len() as u32).to_le_bytes());
        out.extend_from_slice(&c.slice_ns.to_le_bytes());
        out.extend_from_slice(&(c.slices.len() as u32).to_le_bytes());
        out.extend_from_slice(&(c.home_vcpus.len() as u32).to_le_bytes());
        for a in &c.allocations {
            out.extend_from_slice(&a.start_ns.to_le_bytes());
            out.extend_from_slice(&a.end_ns.to_le_bytes());
            out.extend_from_slice(&a.vcpu.to_le_bytes());
            out.extend_from_slice(&0u32.to_le_bytes());
        }
        for s in &c.slices {
            out.extend_from_slice(&s.to_le_bytes());
        }
        for h in &c.home_vcpus {
            out.extend_from_slice(&h.to_le_bytes());
        }
    }
    let checksum = crc32fast::hash(&out);
    out.extend_from_slice(&checksum.to_le_bytes());
    out
}

struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], String> {
        let end = self.at.checked_add(n).filter(|&e| e <= self.bytes.len()).ok_or("truncated table")?;
        let s = &self.bytes[self.at..end];
        self.at = end;
        Ok(s)
    }
    fn u8(&mut self) -> Result<u8, String> {
        Ok(self.take(1)?[0])
    }
    fn u16(&mut self) -> Result<u16, String> {
        Ok(u16::from_le_bytes(self.take(2)?.try_into().unwrap()))
    }
    fn u32(&mut self) -> Result<u32, String> {
        Ok(u32::from_le_bytes(self.take(4)?.try_into().unwrap()))
    }
    fn u64(&mut self) -> Result<u64, String> {
        Ok(u64::from_le_bytes(self.take(8)?.try_into().unwrap()))
    }
    fn f64(&mut self) -> Result<f64, String> {
        Ok(f64::from_le_bytes(self.take(8)?.try_into().unwrap()))
    }
}

/// Decodes and checks a binary table; the slice table is rebuilt from the
/// allocations and must match the stored one.
pub fn from_binary(bytes: &[u8]) -> Result<Table, String> {
    if bytes.len() < 4 {
        return Err("truncated table".into());
    }
    let (body, trailer) = bytes.split_at(bytes.len() - 4);
    if crc32fast::hash(body) != u32::from_le_bytes(trailer.try_into().unwrap()) {
        return Err("checksum mismatch".into());
    }
    let mut r = Reader { bytes: body, at: 0 };
    if r.take(8)? != BINARY_MAGIC {
        return Err("not a vmsched table (bad magic)".into());
    }
    let version = r.u16()?;
    if version != FORMAT_VERSION {
        return Err(format!("unsupported table version {version}"));
    }
    r.u16()?;
    let name_count = r.u32()? as usize;
    let table_length_ns = r.u64()?;
    let vcpu_count = r.u32()? as usize;
    let core_count = r.u32()? as usize;
    let mut names = Vec::new();
    for _ in 0..name_count {
        let len = r.u16()? as usize;
        names.push(String::from_utf8(r.take(len)?.to_vec()).map_err(|_| "VM name is not UTF-8")?);
    }
    let mut vcpus = Vec::new();
    for _ in 0..vcpu_count {
        let vm = names.get(r.u32()? as usize).ok_or("VM name index out of range")?.clone();
        let vcpu = r.u32()?;
        let utilization = r.f64()?;
        let latency_ms = r.f64()?;
        let period_ns = r.u64()?;
        let budget_ns = r.u64()?;
        let placement = placement_from(r.u8()?)?;
        r.take(3)?;
        vcpus.push(VcpuEntry { vm, vcpu, utilization, latency_ms, period_ns, budget_ns, placement, cores: Vec::new() });
    }
    let mut cores = Vec::new();
    for _ in 0..core_count {
        let core = r.u32()?;
        let allocation_count = r.u32()? as usize;
        let slice_ns = r.u64()?;
        let slice_count = r.u32()? as usize;
        let home_count = r.u32()? as usize;
        let mut allocations = Vec::new();
        for _ in 0..allocation_count {
            let start_ns = r.u64()?;
            let end_ns = r.u64()?;
            let vcpu = r.u32()?;
            r.u32()?;
            if vcpu as usize >= vcpu_count {
                return Err("allocation names an unknown vCPU".into());
            }
            allocations.push(Allocation { vcpu, start_ns, end_ns });
        }
        let slices = (0..slice_count).map(|_| r.u32()).collect::<Result<Vec<_>, _>>()?;
        let home = (0..home_count).map(|_| r.u32()).collect::<Result<Vec<_>, _>>()?;
        let rebuilt = CoreTable::new(core, allocations, home, table_length_ns);
        if rebuilt.slice_ns != slice_ns || rebuilt.slices != slices {
            return Err(format!("core {core}: stored slice table does not match its allocations"));
        }
        cores.push(rebuilt);
    }
    if r.at != body.len() {
        return Err("trailing bytes after the last core".into());
    }
    for (c, core) in cores.iter().enumerate() {
        for a in &core.allocations {
            let list = &mut vcpus[a.vcpu as usize].cores;
            if !list.contains(&cores[c].core) {
                list.push(cores[c].core);
            }
        }
    }
    for v in &mut vcpus {
        v.cores.sort_unstable();
    }
    Ok(Table { table_length_ns, cores, vcpus })
}
