//! `.npy` arrays: (N, D) little-endian float32/float64 matrices in C order.
//!
//! The header is parsed here rather than by `ndarray-npy` so that every
//! unsupported file gets a message that says what it holds and what was
//! expected, and so that the data size is checked against the bytes actually
//! present before anything is allocated.
//!
//! Owners: [`read_header`] parses every `.npy` header the crate reads (files,
//! `.npz` entries, blocked reading), [`npy_header`] writes every header the
//! crate writes itself (empty arrays, [`NpyBlockWriter`], `.npz` entries);
//! the non-empty arrays of [`write_npy`] are written by `ndarray-npy`.
//!
//! Format (numpy's `NEP 1`): the magic `\x93NUMPY`, a major and minor
//! version byte, the header length (u16 little-endian in version 1, u32 in
//! versions 2 and 3), then an ASCII Python dict literal
//! `{'descr': '<f4', 'fortran_order': False, 'shape': (N, D), }`, then the
//! raw data.
//!
//! One concern per file: [`Dtype`], [`Element`] and [`Matrix`] (`dtype.rs`);
//! the header, read and written (`header.rs`, its Python-literal parser in
//! `literal.rs`); what a header describes as a matrix (`layout.rs`);
//! reading arrays (`read.rs`); writing them whole (`write.rs`) or a block at
//! a time ([`NpyBlockWriter`], `block_writer.rs`). `.npz` archives are
//! [`crate::npz`].

mod block_writer;
mod dtype;
mod header;
mod layout;
mod literal;
mod read;
mod write;

pub use block_writer::NpyBlockWriter;
pub use dtype::{Dtype, Element, Matrix};
pub use read::{read_npy, read_npy_as, read_npy_bytes};
pub use write::{write_matrix, write_npy};

pub(crate) use header::{npy_header, py_shape, read_header, Descr, Header, NPY_MAGIC, ZIP_MAGIC};
pub(crate) use layout::MatrixLayout;
pub(crate) use read::{read_matrix_data, read_values};

#[cfg(test)]
mod tests;
