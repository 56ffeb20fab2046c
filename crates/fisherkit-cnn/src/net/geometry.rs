//! SqueezeNet's fixed geometry (input side, smallest side, cell stride, receptive field) and
//! the number of ImageNet classes, the rows of every built-in network's score map.

/// Number of ImageNet classes (rows of the score map).
pub const NUM_CLASSES: usize = 1000;
/// Side of the classification input (the score map is then 13×13).
pub const INPUT_SIDE: usize = 227;
/// Smallest input side for which the score map is non-empty.
pub const MIN_INPUT_SIDE: usize = 29;
/// Stride, in network-input pixels, between neighbouring score-map cells.
pub const CELL_STRIDE: usize = 16;
/// Receptive field, in network-input pixels, of one score-map cell.
pub const RECEPTIVE_FIELD: usize = 207;
