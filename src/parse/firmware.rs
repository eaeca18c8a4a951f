//! The build date inside an Intel NPU firmware image.
//!
//! The image carries an ASCII version string that starts with the build date,
//! `YYYYMMDD*<PLATFORM>...*...`. We take the first eight-digit run followed by `*` that is a
//! plausible calendar date; compressed images are decompressed by the caller.

/// Returns the build date as `YYYY-MM-DD`, or `None` when no version string is found.
pub fn firmware_build_date(image: &[u8]) -> Option<String> {
    let mut i = 0;
    while i + 9 <= image.len() {
        let window = &image[i..i + 9];
        if window[8] == b'*' && window[..8].iter().all(u8::is_ascii_digit) {
            let preceded_by_digit = i > 0 && image[i - 1].is_ascii_digit();
            if !preceded_by_digit {
                let digits = std::str::from_utf8(&window[..8]).ok()?;
                let year: u32 = digits[..4].parse().ok()?;
                let month: u32 = digits[4..6].parse().ok()?;
                let day: u32 = digits[6..8].parse().ok()?;
                if (2015..=2099).contains(&year) && (1..=12).contains(&month) && (1..=31).contains(&day) {
                    return Some(format!("{}-{}-{}", &digits[..4], &digits[4..6], &digits[6..8]));
                }
            }
        }
        i += 1;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_date_after_a_binary_header() {
        let mut image = vec![0u8; 64];
        image.extend_from_slice(b"20260715*LNL_CLIENT_SILICON-release*1830*ci_tag_x");
        assert_eq!(firmware_build_date(&image).as_deref(), Some("2026-07-15"));
    }

    #[test]
    fn ignores_implausible_dates_and_longer_digit_runs() {
        assert_eq!(firmware_build_date(b"12345678*x"), None);
        assert_eq!(firmware_build_date(b"920260715*x 20250101*y").as_deref(), Some("2025-01-01"));
        assert_eq!(firmware_build_date(b""), None);
    }
}
