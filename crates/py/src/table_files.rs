//! The recorded tables of a run written as Parquet files while it runs, one
//! row group per chunk the engine hands over: the rows go from the engine's
//! column vectors to the file encoders with no Python object in between, so
//! a recording run loads no data-frame library and pays for its tables
//! about what compressing them costs.

use std::collections::HashMap;
use std::fs::File;
use std::sync::Arc;

use parquet::basic::{Compression, LogicalType, Repetition, Type as PhysicalType, ZstdLevel};
use parquet::data_type::{ByteArray, ByteArrayType, DoubleType, Int64Type};
use parquet::file::properties::{EnabledStatistics, WriterProperties};
use parquet::file::writer::SerializedFileWriter;
use parquet::schema::types::Type;

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
                    let (schema, properties) = schema_of(&columns);
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

/// Integers are stored as INT64 (the unsigned ones all fit), floats as
/// DOUBLE, text as UTF-8 strings; dictionaries for the text columns only:
/// the times and values are mostly distinct, and a dictionary of them makes
/// the file about half again as large. zstd at the crate's default level.
fn schema_of(columns: &[(&'static str, Column<'_>)]) -> (Arc<Type>, Arc<WriterProperties>) {
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
    let fields = columns
        .iter()
        .map(|(name, column)| {
            let builder = match column {
                Column::U32(_) | Column::U64(_) | Column::I64(_) => Type::primitive_type_builder(name, PhysicalType::INT64),
                Column::F64(_) => Type::primitive_type_builder(name, PhysicalType::DOUBLE),
                Column::Text(_) => {
                    properties = properties
                        .clone()
                        .set_column_dictionary_enabled((*name).into(), true)
                        .set_column_statistics_enabled((*name).into(), EnabledStatistics::None);
                    Type::primitive_type_builder(name, PhysicalType::BYTE_ARRAY).with_logical_type(Some(LogicalType::String))
                }
            };
            Arc::new(builder.with_repetition(Repetition::REQUIRED).build().expect("a plain column type"))
        })
        .collect();
    let schema = Type::group_type_builder("schema").with_fields(fields).build().expect("a flat schema");
    (Arc::new(schema), Arc::new(properties.build()))
}

/// A text column's values, one buffer per distinct string shared by its rows
/// (a name repeats on every row of its VM or metric: copying it for each row
/// cost more than encoding the column). The engine's name columns point into
/// one shared string per name, so a row's string is found by its address and
/// length, without hashing or comparing its text; rows that hold equal text
/// at different addresses get equal buffers of their own.
fn shared_text(rows: &[&str]) -> Vec<ByteArray> {
    let mut distinct: HashMap<(usize, usize), ByteArray> = HashMap::new();
    let mut last: Option<(&str, ByteArray)> = None;
    rows.iter()
        .map(|&row| match &last {
            Some((text, bytes)) if std::ptr::eq(*text, row) => bytes.clone(),
            _ => {
                let bytes = distinct.entry((row.as_ptr() as usize, row.len())).or_insert_with(|| ByteArray::from(row)).clone();
                last = Some((row, bytes.clone()));
                bytes
            }
        })
        .collect()
}

fn write_row_group(writer: &mut SerializedFileWriter<File>, columns: Vec<(&'static str, Column<'_>)>) -> parquet::errors::Result<()> {
    let mut group = writer.next_row_group()?;
    for (_, column) in columns {
        let mut out = group.next_column()?.expect("a column per schema field");
        match column {
            Column::U32(v) => out.typed::<Int64Type>().write_batch(&v.iter().map(|&x| i64::from(x)).collect::<Vec<_>>(), None, None)?,
            Column::U64(v) => out.typed::<Int64Type>().write_batch(&v.iter().map(|&x| x as i64).collect::<Vec<_>>(), None, None)?,
            Column::I64(v) => out.typed::<Int64Type>().write_batch(v, None, None)?,
            Column::F64(v) => out.typed::<DoubleType>().write_batch(v, None, None)?,
            Column::Text(v) => out.typed::<ByteArrayType>().write_batch(&shared_text(&v), None, None)?,
        };
        out.close()?;
    }
    group.close()?;
    Ok(())
}
