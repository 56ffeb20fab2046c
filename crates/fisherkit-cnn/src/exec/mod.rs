//! How the work of a forward pass is run: per-thread scratch and recycled layer buffers
//! ([`scratch`]), the cut of a layer's output rows into bands ([`bands`]) and the team of
//! threads that runs the pieces of each layer ([`team`]).

pub(crate) mod bands;
pub(crate) mod scratch;
pub(crate) mod team;
