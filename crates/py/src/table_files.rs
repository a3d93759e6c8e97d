//! The recorded tables of a run written as Parquet files while it runs, one
//! row group per chunk the engine hands over: the rows go from the engine's
//! column vectors to the file encoders with no Python object in between, so
//! a recording run loads no data-frame library. Each column is encoded the way
//! its values make cheapest to write (see [`Layout`]): compression, the
//! largest cost of writing, is spent only where the encoding leaves bytes for
//! it to find.

use std::collections::HashMap;
use std::fs::File;
use std::sync::Arc;

use parquet::basic::{Compression, Encoding, LogicalType, Repetition, Type as PhysicalType, ZstdLevel};
use parquet::data_type::{ByteArray, ByteArrayType, DoubleType, Int64Type};
use parquet::file::properties::{EnabledStatistics, WriterProperties};
use parquet::file::writer::SerializedFileWriter;
use parquet::schema::types::{ColumnPath, Type};

use vmsched_sim::world::record::{Column, Tables};

/// One open file per table named at the start, written to the path given
/// for it (the caller renames it into place once the run has succeeded).
pub struct TableFiles {
    paths: HashMap<String, String>,
    writers: Vec<(&'static str, SerializedFileWriter<File>)>,
}

impl TableFiles {
    /// Files for the tables named in `paths` (table -> file path).
    pub fn new(paths: HashMap<String, String>) -> Self {
        TableFiles { paths, writers: Vec::new() }
    }

    /// Appends a chunk: each table's rows as one row group of its file (the
    /// file is created, with the table's schema, at its first chunk).
    pub fn write(&mut self, tables: &Tables) -> Result<(), String> {
        for (name, columns) in tables.named() {
            let Some(path) = self.paths.get(name) else { continue };
            let at = match self.writers.iter().position(|(n, _)| *n == name) {
                Some(at) => at,
                None => {
                    let file = File::create(path).map_err(|e| format!("{path}: {e}"))?;
                    let (schema, properties) = schema_of(name, &columns);
                    let writer = SerializedFileWriter::new(file, schema, properties).map_err(|e| format!("{path}: {e}"))?;
                    self.writers.push((name, writer));
                    self.writers.len() - 1
                }
            };
            let rows = columns.first().map_or(0, |(_, c)| c.len());
            if rows > 0 {
                write_row_group(&mut self.writers[at].1, columns).map_err(|e| format!("{path}: {e}"))?;
            }
        }
        Ok(())
    }

    /// Closes every file (writing its footer).
    pub fn finish(self) -> Result<(), String> {
        for (name, writer) in self.writers {
            writer.close().map_err(|e| format!("{}: {e}", self.paths[name]))?;
        }
        Ok(())
    }
}

/// How a column is stored: Parquet's encodings decide how many bytes reach
/// the compressor, and zstd's cost grows with them.
#[derive(Clone, Copy, PartialEq, Debug)]
enum Layout {
    /// Names: a dictionary of the distinct names per row group, and each row's
    /// number in it, run-length encoded, zstd over both.
    Names,
    /// Integers that repeat in runs or cycle over a few values (a sample's
    /// time on every row of the sample, a vCPU's or pCPU's number): the same,
    /// a dictionary and run-length encoded numbers, zstd over both.
    Repeating,
    /// Other integers (times, durations, counters): differences from the
    /// previous value, bit-packed (DELTA_BINARY_PACKED), left uncompressed. On
    /// the request columns of the peer cases of `vmsched bench --peer` this
    /// gives files a tenth smaller than zstd over the plain values, for under
    /// half the work (measured on those tables with pyarrow's writer).
    Delta,
    /// Floating-point values: as they are (PLAIN), zstd over them.
    Plain,
}

/// The sample table's integer columns that repeat: every row of a sample has
/// its time, and the vCPU and pCPU numbers cycle with the entities.
const REPEATING: [(&str, &str); 3] = [("samples", "time_ns"), ("samples", "vcpu"), ("samples", "pcpu")];

fn layout(table: &str, name: &str, column: &Column<'_>) -> Layout {
    match column {
        Column::Text(_) | Column::Coded { .. } => Layout::Names,
        Column::F64(_) => Layout::Plain,
        Column::U32(_) | Column::U64(_) | Column::I64(_) if REPEATING.contains(&(table, name)) => Layout::Repeating,
        Column::U32(_) | Column::U64(_) | Column::I64(_) => Layout::Delta,
    }
}

/// Integers are stored as INT64 (the unsigned ones all fit), floats as
/// DOUBLE, text as UTF-8 strings, each in its [`Layout`]; zstd at the crate's
/// default level where a layout compresses.
fn schema_of(table: &str, columns: &[(&'static str, Column<'_>)]) -> (Arc<Type>, Arc<WriterProperties>) {
    // Minimum and maximum per column chunk (a row group's), not per page: what
    // a reader needs to skip row groups, for less work per value. None for the
    // text columns: a chunk holds the rows of one stretch of time, for every VM,
    // workload and metric, so each row group's range of names is the whole
    // range and lets a reader skip nothing, while keeping it compared every
    // row's string twice (the largest single cost of writing the samples).
    let mut properties = WriterProperties::builder()
        .set_compression(Compression::ZSTD(ZstdLevel::default()))
        .set_statistics_enabled(EnabledStatistics::Chunk)
        .set_dictionary_enabled(false);
    let mut fields = Vec::new();
    for (name, column) in columns {
        let path = ColumnPath::from(*name);
        properties = match layout(table, name, column) {
            Layout::Names => properties.set_column_dictionary_enabled(path.clone(), true).set_column_statistics_enabled(path, EnabledStatistics::None),
            Layout::Repeating => properties.set_column_dictionary_enabled(path, true),
            Layout::Delta => properties.set_column_encoding(path.clone(), Encoding::DELTA_BINARY_PACKED).set_column_compression(path, Compression::UNCOMPRESSED),
            Layout::Plain => properties,
        };
        let builder = match column {
            Column::U32(_) | Column::U64(_) | Column::I64(_) => Type::primitive_type_builder(name, PhysicalType::INT64),
            Column::F64(_) => Type::primitive_type_builder(name, PhysicalType::DOUBLE),
            Column::Text(_) | Column::Coded { .. } => Type::primitive_type_builder(name, PhysicalType::BYTE_ARRAY).with_logical_type(Some(LogicalType::String)),
        };
        fields.push(Arc::new(builder.with_repetition(Repetition::REQUIRED).build().expect("a plain column type")));
    }
    let schema = Type::group_type_builder("schema").with_fields(fields).build().expect("a flat schema");
    (Arc::new(schema), Arc::new(properties.build()))
}

/// A text column's values, one buffer per distinct string shared by its rows
/// (a name repeats on every row of its VM or metric: copying it for each row
/// cost more than encoding the column). Rows that hold equal text at
/// different addresses get equal buffers of their own.
fn shared_text(rows: &[&str]) -> Vec<ByteArray> {
    let mut distinct: HashMap<(usize, usize), ByteArray> = HashMap::new();
    rows.iter().map(|&row| distinct.entry((row.as_ptr() as usize, row.len())).or_insert_with(|| ByteArray::from(row)).clone()).collect()
}

/// A coded column's values: one buffer per name, shared by the rows naming it.
fn coded_text(codes: &[u32], names: &[Arc<str>]) -> Vec<ByteArray> {
    let names: Vec<ByteArray> = names.iter().map(|name| ByteArray::from(&**name)).collect();
    codes.iter().map(|&code| names[code as usize].clone()).collect()
}

/// The engine's unsigned nanoseconds and counts as Parquet's INT64, in place:
/// every value is below 2^63 (585 years of nanoseconds).
fn as_i64(values: &[u64]) -> &[i64] {
    // SAFETY: u64 and i64 have the same size and alignment, and every bit
    // pattern is a valid i64; the slice is only read.
    unsafe { std::slice::from_raw_parts(values.as_ptr().cast::<i64>(), values.len()) }
}

fn write_row_group(writer: &mut SerializedFileWriter<File>, columns: Vec<(&'static str, Column<'_>)>) -> parquet::errors::Result<()> {
    let mut group = writer.next_row_group()?;
    for (_, column) in columns {
        let mut out = group.next_column()?.expect("a column per schema field");
        match column {
            Column::U32(v) => out.typed::<Int64Type>().write_batch(&v.iter().map(|&x| i64::from(x)).collect::<Vec<_>>(), None, None)?,
            Column::U64(v) => out.typed::<Int64Type>().write_batch(as_i64(v), None, None)?,
            Column::I64(v) => out.typed::<Int64Type>().write_batch(v, None, None)?,
            Column::F64(v) => out.typed::<DoubleType>().write_batch(v, None, None)?,
            Column::Text(v) => out.typed::<ByteArrayType>().write_batch(&shared_text(&v), None, None)?,
            Column::Coded { codes, names } => out.typed::<ByteArrayType>().write_batch(&coded_text(codes, names), None, None)?,
        };
        out.close()?;
    }
    group.close()?;
    Ok(())
}
