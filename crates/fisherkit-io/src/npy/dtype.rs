//! The element types of fisherkit files ([`Dtype`], [`Element`]) and a 2-D
//! array in either ([`Matrix`]).

use fisherkit::Float;
use ndarray::Array2;
use std::fmt;

/// The element types fisherkit files hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Dtype {
    /// IEEE 754 binary32 (`float32`, `<f4`, safetensors `F32`).
    F32,
    /// IEEE 754 binary64 (`float64`, `<f8`, safetensors `F64`).
    F64,
}

impl Dtype {
    /// numpy's name of the type (`"float32"`).
    pub fn numpy_name(self) -> &'static str {
        match self {
            Dtype::F32 => "float32",
            Dtype::F64 => "float64",
        }
    }

    /// numpy's type string of the little-endian type (`"<f4"`), as `.npy` headers write it.
    pub(crate) fn npy_descr(self) -> &'static str {
        match self {
            Dtype::F32 => "<f4",
            Dtype::F64 => "<f8",
        }
    }

    /// Size of one element in bytes.
    pub fn size(self) -> usize {
        match self {
            Dtype::F32 => 4,
            Dtype::F64 => 8,
        }
    }
}

impl fmt::Display for Dtype {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.numpy_name())
    }
}

mod sealed {
    pub trait Sealed {}
    impl Sealed for f32 {}
    impl Sealed for f64 {}
}

/// `f32` or `f64`: a [`Float`] that fisherkit files can store.
pub trait Element: Float + ndarray_npy::WritableElement + sealed::Sealed {
    /// The file element type.
    const DTYPE: Dtype;
    /// Decodes one value from its little-endian bytes (`bytes.len()` is the element size).
    fn from_le(bytes: &[u8]) -> Self;
    /// Appends the little-endian bytes of `self` to `out`.
    fn push_le(self, out: &mut Vec<u8>);
    /// The array of `m` in this type: moved when it already is (no copy of
    /// a kernel of gigabytes), else converted value by value (rounded to
    /// nearest).
    fn from_matrix(m: Matrix) -> Array2<Self>;
}

impl Element for f32 {
    const DTYPE: Dtype = Dtype::F32;
    fn from_le(bytes: &[u8]) -> Self {
        let mut b = [0u8; 4];
        b.copy_from_slice(bytes);
        f32::from_le_bytes(b)
    }
    fn push_le(self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.to_le_bytes());
    }
    fn from_matrix(m: Matrix) -> Array2<Self> {
        match m {
            Matrix::F32(a) => a,
            Matrix::F64(a) => a.mapv(|v| v as f32),
        }
    }
}

impl Element for f64 {
    const DTYPE: Dtype = Dtype::F64;
    fn from_le(bytes: &[u8]) -> Self {
        let mut b = [0u8; 8];
        b.copy_from_slice(bytes);
        f64::from_le_bytes(b)
    }
    fn push_le(self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.to_le_bytes());
    }
    fn from_matrix(m: Matrix) -> Array2<Self> {
        match m {
            Matrix::F32(a) => a.mapv(f64::from),
            Matrix::F64(a) => a,
        }
    }
}

/// A 2-D array read from a file, in the file's element type.
#[derive(Debug, Clone, PartialEq)]
pub enum Matrix {
    /// A `float32` array.
    F32(Array2<f32>),
    /// A `float64` array.
    F64(Array2<f64>),
}

impl Matrix {
    /// The element type.
    pub fn dtype(&self) -> Dtype {
        match self {
            Matrix::F32(_) => Dtype::F32,
            Matrix::F64(_) => Dtype::F64,
        }
    }

    /// (rows, columns).
    pub fn dim(&self) -> (usize, usize) {
        match self {
            Matrix::F32(a) => a.dim(),
            Matrix::F64(a) => a.dim(),
        }
    }
}

impl From<Array2<f32>> for Matrix {
    fn from(a: Array2<f32>) -> Self {
        Matrix::F32(a)
    }
}

impl From<Array2<f64>> for Matrix {
    fn from(a: Array2<f64>) -> Self {
        Matrix::F64(a)
    }
}
