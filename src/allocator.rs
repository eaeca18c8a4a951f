//! The global allocator, mimalloc, and how the program tunes it: for the speed and the memory
//! of large documents (Cargo.toml says what was measured). Every binary of the crate (the
//! CLI, its tests and benches) allocates the same way. The crate's only `unsafe` calls.

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

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
