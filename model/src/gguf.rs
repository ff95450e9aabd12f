//! GGUF files (llama.cpp's model format, versions 2 and 3): header, metadata,
//! tensor infos, aligned tensor data — read through a memory map, so opening a
//! model costs nothing until a tensor is dequantized — and a writer, which the
//! tests use to build tiny models of their own.

use crate::quant::{GgmlType, dequantize};
use memmap2::Mmap;
use std::collections::BTreeMap;
use std::fs::File;
use std::io::Write;
use std::path::Path;

const MAGIC: &[u8; 4] = b"GGUF";
const DEFAULT_ALIGNMENT: u64 = 32;

/// What can go wrong reading a GGUF file; every variant names what it is about.
#[derive(Debug, thiserror::Error)]
pub enum GgufError {
    /// Callers name the file: every variant is about the one they opened.
    #[error(transparent)]
    Io(#[from] std::io::Error),
    #[error("not a GGUF file (it begins `{}`, not `GGUF`)", .0.escape_ascii())]
    Magic([u8; 4]),
    #[error("GGUF version {0} is not supported (2 and 3 are)")]
    Version(u32),
    #[error("the file ends inside {0}")]
    Truncated(String),
    #[error("metadata `{key}` has unknown value type {kind}")]
    ValueType { key: String, kind: u32 },
    #[error("metadata `{0}` nests arrays more than {MAX_NESTING} deep")]
    Nesting(String),
    #[error("metadata `{0}` is missing")]
    MissingKey(String),
    #[error("metadata `{key}` is {found}, expected {expected}")]
    KeyType {
        key: String,
        expected: &'static str,
        found: String,
    },
    #[error(
        "tensor `{name}` has type {kind}, which Forge cannot dequantize (supported: F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_NL, IQ4_XS)"
    )]
    UnsupportedType { name: String, kind: String },
    #[error("tensor `{name}`: rows of {row} elements do not fill whole blocks of {block}")]
    Blocks {
        name: String,
        row: u64,
        block: usize,
    },
    #[error("tensor `{0}` is listed twice: the header is damaged")]
    Duplicate(String),
    #[error("metadata `{0}` is listed twice: the header is damaged")]
    DuplicateKey(String),
    #[error("tensor `{name}` has dimensions {dims:?}: more than any file holds")]
    Oversized { name: String, dims: Vec<u64> },
    #[error("tensor `{name}` lies beyond the end of the file ({len} bytes): the file is cut short")]
    OutOfBounds { name: String, len: u64 },
    #[error("no tensor `{0}`")]
    MissingTensor(String),
    #[error(
        "tensor `{name}` begins at {offset}, not at a multiple of the file's alignment ({alignment}): the header is damaged"
    )]
    Misaligned {
        name: String,
        offset: u64,
        alignment: u64,
    },
    #[error("tensors `{0}` and `{1}` share bytes of the file: the header is damaged")]
    Overlapping(String, String),
}

/// The deepest arrays of arrays read: real files nest none, and a file
/// that nests them without end would exhaust the reader's stack.
const MAX_NESTING: usize = 8;

/// A metadata value.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    U8(u8),
    I8(i8),
    U16(u16),
    I16(i16),
    U32(u32),
    I32(i32),
    F32(f32),
    Bool(bool),
    String(String),
    Array(Vec<Value>),
    U64(u64),
    I64(i64),
    F64(f64),
}

impl Value {
    fn type_id(&self) -> u32 {
        match self {
            Self::U8(_) => 0,
            Self::I8(_) => 1,
            Self::U16(_) => 2,
            Self::I16(_) => 3,
            Self::U32(_) => 4,
            Self::I32(_) => 5,
            Self::F32(_) => 6,
            Self::Bool(_) => 7,
            Self::String(_) => 8,
            Self::Array(_) => 9,
            Self::U64(_) => 10,
            Self::I64(_) => 11,
            Self::F64(_) => 12,
        }
    }

    /// The value as an unsigned integer, when it is an integer of any width.
    pub fn as_u64(&self) -> Option<u64> {
        match *self {
            Self::U8(v) => Some(v.into()),
            Self::U16(v) => Some(v.into()),
            Self::U32(v) => Some(v.into()),
            Self::U64(v) => Some(v),
            Self::I8(v) => u64::try_from(v).ok(),
            Self::I16(v) => u64::try_from(v).ok(),
            Self::I32(v) => u64::try_from(v).ok(),
            Self::I64(v) => u64::try_from(v).ok(),
            _ => None,
        }
    }

    pub fn as_f64(&self) -> Option<f64> {
        match *self {
            Self::F32(v) => Some(v.into()),
            Self::F64(v) => Some(v),
            _ => self.as_u64().map(|v| v as f64),
        }
    }

    pub fn as_str(&self) -> Option<&str> {
        match self {
            Self::String(text) => Some(text),
            _ => None,
        }
    }

    pub fn as_array(&self) -> Option<&[Value]> {
        match self {
            Self::Array(items) => Some(items),
            _ => None,
        }
    }

    fn describe(&self) -> String {
        match self {
            Self::Array(items) => format!("an array of {}", items.len()),
            Self::String(_) => "a string".into(),
            other => format!("{other:?}"),
        }
    }
}

/// One tensor's description.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TensorInfo {
    pub name: String,
    /// GGML order: `dims[0]` varies fastest (a row of a matrix).
    pub dims: Vec<u64>,
    pub kind: GgmlType,
    /// Offset from the start of the data section.
    pub offset: u64,
}

impl TensorInfo {
    pub fn elements(&self) -> u64 {
        self.dims.iter().product()
    }
}

/// An open GGUF file.
pub struct Gguf {
    pub version: u32,
    pub metadata: BTreeMap<String, Value>,
    pub tensors: Vec<TensorInfo>,
    data_start: u64,
    map: Mmap,
}

impl Gguf {
    /// Opens and parses `path` (the tensor data stays mapped, unread).
    pub fn open(path: &Path) -> Result<Self, GgufError> {
        let file = File::open(path)?;
        // SAFETY: the map is read-only; Forge never writes model files while
        // they are open, and a concurrent external writer is outside its contract.
        let map = unsafe { Mmap::map(&file) }?;
        Self::parse(map)
    }

    fn parse(map: Mmap) -> Result<Self, GgufError> {
        let mut reader = Reader {
            bytes: &map,
            position: 0,
        };
        let magic: [u8; 4] = reader.take(4, "the magic")?.try_into().expect("four bytes");
        if &magic != MAGIC {
            return Err(GgufError::Magic(magic));
        }
        let version = reader.u32("the version")?;
        if !(2..=3).contains(&version) {
            return Err(GgufError::Version(version));
        }
        let tensor_count = reader.u64("the tensor count")?;
        let metadata_count = reader.u64("the metadata count")?;
        let mut metadata = BTreeMap::new();
        for _ in 0..metadata_count {
            let key = reader.string("a metadata key")?;
            let kind = reader.u32(&key)?;
            let value = reader.value(kind, &key, 0)?;
            // Which of two values would be the one read is a guess.
            if metadata.contains_key(&key) {
                return Err(GgufError::DuplicateKey(key));
            }
            metadata.insert(key, value);
        }
        let mut tensors = Vec::new();
        for _ in 0..tensor_count {
            let name = reader.string("a tensor name")?;
            let dims_count = reader.u32(&name)?;
            let dims = (0..dims_count)
                .map(|_| reader.u64(&name))
                .collect::<Result<Vec<_>, _>>()?;
            let kind = GgmlType::from_id(reader.u32(&name)?);
            let offset = reader.u64(&name)?;
            tensors.push(TensorInfo {
                name,
                dims,
                kind,
                offset,
            });
        }
        let alignment = metadata
            .get("general.alignment")
            .and_then(Value::as_u64)
            .unwrap_or(DEFAULT_ALIGNMENT)
            .max(1);
        let data_start = (reader.position as u64).div_ceil(alignment) * alignment;
        let gguf = Self {
            version,
            metadata,
            tensors,
            data_start,
            map,
        };
        // A file cut short (an interrupted copy or download) is refused as a
        // whole when opened, not at the first tensor it lacks; so is one
        // whose sizes overflow (and would wrap round to small ones). Tensors
        // of types Forge cannot size are left to the error that names them.
        // Tensors are aligned and apart, as every writer lays them out: a
        // header that says otherwise would have weights read from another
        // tensor's bytes.
        let mut extents = Vec::new();
        let mut names = std::collections::HashSet::new();
        for info in &gguf.tensors {
            if !names.insert(info.name.as_str()) {
                return Err(GgufError::Duplicate(info.name.clone()));
            }
            if !info.offset.is_multiple_of(alignment) {
                return Err(GgufError::Misaligned {
                    name: info.name.clone(),
                    offset: info.offset,
                    alignment,
                });
            }
            let oversized = || GgufError::Oversized {
                name: info.name.clone(),
                dims: info.dims.clone(),
            };
            let elements = info
                .dims
                .iter()
                .try_fold(1u64, |all, &dim| all.checked_mul(dim))
                .ok_or_else(oversized)?;
            if let Some((block, bytes)) = info.kind.block() {
                // GGML quantizes row by row: a row that ends mid-block
                // has no layout.
                let row = info.dims.first().copied().unwrap_or(1);
                if !row.is_multiple_of(block as u64) {
                    return Err(GgufError::Blocks {
                        name: info.name.clone(),
                        row,
                        block,
                    });
                }
                let size = (elements / block as u64)
                    .checked_mul(bytes as u64)
                    .ok_or_else(oversized)?;
                extents.push((gguf.extent(info, size)?, &info.name));
            }
        }
        // Sorted by where they begin, any overlap is one of neighbours.
        extents.sort_by_key(|(extent, _)| (extent.start, extent.end));
        if let Some(pair) = extents
            .windows(2)
            .find(|pair| pair[1].0.start < pair[0].0.end)
        {
            return Err(GgufError::Overlapping(pair[0].1.clone(), pair[1].1.clone()));
        }
        Ok(gguf)
    }

    /// Where a tensor of `size` bytes lies in the file.
    fn extent(&self, info: &TensorInfo, size: u64) -> Result<std::ops::Range<usize>, GgufError> {
        let len = self.map.len() as u64;
        let start = self.data_start.checked_add(info.offset);
        match (start, start.and_then(|start| start.checked_add(size))) {
            (Some(start), Some(end)) if end <= len => Ok(start as usize..end as usize),
            _ => Err(GgufError::OutOfBounds {
                name: info.name.clone(),
                len,
            }),
        }
    }

    pub fn get(&self, key: &str) -> Result<&Value, GgufError> {
        self.metadata
            .get(key)
            .ok_or_else(|| GgufError::MissingKey(key.to_owned()))
    }

    pub fn get_u64(&self, key: &str) -> Result<u64, GgufError> {
        let value = self.get(key)?;
        value.as_u64().ok_or_else(|| GgufError::KeyType {
            key: key.to_owned(),
            expected: "an integer",
            found: value.describe(),
        })
    }

    pub fn get_f64(&self, key: &str) -> Result<f64, GgufError> {
        let value = self.get(key)?;
        value.as_f64().ok_or_else(|| GgufError::KeyType {
            key: key.to_owned(),
            expected: "a number",
            found: value.describe(),
        })
    }

    pub fn get_str(&self, key: &str) -> Result<&str, GgufError> {
        let value = self.get(key)?;
        value.as_str().ok_or_else(|| GgufError::KeyType {
            key: key.to_owned(),
            expected: "a string",
            found: value.describe(),
        })
    }

    pub fn get_array(&self, key: &str) -> Result<&[Value], GgufError> {
        let value = self.get(key)?;
        value.as_array().ok_or_else(|| GgufError::KeyType {
            key: key.to_owned(),
            expected: "an array",
            found: value.describe(),
        })
    }

    pub fn tensor(&self, name: &str) -> Result<&TensorInfo, GgufError> {
        self.tensors
            .iter()
            .find(|tensor| tensor.name == name)
            .ok_or_else(|| GgufError::MissingTensor(name.to_owned()))
    }

    /// The raw bytes of a tensor.
    pub fn tensor_bytes(&self, info: &TensorInfo) -> Result<&[u8], GgufError> {
        // Whole blocks per row were checked when the file was opened.
        let size =
            info.kind
                .byte_size(info.elements())
                .ok_or_else(|| GgufError::UnsupportedType {
                    name: info.name.clone(),
                    kind: info.kind.to_string(),
                })?;
        Ok(&self.map[self.extent(info, size)?])
    }

    /// A tensor's values as f32, in GGML order.
    pub fn dequantize(&self, name: &str) -> Result<Vec<f32>, GgufError> {
        let info = self.tensor(name)?;
        let bytes = self.tensor_bytes(info)?;
        dequantize(info.kind, bytes, info.elements() as usize).ok_or_else(|| {
            GgufError::UnsupportedType {
                name: name.to_owned(),
                kind: info.kind.to_string(),
            }
        })
    }
}

/// A cursor over the file's bytes; errors say what was being read.
struct Reader<'a> {
    bytes: &'a [u8],
    position: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, len: usize, what: &str) -> Result<&'a [u8], GgufError> {
        let end = self
            .position
            .checked_add(len)
            .filter(|end| *end <= self.bytes.len())
            .ok_or_else(|| GgufError::Truncated(what.to_owned()))?;
        let slice = &self.bytes[self.position..end];
        self.position = end;
        Ok(slice)
    }

    fn array<const N: usize>(&mut self, what: &str) -> Result<[u8; N], GgufError> {
        Ok(self.take(N, what)?.try_into().expect("exact length"))
    }

    fn u32(&mut self, what: &str) -> Result<u32, GgufError> {
        Ok(u32::from_le_bytes(self.array(what)?))
    }

    fn u64(&mut self, what: &str) -> Result<u64, GgufError> {
        Ok(u64::from_le_bytes(self.array(what)?))
    }

    fn string(&mut self, what: &str) -> Result<String, GgufError> {
        let len = self.u64(what)?;
        let len = usize::try_from(len).map_err(|_| GgufError::Truncated(what.to_owned()))?;
        Ok(String::from_utf8_lossy(self.take(len, what)?).into_owned())
    }

    /// The value of type `kind` of metadata `key`, inside `depth` arrays.
    fn value(&mut self, kind: u32, key: &str, depth: usize) -> Result<Value, GgufError> {
        Ok(match kind {
            0 => Value::U8(u8::from_le_bytes(self.array(key)?)),
            1 => Value::I8(i8::from_le_bytes(self.array(key)?)),
            2 => Value::U16(u16::from_le_bytes(self.array(key)?)),
            3 => Value::I16(i16::from_le_bytes(self.array(key)?)),
            4 => Value::U32(self.u32(key)?),
            5 => Value::I32(i32::from_le_bytes(self.array(key)?)),
            6 => Value::F32(f32::from_le_bytes(self.array(key)?)),
            7 => Value::Bool(self.array::<1>(key)?[0] != 0),
            8 => Value::String(self.string(key)?),
            9 => {
                if depth == MAX_NESTING {
                    return Err(GgufError::Nesting(key.to_owned()));
                }
                let item_kind = self.u32(key)?;
                let len = self.u64(key)?;
                // Every item takes at least a byte: a length beyond the file is corrupt.
                if len > self.bytes.len() as u64 {
                    return Err(GgufError::Truncated(key.to_owned()));
                }
                Value::Array(
                    (0..len)
                        .map(|_| self.value(item_kind, key, depth + 1))
                        .collect::<Result<_, _>>()?,
                )
            }
            10 => Value::U64(self.u64(key)?),
            11 => Value::I64(i64::from_le_bytes(self.array(key)?)),
            12 => Value::F64(f64::from_le_bytes(self.array(key)?)),
            kind => {
                return Err(GgufError::ValueType {
                    key: key.to_owned(),
                    kind,
                });
            }
        })
    }
}

/// Writes GGUF v3 files: metadata and tensors (stored as given; the caller
/// provides bytes already in the tensor's type).
#[derive(Default)]
pub struct GgufWriter {
    metadata: Vec<(String, Value)>,
    tensors: Vec<(String, Vec<u64>, GgmlType, Vec<u8>)>,
}

impl GgufWriter {
    /// Sets `key`, in place of any value given it before.
    pub fn metadata(&mut self, key: &str, value: Value) -> &mut Self {
        match self.metadata.iter_mut().find(|(held, _)| held == key) {
            Some((_, held)) => *held = value,
            None => self.metadata.push((key.to_owned(), value)),
        }
        self
    }

    /// An F32 tensor with GGML-order `dims`.
    pub fn tensor_f32(&mut self, name: &str, dims: &[u64], values: &[f32]) -> &mut Self {
        assert_eq!(
            dims.iter().product::<u64>() as usize,
            values.len(),
            "dims of `{name}` do not match its values"
        );
        let bytes = values
            .iter()
            .flat_map(|value| value.to_le_bytes())
            .collect();
        self.tensor_raw(name, dims, GgmlType::F32, bytes)
    }

    /// A tensor whose bytes are already in `kind`'s layout.
    pub fn tensor_raw(
        &mut self,
        name: &str,
        dims: &[u64],
        kind: GgmlType,
        bytes: Vec<u8>,
    ) -> &mut Self {
        self.tensors
            .push((name.to_owned(), dims.to_vec(), kind, bytes));
        self
    }

    pub fn write(&self, path: &Path) -> std::io::Result<()> {
        let mut out = Vec::new();
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&3u32.to_le_bytes());
        out.extend_from_slice(&(self.tensors.len() as u64).to_le_bytes());
        out.extend_from_slice(&(self.metadata.len() as u64).to_le_bytes());
        for (key, value) in &self.metadata {
            write_string(&mut out, key);
            out.extend_from_slice(&value.type_id().to_le_bytes());
            write_value(&mut out, value);
        }
        let mut offset = 0u64;
        let mut offsets = Vec::new();
        for (name, dims, kind, bytes) in &self.tensors {
            write_string(&mut out, name);
            out.extend_from_slice(&(dims.len() as u32).to_le_bytes());
            for dim in dims {
                out.extend_from_slice(&dim.to_le_bytes());
            }
            out.extend_from_slice(&kind.id().to_le_bytes());
            out.extend_from_slice(&offset.to_le_bytes());
            offsets.push(offset);
            offset = (offset + bytes.len() as u64).div_ceil(DEFAULT_ALIGNMENT) * DEFAULT_ALIGNMENT;
        }
        pad(&mut out);
        for ((_, _, _, bytes), _) in self.tensors.iter().zip(offsets) {
            out.extend_from_slice(bytes);
            pad(&mut out);
        }
        File::create(path)?.write_all(&out)
    }
}

fn pad(out: &mut Vec<u8>) {
    let aligned = (out.len() as u64).div_ceil(DEFAULT_ALIGNMENT) * DEFAULT_ALIGNMENT;
    out.resize(aligned as usize, 0);
}

fn write_string(out: &mut Vec<u8>, text: &str) {
    out.extend_from_slice(&(text.len() as u64).to_le_bytes());
    out.extend_from_slice(text.as_bytes());
}

fn write_value(out: &mut Vec<u8>, value: &Value) {
    match value {
        Value::U8(v) => out.extend_from_slice(&v.to_le_bytes()),
        Value::I8(v) => out.extend_from_slice(&v.to_le_bytes()),
        Value::U16(v) => out.extend_from_slice(&v.to_le_bytes()),
        Value::I16(v) => out.extend_from_slice(&v.to_le_bytes()),
        Value::U32(v) => out.extend_from_slice(&v.to_le_bytes()),
        Value::I32(v) => out.extend_from_slice(&v.to_le_bytes()),
        Value::F32(v) => out.extend_from_slice(&v.to_le_bytes()),
        Value::Bool(v) => out.push(u8::from(*v)),
        Value::String(text) => write_string(out, text),
        Value::Array(items) => {
            let item_kind = items.first().map_or(8, Value::type_id);
            out.extend_from_slice(&item_kind.to_le_bytes());
            out.extend_from_slice(&(items.len() as u64).to_le_bytes());
            for item in items {
                write_value(out, item);
            }
        }
        Value::U64(v) => out.extend_from_slice(&v.to_le_bytes()),
        Value::I64(v) => out.extend_from_slice(&v.to_le_bytes()),
        Value::F64(v) => out.extend_from_slice(&v.to_le_bytes()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn written_files_read_back() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("tiny.gguf");
        let mut writer = GgufWriter::default();
        writer
            .metadata("general.architecture", Value::String("llama".into()))
            .metadata("llama.block_count", Value::U32(2))
            .metadata(
                "tokenizer.ggml.tokens",
                Value::Array(vec![Value::String("a".into()), Value::String("b".into())]),
            )
            .tensor_f32("w", &[3, 2], &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0])
            .tensor_f32("v", &[1], &[-1.5]);
        writer.write(&path).unwrap();
        let gguf = Gguf::open(&path).unwrap();
        assert_eq!(gguf.version, 3);
        assert_eq!(gguf.get_str("general.architecture").unwrap(), "llama");
        assert_eq!(gguf.get_u64("llama.block_count").unwrap(), 2);
        assert_eq!(gguf.get_array("tokenizer.ggml.tokens").unwrap().len(), 2);
        assert_eq!(gguf.tensor("w").unwrap().dims, [3, 2]);
        assert_eq!(
            gguf.dequantize("w").unwrap(),
            [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]
        );
        assert_eq!(gguf.dequantize("v").unwrap(), [-1.5]);
        assert!(matches!(
            gguf.dequantize("nope"),
            Err(GgufError::MissingTensor(_))
        ));
        assert!(matches!(
            gguf.get_str("llama.block_count"),
            Err(GgufError::KeyType { .. })
        ));
    }

    #[test]
    fn corrupt_files_are_named_errors() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("bad.gguf");
        std::fs::write(&path, b"GGML\x03\0\0\0").unwrap();
        assert!(matches!(Gguf::open(&path), Err(GgufError::Magic(_))));
        std::fs::write(&path, b"GGUF\x09\0\0\0").unwrap();
        assert!(matches!(Gguf::open(&path), Err(GgufError::Version(9))));
        let mut writer = GgufWriter::default();
        writer
            .metadata("general.name", Value::String("x".into()))
            .tensor_f32("w", &[4], &[1.0; 4]);
        writer.write(&path).unwrap();
        let full = std::fs::read(&path).unwrap();
        std::fs::write(&path, &full[..40]).unwrap();
        assert!(matches!(Gguf::open(&path), Err(GgufError::Truncated(_))));
        // The tensor's data cut off: the header parses, the file is refused
        // for the tensor it lacks.
        std::fs::write(&path, &full[..full.len() - 32]).unwrap();
        let error = Gguf::open(&path).err().expect("a cut file is refused");
        assert!(matches!(error, GgufError::OutOfBounds { .. }));
        assert!(error.to_string().contains("tensor `w`"), "{error}");
        // Arrays nested without end: refused, not a stack overflow.
        let mut nested = b"GGUF".to_vec();
        nested.extend(3u32.to_le_bytes());
        nested.extend(0u64.to_le_bytes());
        nested.extend(1u64.to_le_bytes());
        nested.extend(1u64.to_le_bytes());
        nested.push(b'k');
        nested.extend(9u32.to_le_bytes());
        for _ in 0..100_000 {
            nested.extend(9u32.to_le_bytes());
            nested.extend(1u64.to_le_bytes());
        }
        std::fs::write(&path, &nested).unwrap();
        let error = Gguf::open(&path).err().expect("endless nesting is refused");
        assert!(matches!(error, GgufError::Nesting(_)), "{error}");
    }

    #[test]
    fn tensors_off_the_alignment_or_sharing_bytes_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("shared.gguf");
        let mut writer = GgufWriter::default();
        writer
            .tensor_f32("a", &[16], &[1.0; 16])
            .tensor_f32("b", &[16], &[2.0; 16]);
        writer.write(&path).unwrap();
        let written = std::fs::read(&path).unwrap();
        // `b`'s header ends in its offset (64: `a` fills two blocks of 32).
        let mut header = 1u64.to_le_bytes().to_vec();
        header.push(b'b');
        let at = written
            .windows(header.len())
            .position(|window| window == header)
            .unwrap()
            + header.len()
            + 4
            + 8
            + 4;
        assert_eq!(written[at..at + 8], 64u64.to_le_bytes());
        for (offset, refused) in [(3u64, "begins at 3"), (32, "`a` and `b` share bytes")] {
            let mut patched = written.clone();
            patched[at..at + 8].copy_from_slice(&offset.to_le_bytes());
            std::fs::write(&path, &patched).unwrap();
            let error = Gguf::open(&path)
                .err()
                .expect("a damaged header is refused");
            assert!(error.to_string().contains(refused), "{error}");
        }
    }

    #[test]
    fn a_tensor_listed_twice_or_rows_of_partial_blocks_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("bad.gguf");
        let refused = |writer: &GgufWriter| {
            writer.write(&path).unwrap();
            Gguf::open(&path)
                .err()
                .expect("a damaged header is refused")
                .to_string()
        };
        let mut twice = GgufWriter::default();
        twice
            .tensor_f32("a", &[4], &[1.0; 4])
            .tensor_f32("a", &[4], &[2.0; 4]);
        assert_eq!(
            refused(&twice),
            "tensor `a` is listed twice: the header is damaged"
        );
        // Keys `k1` and `k2`, the second renamed as the first.
        let mut keys = GgufWriter::default();
        keys.metadata("k1", Value::U32(1))
            .metadata("k2", Value::U32(2));
        keys.write(&path).unwrap();
        let mut bytes = std::fs::read(&path).unwrap();
        let at = bytes.windows(2).rposition(|pair| pair == b"k2").unwrap();
        bytes[at + 1] = b'1';
        std::fs::write(&path, bytes).unwrap();
        assert_eq!(
            Gguf::open(&path).err().unwrap().to_string(),
            "metadata `k1` is listed twice: the header is damaged"
        );
        // Q8_0 blocks hold 32 values (34 bytes): rows of 48 end mid-block,
        // though the 96 elements fill three blocks.
        let mut partial = GgufWriter::default();
        partial.tensor_raw("q", &[48, 2], GgmlType::Q8_0, vec![0; 3 * 34]);
        assert_eq!(
            refused(&partial),
            "tensor `q`: rows of 48 elements do not fill whole blocks of 32"
        );
    }

    #[test]
    fn sizes_that_overflow_are_refused_not_wrapped_round() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("huge.gguf");
        let mut writer = GgufWriter::default();
        writer.tensor_f32("w", &[2, 2], &[1.0; 4]);
        writer.write(&path).unwrap();
        let written = std::fs::read(&path).unwrap();
        // The tensor's header: its name, two dimensions of 2.
        let mut header = 1u64.to_le_bytes().to_vec();
        header.push(b'w');
        header.extend(2u32.to_le_bytes());
        let at = written
            .windows(header.len())
            .position(|window| window == header)
            .unwrap()
            + header.len();
        // Elements beyond u64, and bytes beyond u64 (4 × 2^62).
        for dims in [[1u64 << 40, 1 << 40], [(1 << 62) + 576, 1]] {
            let mut patched = written.clone();
            patched[at..at + 8].copy_from_slice(&dims[0].to_le_bytes());
            patched[at + 8..at + 16].copy_from_slice(&dims[1].to_le_bytes());
            std::fs::write(&path, &patched).unwrap();
            let error = Gguf::open(&path)
                .err()
                .expect("an impossible size is refused");
            assert!(
                matches!(error, GgufError::Oversized { .. }),
                "{dims:?}: {error}"
            );
        }
    }
}
