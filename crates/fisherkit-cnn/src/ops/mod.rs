//! The operations of the networks' layers on channel-last (HWC) `f32` buffers: convolution
//! as GEMM (faer) over bands of image rows, with bias + ReLU applied while the band is in
//! cache, and 3×3 max-pooling. Shapes are checked by the networks; a mismatch here is a
//! programming error and panics.
//!
//! # Layout and work split
//! A tensor is `(h, w, c)` row-major: pixel $(i, j)$'s channels are contiguous, so a 1×1
//! convolution of a band of rows is one GEMM (pixels × in) · (in × out) on the buffer as it
//! is, with no copy; a 3×3 one first gathers its band into an im2col matrix
//! (pixels × 9·in, three contiguous copies of 3·in floats per pixel) in a per-thread
//! scratch buffer. The GEMM writes into scratch; the epilogue adds the bias, applies ReLU and
//! stores the result where the next layer wants it (into its half of a fire module's
//! concatenated output, or into a zero-bordered buffer that is the next 3×3 layer's padding).
//! Bands are spread over the threads of the caller's [`Team`](crate::exec::team::Team) when
//! there are enough of them; otherwise processed in order, each GEMM then parallel inside
//! (faer) if the team lets a piece use rayon
//! ([`Team::inner_par`](crate::exec::team::Team::inner_par)).
//!
//! Layers whose [`Conv`](conv::Conv) carries packed weights
//! ([`Conv::packed`](conv::Conv::packed): EfficientNet's stem, head and classifier, and its
//! blocks in [`crate::blocks::mbconv`]) run the AVX2 + FMA kernel of [`pointwise`] instead of
//! faer where the CPU has it; SqueezeNet's stay on faer.
//!
//! One module per operation: [`conv`] (weights, "same" geometry), [`tensor`] (the HWC
//! tensor), [`activation`], [`conv1x1`], [`im2col`] (k×k on a channel-first input),
//! [`depthwise`], [`pooling`], and [`pointwise`] (the packed 1×1 kernel's dispatch). The
//! networks' fused blocks are in [`crate::blocks`], the kernels in [`crate::simd`], scratch,
//! bands and threads in [`crate::exec`].

pub(crate) mod activation;
pub(crate) mod conv;
pub(crate) mod conv1x1;
pub(crate) mod depthwise;
pub(crate) mod im2col;
pub(crate) mod pointwise;
pub(crate) mod pooling;
pub(crate) mod tensor;

#[cfg(test)]
mod tests;
