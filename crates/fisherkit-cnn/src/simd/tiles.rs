//! What both pointwise kernels share: the weights packed in panels of [`NR`] columns
//! ([`Packed`]), the destination rows checked once ([`row_offsets`]), the even cut of the rows
//! into register blocks ([`row_blocks`]) and the cache-friendly order of the tiles
//! ([`for_each_tile`]).

use ndarray::ArrayView2;

/// Columns per packed panel (two 8-float vectors).
pub(crate) const NR: usize = 16;

/// W (k, n) in panels of [`NR`] columns: panel p holds columns 16p .. 16p + 16 as k rows of 16
/// floats (`data[(p·k + q)·16 + t]` = $W_{q, 16p + t}$, zero beyond column n).
#[derive(Debug, Clone)]
pub(crate) struct Packed {
    pub k: usize,
    pub n: usize,
    pub(crate) data: Vec<f32>,
}

impl Packed {
    /// Packs `w` (k, n) (a 1×1 convolution's `wt`).
    pub fn new(w: ArrayView2<'_, f32>) -> Self {
        let (k, n) = w.dim();
        let panels = n.div_ceil(NR);
        let mut data = vec![0.0f32; panels * k * NR];
        for p in 0..panels {
            for q in 0..k {
                for t in 0..NR.min(n - p * NR) {
                    data[(p * k + q) * NR + t] = w[[q, p * NR + t]];
                }
            }
        }
        Self { k, n, data }
    }
}

/// Weights up to this size (bytes) are swept once per block of rows.
const ROW_OUTER_BYTES: usize = 512 * 1024;

/// `dst(i)` for every row i < m, each checked to leave room for n floats in an `out_len`-float
/// output (once per call, not once per panel).
pub(crate) fn row_offsets(
    m: usize,
    n: usize,
    out_len: usize,
    dst: &impl Fn(usize) -> usize,
) -> Vec<usize> {
    (0..m)
        .map(|i| {
            let o = dst(i);
            assert!(o + n <= out_len, "pointwise: destination row out of bounds");
            o
        })
        .collect()
}

/// Rows split evenly into ⌈m/mr⌉ blocks `(first row, rows)` (e.g. 8 rows at mr = 6 → 4 + 4, not
/// 6 + 2): a block of 1–2 rows has too few independent sums to hide the FMA latency.
pub(crate) fn row_blocks(m: usize, mr: usize) -> Vec<(usize, usize)> {
    let nb = m.div_ceil(mr);
    (0..nb)
        .scan(0, |i0, bi| {
            let rows = m / nb + usize::from(bi < m % nb);
            let b = (*i0, rows);
            *i0 += rows;
            Some(b)
        })
        .collect()
}

/// Calls `tile(panel, block)` for every (panel group, row block) of a k × n weight matrix, in
/// the order that keeps the reused operand in cache: small weights (they stay in L2) are swept
/// once per block of rows, which stays in L1; large ones panel by panel, each staying in cache
/// while the row blocks stream past it.
pub(crate) fn for_each_tile<P: Copy>(
    k: usize,
    n: usize,
    blocks: &[(usize, usize)],
    panels: &[P],
    mut tile: impl FnMut(P, (usize, usize)),
) {
    if k * n * 4 <= ROW_OUTER_BYTES {
        for &b in blocks {
            for &p in panels {
                tile(p, b);
            }
        }
    } else {
        for &p in panels {
            for &b in blocks {
                tile(p, b);
            }
        }
    }
}
