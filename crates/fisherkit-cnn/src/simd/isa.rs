//! The x86-64 instruction sets the kernels are built for, detected at run time.

/// The instruction sets the kernels are built for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Isa {
    /// AVX-512F (x86-64-v4).
    V4,
    /// AVX2 + FMA (x86-64-v3).
    V3,
}

impl Isa {
    /// Whether this CPU runs the kernel.
    pub(crate) fn available(self) -> bool {
        #[cfg(target_arch = "x86_64")]
        {
            match self {
                Isa::V4 => std::arch::is_x86_feature_detected!("avx512f"),
                Isa::V3 => {
                    std::arch::is_x86_feature_detected!("avx2")
                        && std::arch::is_x86_feature_detected!("fma")
                }
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            let _ = self;
            false
        }
    }

    /// The widest kernel this CPU runs, if any.
    pub(crate) fn best() -> Option<Isa> {
        [Isa::V4, Isa::V3].into_iter().find(|i| i.available())
    }
}
