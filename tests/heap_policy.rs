//! The batch jobs' heap policy (`dataplane::heap::keep_freed_pages`), observed through glibc's
//! own counters. Its own test binary without libtest's harness (Cargo.toml): the policy is
//! process-wide and cannot be unset, and the check runs on the main thread, whose allocations
//! come from glibc's main arena as the batch jobs' stages' do. (A thread's own arena serves a
//! block larger than its 64 MB heaps by a mapping whatever the policy says.)

/// glibc's `struct mallinfo2` (malloc.h): every field a `size_t`.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[repr(C)]
#[derive(Debug, Clone, Copy)]
struct MallInfo2 {
    arena: usize,
    ordblks: usize,
    smblks: usize,
    hblks: usize,
    hblkhd: usize,
    usmblks: usize,
    fsmblks: usize,
    uordblks: usize,
    fordblks: usize,
    keepcost: usize,
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn info() -> MallInfo2 {
    extern "C" {
        fn mallinfo2() -> MallInfo2;
    }
    // SAFETY: mallinfo2 only reads the allocator's statistics (main arena and mapped blocks)
    unsafe { mallinfo2() }
}

/// A buffer of `bytes`, written so that it is really used, and its first byte read back.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn touch(bytes: usize) -> Vec<u8> {
    let v = vec![7u8; bytes];
    assert_eq!(std::hint::black_box(&v)[bytes - 1], 7);
    v
}

/// What the README and the heap module promise: after `keep_freed_pages`, a stage's large buffer
/// comes from the heap rather than a mapping of its own, and freeing it does not hand the heap
/// back to the kernel (the next stage reuses those pages). Before it, glibc maps such a block
/// by itself, which is what this guards against.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn main() {
    const BIG: usize = 64 << 20;
    // glibc's default: a block this large gets its own mapping
    let before = info();
    let v = touch(BIG);
    let mapped = info();
    assert!(mapped.hblkhd >= before.hblkhd + BIG, "without the policy: {before:?} then {mapped:?}");
    drop(v);
    kaiju::dataplane::heap::keep_freed_pages();
    let before = info();
    let v = touch(BIG);
    let held = info();
    assert_eq!(held.hblkhd, before.hblkhd, "no new mapping under the policy: {held:?}");
    assert!(held.arena >= before.arena + BIG, "served from the heap: {before:?} then {held:?}");
    drop(v);
    let after = info();
    assert!(after.arena >= before.arena + BIG, "not trimmed back on free: {held:?} then {after:?}");
    // the next buffer of the same size reuses what the last one freed
    let v = touch(BIG);
    assert_eq!(info().arena, after.arena, "the heap did not grow again");
    drop(v);
    println!("test after_the_policy_large_buffers_stay_in_the_heap ... ok");
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn main() {
    println!("the heap policy is glibc's: nothing to check on this target");
}
