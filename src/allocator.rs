//! The global allocator, mimalloc, and how the program tunes it: for the speed and the memory
//! of large documents (Cargo.toml says what was measured). Every binary of the crate (the
//! CLI, its tests and benches) allocates the same way. The crate's only `unsafe` calls.

use std::alloc::{GlobalAlloc, Layout};
use std::ffi::c_void;

use libmimalloc_sys as mi;

#[global_allocator]
static ALLOCATOR: Mimalloc = Mimalloc;

/// mimalloc as Rust's allocator. A request whose alignment `mi_malloc` already gives (what
/// mimalloc's own `mi_malloc_is_naturally_aligned` says: at most 16, and at most the size)
/// goes to the plain functions; only the rest to the `_aligned` ones, whose extra checks on
/// every call were 4% of a `facts`' instructions when every request went there.
struct Mimalloc;

/// `MI_MAX_ALIGN_SIZE` in mimalloc's headers (x86-64 and aarch64): what `mi_malloc` aligns
/// any block of at least this size to.
const MI_MAX_ALIGN_SIZE: usize = 16;

fn plain_is_aligned(size: usize, align: usize) -> bool {
    align <= MI_MAX_ALIGN_SIZE && align <= size
}

// SAFETY (all four): mimalloc returns null or a block of at least `size` bytes aligned as
// asked: by `mi_*_aligned` explicitly, by the plain functions for the requests
// `plain_is_aligned` admits. `mi_free` and `mi_realloc*` take any block mimalloc returned,
// whichever function returned it.
unsafe impl GlobalAlloc for Mimalloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let (size, align) = (layout.size(), layout.align());
        let block = unsafe {
            if plain_is_aligned(size, align) { mi::mi_malloc(size) } else { mi::mi_malloc_aligned(size, align) }
        };
        block.cast()
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        let (size, align) = (layout.size(), layout.align());
        let block = unsafe {
            if plain_is_aligned(size, align) { mi::mi_zalloc(size) } else { mi::mi_zalloc_aligned(size, align) }
        };
        block.cast()
    }

    unsafe fn dealloc(&self, ptr: *mut u8, _layout: Layout) {
        unsafe { mi::mi_free(ptr.cast::<c_void>()) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let align = layout.align();
        let block = unsafe {
            if plain_is_aligned(new_size, align) {
                mi::mi_realloc(ptr.cast::<c_void>(), new_size)
            } else {
                mi::mi_realloc_aligned(ptr.cast::<c_void>(), new_size, align)
            }
        };
        block.cast()
    }
}

/// `mi_option_purge_delay` in mimalloc.h (v2, the version Cargo.toml has libmimalloc-sys
/// build), which the bindings do not name.
const MI_OPTION_PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;

/// Pages the program has freed go back to the system at once, not after mimalloc's default
/// delay (10 ms, in practice at its first allocation after that). A plan the MCP server answers frees the tree of each deleted
/// object while it writes the bytes: with the delay, those bytes took fresh pages beside the
/// freed ones, and the call's peak was 1.20x the CLI's for a plan of 10k observed objects
/// (1.04x without). The server sets it when it starts. The CLI keeps the delay: returning
/// pages costs an `madvise` per free run of pages, 4% of `facts`' CPU, for a peak that ends
/// with the process anyway.
pub fn return_freed_memory_at_once() {
    // SAFETY: mi_option_set stores one of mimalloc's own tunables; it reads nothing of ours.
    unsafe { libmimalloc_sys::mi_option_set(MI_OPTION_PURGE_DELAY, 0) }
}

/// Returns what is freed but still held (a thread's pages awaiting collection) to the
/// system now: the MCP server calls it after each tool's work, so the next answer of
/// megabytes does not take fresh pages beside a resident freed tree.
pub fn release_freed_memory() {
    // SAFETY: mi_collect only walks mimalloc's own heaps; it takes and returns nothing of ours.
    unsafe { libmimalloc_sys::mi_collect(true) }
}

#[cfg(test)]
mod tests {
    /// Every block comes back aligned as its layout asks, for the sizes and alignments on
    /// both sides of where the plain functions take over, allocated, zeroed and reallocated.
    #[test]
    fn every_block_is_aligned_as_asked() {
        use std::alloc::{GlobalAlloc, Layout};
        let allocator = super::Mimalloc;
        for align in [1, 2, 4, 8, 16, 32, 64, 4096] {
            for size in [1, 3, 8, 15, 16, 24, 40, 48, 100, 1000, 1024, 4000, 70_000] {
                let layout = Layout::from_size_align(size, align).unwrap();
                // SAFETY: each block is used within its layout and freed once, by this allocator.
                unsafe {
                    let zeroed = allocator.alloc_zeroed(layout);
                    assert!((zeroed as usize).is_multiple_of(align), "alloc_zeroed {size} aligned {align}");
                    assert!(std::slice::from_raw_parts(zeroed, size).iter().all(|b| *b == 0));
                    allocator.dealloc(zeroed, layout);
                    // Shrunk and grown: the bytes kept, the new block aligned too.
                    for new_size in [size / 2 + 1, size * 3] {
                        let block = allocator.alloc(layout);
                        assert!(
                            !block.is_null() && (block as usize).is_multiple_of(align),
                            "alloc {size} aligned {align}"
                        );
                        block.write_bytes(0xa5, size);
                        let moved = allocator.realloc(block, layout, new_size);
                        assert!((moved as usize).is_multiple_of(align), "realloc {size} to {new_size} aligned {align}");
                        let kept = size.min(new_size);
                        assert!(std::slice::from_raw_parts(moved, kept).iter().all(|b| *b == 0xa5));
                        allocator.dealloc(moved, Layout::from_size_align(new_size, align).unwrap());
                    }
                }
            }
        }
    }

    /// The option number is mimalloc's purge delay: the one whose default is 10 (ms), and
    /// which the setter changes.
    #[test]
    fn the_purge_delay_is_the_option_set() {
        // SAFETY: mi_option_get reads one of mimalloc's tunables.
        let get = || unsafe { libmimalloc_sys::mi_option_get(super::MI_OPTION_PURGE_DELAY) };
        assert_eq!(get(), 10);
        super::return_freed_memory_at_once();
        assert_eq!(get(), 0);
    }
}
