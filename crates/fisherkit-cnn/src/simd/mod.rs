//! The compute kernels, one module per instruction set: the pointwise (1×1) kernels for
//! AVX-512F and AVX2 + FMA with the weight packing and tiling they share, the depthwise row
//! kernels for x86-64 and the portable depthwise code, and the run-time detection of the
//! instruction sets.

pub(crate) mod depthwise_portable;
#[cfg(target_arch = "x86_64")]
pub(crate) mod depthwise_x86;
pub(crate) mod isa;
#[cfg(target_arch = "x86_64")]
pub(crate) mod pointwise_avx2;
#[cfg(target_arch = "x86_64")]
pub(crate) mod pointwise_avx512;
pub(crate) mod tiles;
