//! The allocator's policy for the encoder's and the gate's large buffers.
//!
//! Each stage of the forward pass and of the error feedback allocates buffers of one value per
//! calibration token and input column (159 MB for Qwen2.5-0.5B's `ffn_down` input over 8,192
//! tokens) and frees them when the stage ends. glibc serves such sizes with a fresh `mmap` and
//! unmaps them on free, so every stage faulted its buffers in again, page by page, with the TLB
//! shootdowns of each unmap: 5% of a feedback encode's samples were in the kernel's fault path.
//! Kept in the heap instead (no `mmap` for large blocks, freed memory not trimmed back below
//! 2 GB), later stages reuse pages already mapped: a Qwen2.5-Coder-0.5B `--bpw 3.3` feedback
//! encode measured 4–10% faster with the same peak RSS; at qwen2.5-7b's widths the heap's holes
//! cost 0.5 GB of peak (measured at commit 9f1c715, 2026-12-06). Only
//! the batch jobs set it (`--encode`, the gate, a local build's runner), at their edges in
//! `commands`. It governs glibc's main arena, which serves the thread that runs the stages (the
//! encoder's and the gate's main thread); a thread of rayon's has an arena of its own, whose
//! 64 MB heaps cannot hold a larger block, and glibc maps such a block whatever the policy
//! says. `tests/heap_policy.rs` checks the policy through glibc's own counters.

/// Keep freed large blocks in the process's heap for the rest of its life (glibc on Linux; a
/// no-op elsewhere). Idempotent.
pub fn keep_freed_pages() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        static ONCE: std::sync::Once = std::sync::Once::new();
        ONCE.call_once(|| {
            extern "C" {
                fn mallopt(param: std::ffi::c_int, value: std::ffi::c_int) -> std::ffi::c_int;
            }
            // glibc's malloc.h
            const M_TRIM_THRESHOLD: std::ffi::c_int = -1;
            const M_MMAP_MAX: std::ffi::c_int = -4;
            // SAFETY: mallopt only sets the allocator's parameters, under its own lock; it
            // takes effect for later allocations and frees, and blocks mapped before stay as
            // they are.
            unsafe {
                mallopt(M_MMAP_MAX, 0);
                mallopt(M_TRIM_THRESHOLD, std::ffi::c_int::MAX);
            }
        });
    }
}
