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

use bytes::Bytes;
use parquet::basic::{Compression, Encoding, EncodingMask, LogicalType, PageType, Repetition, Type as PhysicalType, ZstdLevel};
use parquet::column::page::{CompressedPage, Page, PageWriter};
use parquet::column::writer::ColumnCloseResult;
use parquet::data_type::{ByteArray, ByteArrayType, DoubleType, Int64Type};
use parquet::file::metadata::{ColumnChunkMetaData, PageEncodingStats};
use parquet::file::properties::{EnabledStatistics, WriterProperties};
use parquet::file::writer::{SerializedFileWriter, SerializedPageWriter, TrackedWrite};
use parquet::schema::types::{ColumnDescPtr, ColumnPath, Type};

use vmsched_sim::world::record::{Column, Tables};

/// One open file per table named at the start, written to the path given
/// for it (the caller renames it into place once the run has succeeded).
pub struct TableFiles {
    paths: HashMap<String, String>,
    writers: Vec<(&'static str, SerializedFileWriter<File>)>,
    /// The coded name columns' pages are compressed here (see [`CodedChunk`]).
    zstd: zstd::bulk::Compressor<'static>,
}

impl TableFiles {
    /// Files for the tables named in `paths` (table -> file path).
    pub fn new(paths: HashMap<String, String>) -> Self {
        let zstd = zstd::bulk::Compressor::new(ZstdLevel::default().compression_level()).expect("zstd's default level is valid");
        TableFiles { paths, writers: Vec::new(), zstd }
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
                write_row_group(&mut self.writers[at].1, columns, &mut self.zstd).map_err(|e| format!("{path}: {e}"))?;
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
    /// number in it, run-length encoded, zstd over both. A coded column (the
    /// long tables') is laid out so by [`CodedChunk`], from the numbers the
    /// engine already gave its rows; a text column by the Parquet writer.
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

/// The engine's unsigned nanoseconds and counts as Parquet's INT64, in place:
/// every value is below 2^63 (585 years of nanoseconds).
fn as_i64(values: &[u64]) -> &[i64] {
    // SAFETY: u64 and i64 have the same size and alignment, and every bit
    // pattern is a valid i64; the slice is only read.
    unsafe { std::slice::from_raw_parts(values.as_ptr().cast::<i64>(), values.len()) }
}

fn write_row_group(writer: &mut SerializedFileWriter<File>, columns: Vec<(&'static str, Column<'_>)>, zstd: &mut zstd::bulk::Compressor<'static>) -> parquet::errors::Result<()> {
    let descriptors = writer.schema_descr().columns().to_vec();
    let mut group = writer.next_row_group()?;
    for ((_, column), descriptor) in columns.into_iter().zip(descriptors) {
        if let Column::Coded { codes, names } = column {
            let (chunk, close) = CodedChunk::new(codes, names).write(descriptor, zstd)?;
            group.append_column(&chunk, close)?;
            continue;
        }
        let mut out = group.next_column()?.expect("a column per schema field");
        match column {
            Column::U32(v) => out.typed::<Int64Type>().write_batch(&v.iter().map(|&x| i64::from(x)).collect::<Vec<_>>(), None, None)?,
            Column::U64(v) => out.typed::<Int64Type>().write_batch(as_i64(v), None, None)?,
            Column::I64(v) => out.typed::<Int64Type>().write_batch(v, None, None)?,
            Column::F64(v) => out.typed::<DoubleType>().write_batch(v, None, None)?,
            Column::Text(v) => out.typed::<ByteArrayType>().write_batch(&shared_text(&v), None, None)?,
            Column::Coded { .. } => unreachable!("appended above"),
        };
        out.close()?;
    }
    group.close()?;
    Ok(())
}

/// A coded column's chunk of a row group, dictionary-encoded from the rows'
/// numbers as they are: the Parquet writer would take each row's string and
/// hash it to find its number in the chunk's dictionary (half the cost of
/// writing a recording, on the peer cases of `vmsched bench --peer`), where
/// the engine has numbered the names already. The chunk is what the writer
/// makes of the same rows: a dictionary page of the names the rows use, in
/// the order of their first row (PLAIN: each name's length, then its
/// bytes), and one data page of the rows' places in it (RLE_DICTIONARY: the
/// bit width, then the RLE/bit-packed hybrid), zstd over each; no
/// statistics, as for the text columns. (Parquet format, Encodings.md:
/// "Dictionary Encoding" and "Run Length Encoding / Bit-Packing Hybrid".)
struct CodedChunk {
    /// The names the rows use, first-used first.
    dictionary: Vec<Arc<str>>,
    /// Each row's place in `dictionary`.
    places: Vec<u32>,
}

impl CodedChunk {
    fn new(codes: &[u32], names: &[Arc<str>]) -> Self {
        let mut place_of = vec![u32::MAX; names.len()];
        let mut dictionary = Vec::new();
        let places = codes
            .iter()
            .map(|&code| {
                let place = &mut place_of[code as usize];
                if *place == u32::MAX {
                    *place = dictionary.len() as u32;
                    dictionary.push(names[code as usize].clone());
                }
                *place
            })
            .collect();
        CodedChunk { dictionary, places }
    }

    /// The chunk's bytes, and what the row group records of it.
    fn write(&self, descriptor: ColumnDescPtr, zstd: &mut zstd::bulk::Compressor<'static>) -> parquet::errors::Result<(Bytes, ColumnCloseResult)> {
        let mut plain = Vec::with_capacity(self.dictionary.iter().map(|name| 4 + name.len()).sum());
        for name in &self.dictionary {
            plain.extend_from_slice(&(name.len() as u32).to_le_bytes());
            plain.extend_from_slice(name.as_bytes());
        }
        // The width of the largest place (at least one bit, which every
        // reader takes, where a one-name dictionary would need none).
        let bit_width = (u32::BITS - (self.dictionary.len().max(2) as u32 - 1).leading_zeros()) as u8;
        let mut indices = vec![bit_width];
        rle_hybrid(&self.places, bit_width, &mut indices);

        let mut sink = TrackedWrite::new(Vec::new());
        let mut pages = SerializedPageWriter::new(&mut sink);
        let dictionary_page = Page::DictionaryPage { buf: compressed(zstd, &plain)?, num_values: self.dictionary.len() as u32, encoding: Encoding::PLAIN, is_sorted: false };
        let dictionary_spec = pages.write_page(CompressedPage::new(dictionary_page, plain.len()))?;
        let data_page = Page::DataPage {
            buf: compressed(zstd, &indices)?,
            num_values: self.places.len() as u32,
            encoding: Encoding::RLE_DICTIONARY,
            def_level_encoding: Encoding::RLE,
            rep_level_encoding: Encoding::RLE,
            statistics: None,
        };
        let data_spec = pages.write_page(CompressedPage::new(data_page, indices.len()))?;
        let chunk = Bytes::from(sink.into_inner()?);

        let rows = self.places.len() as u64;
        let metadata = ColumnChunkMetaData::builder(descriptor)
            .set_compression(Compression::ZSTD(ZstdLevel::default()))
            .set_encodings_mask(EncodingMask::new_from_encodings([Encoding::PLAIN, Encoding::RLE, Encoding::RLE_DICTIONARY].iter()))
            .set_page_encoding_stats(vec![
                PageEncodingStats { page_type: PageType::DICTIONARY_PAGE, encoding: Encoding::PLAIN, count: 1 },
                PageEncodingStats { page_type: PageType::DATA_PAGE, encoding: Encoding::RLE_DICTIONARY, count: 1 },
            ])
            .set_total_compressed_size((dictionary_spec.compressed_size + data_spec.compressed_size) as i64)
            .set_total_uncompressed_size((dictionary_spec.uncompressed_size + data_spec.uncompressed_size) as i64)
            .set_num_values(rows as i64)
            .set_dictionary_page_offset(Some(dictionary_spec.offset as i64))
            .set_data_page_offset(data_spec.offset as i64)
            .build()?;
        let close = ColumnCloseResult { bytes_written: chunk.len() as u64, rows_written: rows, metadata, bloom_filter: None, column_index: None, offset_index: None };
        Ok((chunk, close))
    }
}

fn compressed(zstd: &mut zstd::bulk::Compressor<'static>, bytes: &[u8]) -> parquet::errors::Result<Bytes> {
    Ok(Bytes::from(zstd.compress(bytes)?))
}

/// Appends `values`, each `bit_width` bits wide, in Parquet's RLE/bit-packed
/// hybrid: a value repeated over eight or more rows that can start a run
/// (after the bit-packed rows before it fill whole groups of eight) as one
/// run of it, the other rows bit-packed in groups of eight, the last group
/// padded with zeros (the page's value count says where the rows end).
fn rle_hybrid(values: &[u32], bit_width: u8, out: &mut Vec<u8>) {
    let mut packed_from = 0;
    let mut at = 0;
    while at < values.len() {
        let value = values[at];
        let end = at + values[at..].iter().take_while(|&&v| v == value).count();
        // Rows of this run that complete the last group of the packed rows before it.
        let fill = (8 - (at - packed_from) % 8) % 8;
        if end - at >= fill + 8 {
            bit_packed(&values[packed_from..at + fill], bit_width, out);
            varint(((end - at - fill) as u64) << 1, out);
            out.extend_from_slice(&value.to_le_bytes()[..usize::from(bit_width).div_ceil(8)]);
            packed_from = end;
        }
        at = end;
    }
    bit_packed(&values[packed_from..], bit_width, out);
}

/// One bit-packed run of `values` (none if empty): its header, then the
/// values least significant bit first, in groups of eight.
fn bit_packed(values: &[u32], bit_width: u8, out: &mut Vec<u8>) {
    if values.is_empty() {
        return;
    }
    let groups = values.len().div_ceil(8);
    varint(((groups as u64) << 1) | 1, out);
    let (mut bits, mut held) = (0u64, 0u8);
    for i in 0..groups * 8 {
        bits |= u64::from(values.get(i).copied().unwrap_or(0)) << held;
        held += bit_width;
        while held >= 8 {
            out.push(bits as u8);
            bits >>= 8;
            held -= 8;
        }
    }
}

/// ULEB-128, as the hybrid's run headers are written.
fn varint(mut value: u64, out: &mut Vec<u8>) {
    while value >= 0x80 {
        out.push(value as u8 | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}
