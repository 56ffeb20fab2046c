//! Memory a forward pass reuses: each thread's scratch for im2col matrices and GEMM outputs
//! ([`with_scratch`]) and its pool of recycled layer-output buffers ([`zeroed`],
//! [`overwritable`], [`recycle`]).

use std::cell::RefCell;

thread_local! {
    /// Per-thread scratch for im2col matrices and GEMM outputs, reused across layers and calls.
    static SCRATCH: RefCell<Vec<f32>> = const { RefCell::new(Vec::new()) };
}

/// Runs `f` on `len` floats of this thread's scratch (contents unspecified). A nested call
/// on the same thread (rayon may run another band while `f` waits) gets a fresh buffer.
pub(crate) fn with_scratch<R>(len: usize, f: impl FnOnce(&mut [f32]) -> R) -> R {
    SCRATCH.with(|cell| match cell.try_borrow_mut() {
        Ok(mut v) => {
            if v.len() < len {
                v.resize(len, 0.0);
            }
            f(&mut v[..len])
        }
        Err(_) => f(&mut vec![0.0; len]),
    })
}

thread_local! {
    /// Layer-output buffers this thread returned with [`recycle`], for [`zeroed`] to reuse:
    /// writing into memory the process already has avoids the page faults (and the kernel's
    /// zeroing) of fresh allocations, measured at about 12 % of a 907 px forward pass.
    static BUFFERS: RefCell<Vec<Vec<f32>>> = const { RefCell::new(Vec::new()) };
}

/// Most floats [`recycle`] keeps per thread (256 MB).
const MAX_POOLED_FLOATS: usize = 64 << 20;

/// The smallest buffer recycled on this thread whose capacity holds `len` floats, if any.
fn take_pooled(len: usize) -> Option<Vec<f32>> {
    BUFFERS.with(|b| {
        let mut b = b.borrow_mut();
        let best = (0..b.len())
            .filter(|&i| b[i].capacity() >= len)
            .min_by_key(|&i| b[i].capacity());
        best.map(|i| b.swap_remove(i))
    })
}

/// A vector of `len` zeros, reusing a recycled buffer of this thread when one is large enough.
pub(crate) fn zeroed(len: usize) -> Vec<f32> {
    let reused = take_pooled(len);
    match reused {
        Some(mut v) => {
            v.clear();
            v.resize(len, 0.0);
            v
        }
        None => vec![0.0; len],
    }
}

/// A vector of `len` floats whose contents are unspecified (a recycled buffer's old values,
/// zeros beyond them), for an output the caller overwrites in full: like [`zeroed`] without
/// clearing what is reused.
pub(crate) fn overwritable(len: usize) -> Vec<f32> {
    let reused = take_pooled(len);
    match reused {
        Some(mut v) => {
            if v.len() >= len {
                v.truncate(len);
            } else {
                v.resize(len, 0.0);
            }
            v
        }
        None => vec![0.0; len],
    }
}

/// Gives `v` back for [`zeroed`] on this thread, dropping the smallest buffers beyond
/// [`MAX_POOLED_FLOATS`].
pub(crate) fn recycle(v: Vec<f32>) {
    BUFFERS.with(|b| {
        let mut b = b.borrow_mut();
        b.push(v);
        b.sort_by_key(|v| std::cmp::Reverse(v.capacity()));
        let mut total = 0;
        b.retain(|v| {
            total += v.capacity();
            total <= MAX_POOLED_FLOATS
        });
    });
}
