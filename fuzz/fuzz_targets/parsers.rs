//! Feeds one input to every public parser in `k3d_gpu::parse`. The only property checked
//! besides "never panics" is that a parsed cpulist survives format → parse unchanged, since
//! `facts` prints cpulists with `format_cpulist` and later stages read them back.
#![no_main]

use std::borrow::Cow;

use k3d_gpu::parse::{
    Version, firmware_build_date, format_cpulist, kernel_major_minor, parse_colon_map, parse_cpuinfo, parse_cpulist,
    parse_hex_id, parse_meminfo_kib, parse_node_meminfo_kib, parse_os_release, parse_u64, parse_uc_info,
};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    // Firmware images are binary, so this one sees the bytes exactly as given.
    let _ = firmware_build_date(data);

    // Detection reads text with `read_text`, which rejects invalid UTF-8; lossy decoding keeps
    // the rest of the input useful instead of discarding it.
    let text: Cow<str> = match std::str::from_utf8(data) {
        Ok(s) => Cow::Borrowed(s),
        Err(_) => String::from_utf8_lossy(data),
    };
    let text = text.as_ref();

    let _ = parse_cpuinfo(text);
    let _ = parse_colon_map(text);
    let _ = parse_os_release(text);
    let _ = parse_hex_id(text);
    let _ = parse_u64(text);
    let _ = parse_uc_info(text);
    let _ = Version::parse(text);
    let _ = kernel_major_minor(text);
    // The keys detection actually asks for, plus one derived from the input so odd keys
    // (empty, with spaces or colons) are exercised too.
    let first_line = text.lines().next().unwrap_or("");
    for key in ["MemTotal", "MemAvailable", first_line] {
        let _ = parse_meminfo_kib(text, key);
        let _ = parse_node_meminfo_kib(text, key);
    }

    if let Ok(cpus) = parse_cpulist(text) {
        let formatted = format_cpulist(&cpus);
        let reparsed = parse_cpulist(&formatted)
            .unwrap_or_else(|e| panic!("format_cpulist output {formatted:?} does not parse: {e}"));
        assert_eq!(reparsed, cpus, "cpulist round trip changed the set (via {formatted:?})");
    }
});
