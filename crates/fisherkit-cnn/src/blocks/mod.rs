//! The networks' fused blocks, built on [`crate::ops`]: SqueezeNet's `conv1` + max-pool and
//! fire module ([`fire`]), EfficientNet's MBConv block ([`mbconv`]) and its head +
//! classifier ([`head_fc`]).

pub(crate) mod fire;
pub(crate) mod head_fc;
pub(crate) mod mbconv;
