//! The fake API server's own reading of Kubernetes quantities, written from apimachinery's
//! rules (kubernetes/apimachinery v0.37.0-beta.0, `pkg/api/resource`; the rules are listed
//! below) and held to upstream's test table (`tests/upstream/apimachinery-quantity-cases.tsv`)
//! by `upstream_checks::quantities_match_apimachinerys_test_table`. It shares nothing with
//! the product's `k3d_gpu::quantity`, so the two can disagree, and the table says which is
//! wrong.
//!
//! The rules, as this file applies them:
//! - `[+-] digits [. digits] suffix`, nothing else (no spaces); a suffix is decimal SI
//!   (`n u m k M G T P E`, or none), binary SI (`Ki`…`Ei`) or a decimal exponent (`e3`,
//!   `E-2`; `E` alone is exa).
//! - The family of the suffix is kept; within it the largest suffix that loses nothing is
//!   chosen. A binary value below 1024 in magnitude, or with a fraction, is written as
//!   decimal SI; a binary value above 2^63-1 is capped there.
//! - Precision is 1n: anything finer is rounded up, away from zero.
//! - Zero is `0`.
//!
//! Not modelled: the cache by which upstream echoes some inputs exactly as typed (`+1Ki`,
//! `1.500`); values past 2^127 (refused here, not by upstream).

/// Decimal SI suffixes by their power of ten.
const DECIMAL: &[(&str, i32)] =
    &[("n", -9), ("u", -6), ("m", -3), ("", 0), ("k", 3), ("M", 6), ("G", 9), ("T", 12), ("P", 15), ("E", 18)];
const BINARY: &[(&str, u32)] = &[("Ki", 10), ("Mi", 20), ("Gi", 30), ("Ti", 40), ("Pi", 50), ("Ei", 60)];

#[derive(Clone, Copy, PartialEq, Eq)]
enum Family {
    Decimal,
    Binary,
    Exponent,
}

/// The canonical text of a quantity, or `None` where the API server refuses it.
pub fn canonical(text: &str) -> Option<String> {
    let (negative, rest) = match text.as_bytes().first()? {
        b'-' => (true, &text[1..]),
        b'+' => (false, &text[1..]),
        _ => (false, text),
    };
    let number_end = rest.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(rest.len());
    let (number, suffix) = rest.split_at(number_end);
    let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
    if fraction.contains('.') {
        return None;
    }
    // Digits as one integer, scaled by the fraction's length.
    let digits = format!("{whole}{fraction}");
    let digits = digits.trim_start_matches('0');
    let mut mantissa: u128 = if digits.is_empty() { 0 } else { digits.parse().ok()? };
    let mut exponent: i32 = -(fraction.len() as i32);
    let family = match suffix {
        s if DECIMAL.iter().any(|(d, _)| *d == s) => {
            exponent += DECIMAL.iter().find(|(d, _)| *d == s)?.1;
            Family::Decimal
        }
        s if BINARY.iter().any(|(b, _)| *b == s) => {
            let shift = BINARY.iter().find(|(b, _)| *b == s)?.1;
            mantissa = mantissa.checked_mul(1u128 << shift)?;
            Family::Binary
        }
        s if s.starts_with(['e', 'E']) => {
            let power = &s[1..];
            let unsigned = power.strip_prefix(['+', '-']).unwrap_or(power);
            if unsigned.is_empty() || !unsigned.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            exponent += power.parse::<i32>().ok()?;
            Family::Exponent
        }
        _ => return None,
    };
    // Finer than a nano unit: up to the next one, away from zero.
    if exponent < -9 {
        let drop = 10u128.checked_pow((-9 - exponent) as u32)?;
        mantissa = mantissa.div_ceil(drop);
        exponent = -9;
    }
    if mantissa == 0 {
        return Some("0".into());
    }
    let sign = if negative { "-" } else { "" };
    let integer = |m: u128, e: i32| -> Option<u128> {
        if e >= 0 {
            m.checked_mul(10u128.checked_pow(e as u32)?)
        } else {
            m.is_multiple_of(10u128.pow((-e) as u32)).then(|| m / 10u128.pow((-e) as u32))
        }
    };
    if family == Family::Binary {
        let whole_value = integer(mantissa, exponent);
        match whole_value {
            Some(v) if v >= 1024 => {
                let mut v = v.min(i64::MAX as u128);
                let mut step = 0;
                while step < BINARY.len() && v.is_multiple_of(1024) {
                    v /= 1024;
                    step += 1;
                }
                let suffix = if step == 0 { "" } else { BINARY[step - 1].0 };
                return Some(format!("{sign}{v}{suffix}"));
            }
            // Below 1024, or with a fraction: written as decimal SI.
            _ => return Some(format!("{sign}{}", decimal(mantissa, exponent, Family::Decimal))),
        }
    }
    Some(format!("{sign}{}", decimal(mantissa, exponent, family)))
}

/// `mantissa × 10^exponent` with the exponent a multiple of three and as large as it can be
/// without a fraction, as decimal SI or as an exponent.
fn decimal(mut mantissa: u128, mut exponent: i32, family: Family) -> String {
    while mantissa.is_multiple_of(10) {
        mantissa /= 10;
        exponent += 1;
    }
    while exponent.rem_euclid(3) != 0 {
        mantissa *= 10;
        exponent -= 1;
    }
    match family {
        Family::Exponent if exponent == 0 => format!("{mantissa}"),
        Family::Exponent => format!("{mantissa}e{exponent}"),
        _ => match DECIMAL.iter().find(|(_, p)| *p == exponent) {
            Some((suffix, _)) => format!("{mantissa}{suffix}"),
            // Past exa there is no suffix, and upstream at this tag writes none.
            None => format!("{mantissa}"),
        },
    }
}
