//! Kubernetes resource quantities (`500m`, `1.5Gi`, `2e3`), parsed and written back the way the
//! API server does, so the diff compares them by value and the tests' API server returns them
//! canonical. Pure, std only.
//!
//! Provenance: kubernetes/apimachinery `pkg/api/resource` at tag v0.37.0-beta.0 (commit
//! 63a9f3d1b8dd467b263aedd41b99e58da6c015a3; k3s v1.37's line): `parseQuantityString` and
//! `ParseQuantity` (quantity.go) for the grammar, the rounding up to nano units and the cap of
//! binary values at 2^63-1; `suffix.go` for the suffixes (`n u m "" k M G T P E`, `Ki`…`Ei`,
//! `e<int>`/`E<int>`); `CanonicalizeBytes`, `AsCanonicalBytes` and `AsCanonicalBase1024Bytes`
//! (quantity.go, amount.go) for the canonical form. The grammar keeps upstream's quirks: a
//! bare sign (`-`) and `1.` are zero and one, `K` is not a suffix, and a decimal exponent
//! outside the suffix table prints without a suffix, as upstream's does.
//!
//! Values are exact: a mantissa of decimal digits times a power of ten (binary multipliers are
//! multiplied out), so nothing is lost to floating point and no input is too long.

use std::cmp::Ordering;

/// How a quantity was written, which decides how it is written back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// `Ki`, `Mi`…: powers of 1024.
    BinarySi,
    /// `m`, `k`, `M`… or no suffix.
    DecimalSi,
    /// `e3`, `E-2`.
    DecimalExponent,
}

/// A parsed quantity: `negative`, `digits` (most significant first, no leading or trailing
/// zeros; empty for zero) × 10^`exponent`, and the format it was written in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Quantity {
    negative: bool,
    digits: Vec<u8>,
    exponent: i64,
    pub format: Format,
}

/// Why a text is not a quantity (upstream's `ErrFormatWrong`, `ErrSuffix`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum QuantityError {
    Format,
    Suffix,
}

impl std::fmt::Display for QuantityError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            QuantityError::Format => {
                "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
            }
            QuantityError::Suffix => "unable to parse quantity's suffix",
        })
    }
}

impl std::error::Error for QuantityError {}

/// Whether `text` is a quantity the API server accepts.
pub fn is_quantity(text: &str) -> bool {
    Quantity::parse(text).is_ok()
}

/// Whether `text` is a quantity above zero: a size or a memory request of `0` or `-1Gi`
/// parses, and the API server refuses the PV or the pod it reaches, mid-apply.
pub fn is_positive(text: &str) -> bool {
    at_least("0", text) == Some(false)
}

/// The canonical form of `text` (what the API server writes back), or `None` for a text that
/// is not a quantity.
pub fn canonical(text: &str) -> Option<String> {
    Quantity::parse(text).ok().map(|q| q.to_string())
}

/// Whether two texts are the same quantity by value (`1024Mi` and `1Gi`, `0.5` and `500m`).
pub fn same_value(a: &str, b: &str) -> bool {
    match (Quantity::parse(a), Quantity::parse(b)) {
        (Ok(a), Ok(b)) => a.cmp_value(&b) == Ordering::Equal,
        _ => false,
    }
}

/// Whether quantity `a` is at least `b` by value; `None` when either is not a quantity.
pub fn at_least(a: &str, b: &str) -> Option<bool> {
    Some(Quantity::parse(a).ok()?.cmp_value(&Quantity::parse(b).ok()?) != Ordering::Less)
}

/// Whether a map entry `key` under `parent` holds a `resource.Quantity` in the kinds k3d-gpu
/// emits or reads (kubernetes/api `core/v1/types.go` at v0.37.0-beta.0: `ResourceList` values of
/// `limits`, `requests`, `capacity`, `allocatable`, `hard`, `used`, `overhead`; RuntimeClass
/// `overhead.podFixed`; `emptyDir.sizeLimit`).
pub fn is_quantity_field(parent: &str, key: &str) -> bool {
    key == "sizeLimit"
        || matches!(
            parent,
            "limits" | "requests" | "capacity" | "allocatable" | "hard" | "used" | "overhead" | "podFixed"
        )
}

/// Upstream's `parseQuantityString`: sign, number, suffix, split as written.
fn split(text: &str) -> Result<(bool, &str, &str, &str), QuantityError> {
    let bytes = text.as_bytes();
    let end = bytes.len();
    let mut pos = 0;
    let mut positive = true;
    match bytes.first() {
        Some(b'-') => {
            positive = false;
            pos += 1;
        }
        Some(b'+') => pos += 1,
        _ => {}
    }
    while pos < end && bytes[pos] == b'0' {
        pos += 1;
    }
    if pos >= end {
        return Ok((positive, "0", "", ""));
    }
    let start = pos;
    while pos < end && bytes[pos].is_ascii_digit() {
        pos += 1;
    }
    let num = if pos == start { "0" } else { &text[start..pos] };
    if pos >= end {
        return Ok((positive, num, "", ""));
    }
    let mut denom = "";
    if bytes[pos] == b'.' {
        pos += 1;
        let start = pos;
        while pos < end && bytes[pos].is_ascii_digit() {
            pos += 1;
        }
        denom = &text[start..pos];
        if pos >= end {
            return Ok((positive, num, denom, ""));
        }
    }
    let suffix_start = pos;
    while pos < end && b"eEinumkKMGTP".contains(&bytes[pos]) {
        pos += 1;
    }
    if pos < end && matches!(bytes[pos], b'-' | b'+') {
        pos += 1;
    }
    while pos < end && bytes[pos].is_ascii_digit() {
        pos += 1;
    }
    if pos < end {
        return Err(QuantityError::Format);
    }
    Ok((positive, num, denom, &text[suffix_start..]))
}

/// Upstream's `suffixHandler.interpret`: (base 2 or 10, exponent, format).
fn interpret(suffix: &str) -> Option<(u32, i64, Format)> {
    let decimal = match suffix {
        "n" => Some(-9),
        "u" => Some(-6),
        "m" => Some(-3),
        "" => Some(0),
        "k" => Some(3),
        "M" => Some(6),
        "G" => Some(9),
        "T" => Some(12),
        "P" => Some(15),
        "E" => Some(18),
        _ => None,
    };
    if let Some(e) = decimal {
        return Some((10, e, Format::DecimalSi));
    }
    let binary = match suffix {
        "Ki" => Some(10),
        "Mi" => Some(20),
        "Gi" => Some(30),
        "Ti" => Some(40),
        "Pi" => Some(50),
        "Ei" => Some(60),
        _ => None,
    };
    if let Some(e) = binary {
        return Some((2, e, Format::BinarySi));
    }
    let rest = suffix.strip_prefix(['e', 'E']).filter(|r| !r.is_empty())?;
    // Go's strconv.ParseInt(s, 10, 64), then int32() as upstream truncates it.
    let parsed: i64 = rest.parse().ok()?;
    Some((10, i64::from(parsed as i32), Format::DecimalExponent))
}

/// Multiplies a digit string (most significant first) by a small number.
fn mul_small(digits: &mut Vec<u8>, by: u32) {
    let mut carry = 0u64;
    for d in digits.iter_mut().rev() {
        let v = u64::from(*d) * u64::from(by) + carry;
        *d = (v % 10) as u8;
        carry = v / 10;
    }
    while carry > 0 {
        digits.insert(0, (carry % 10) as u8);
        carry /= 10;
    }
}

/// Adds one to a digit string.
fn add_one(digits: &mut Vec<u8>) {
    for d in digits.iter_mut().rev() {
        if *d == 9 {
            *d = 0;
        } else {
            *d += 1;
            return;
        }
    }
    digits.insert(0, 1);
}

/// Divides by a small number, returning the remainder.
fn div_small(digits: &[u8], by: u64) -> (Vec<u8>, u64) {
    let mut out = Vec::with_capacity(digits.len());
    let mut rem = 0u64;
    for d in digits {
        let v = rem * 10 + u64::from(*d);
        out.push((v / by) as u8);
        rem = v % by;
    }
    let first = out.iter().position(|d| *d != 0).unwrap_or(out.len());
    (out.split_off(first), rem)
}

impl Quantity {
    /// Parses a quantity as the API server does (`ParseQuantity`).
    pub fn parse(text: &str) -> Result<Quantity, QuantityError> {
        if text.is_empty() {
            return Err(QuantityError::Format);
        }
        let (positive, num, denom, suffix) = split(text)?;
        let (base, exponent, mut format) = interpret(suffix).ok_or(QuantityError::Suffix)?;
        let mut digits: Vec<u8> = num.bytes().chain(denom.bytes()).map(|b| b - b'0').collect();
        let mut exp = -(denom.len() as i64);
        if base == 10 {
            exp += exponent;
        } else {
            for _ in 0..exponent / 10 {
                mul_small(&mut digits, 1024);
            }
        }
        let mut q = Quantity { negative: !positive, digits, exponent: exp, format };
        q.normalise();
        // Rounded up (away from zero) to nano units: "if you want some resources, you should
        // get some resources".
        if !q.digits.is_empty() && q.exponent < -9 {
            let drop = usize::try_from(-9 - q.exponent).unwrap_or(usize::MAX);
            let keep = q.digits.len().saturating_sub(drop);
            q.digits.truncate(keep);
            add_one(&mut q.digits);
            q.exponent = -9;
            q.normalise();
        }
        if format == Format::BinarySi {
            let max = Quantity::from_u128(i64::MAX as u128);
            if q.cmp_magnitude(&max) == Ordering::Greater {
                q.digits = max.digits;
                q.exponent = max.exponent;
            }
            if q.cmp_magnitude(&Quantity::from_u128(1)) == Ordering::Less && !q.digits.is_empty() {
                format = Format::DecimalSi;
            }
        }
        q.format = format;
        Ok(q)
    }

    fn from_u128(value: u128) -> Quantity {
        let digits = if value == 0 { Vec::new() } else { value.to_string().bytes().map(|b| b - b'0').collect() };
        let mut q = Quantity { negative: false, digits, exponent: 0, format: Format::DecimalSi };
        q.normalise();
        q
    }

    /// Leading zeros dropped, trailing zeros moved into the exponent; zero has no digits.
    fn normalise(&mut self) {
        let first = self.digits.iter().position(|d| *d != 0).unwrap_or(self.digits.len());
        self.digits.drain(..first);
        while self.digits.last() == Some(&0) {
            self.digits.pop();
            self.exponent += 1;
        }
        if self.digits.is_empty() {
            self.exponent = 0;
            self.negative = false;
        }
    }

    pub fn is_zero(&self) -> bool {
        self.digits.is_empty()
    }

    fn cmp_magnitude(&self, other: &Quantity) -> Ordering {
        match (self.is_zero(), other.is_zero()) {
            (true, true) => return Ordering::Equal,
            (true, false) => return Ordering::Less,
            (false, true) => return Ordering::Greater,
            _ => {}
        }
        // Most significant digit's power of ten first, then the digits.
        let top = |q: &Quantity| q.exponent + q.digits.len() as i64;
        top(self).cmp(&top(other)).then_with(|| {
            let n = self.digits.len().max(other.digits.len());
            (0..n)
                .map(|i| self.digits.get(i).unwrap_or(&0).cmp(other.digits.get(i).unwrap_or(&0)))
                .find(|o| o.is_ne())
                .unwrap_or(Ordering::Equal)
        })
    }

    /// Compares by value, whatever the format.
    pub fn cmp_value(&self, other: &Quantity) -> Ordering {
        match (self.negative, other.negative) {
            (false, true) => Ordering::Greater,
            (true, false) => Ordering::Less,
            (false, false) => self.cmp_magnitude(other),
            (true, true) => other.cmp_magnitude(self),
        }
    }

    /// The digits with `zeros` zeros appended, as text.
    fn digits_text(digits: &[u8], zeros: usize) -> String {
        let mut s: String = digits.iter().map(|d| char::from(b'0' + d)).collect();
        s.extend(std::iter::repeat_n('0', zeros));
        s
    }
}

impl std::fmt::Display for Quantity {
    /// Upstream's `CanonicalizeBytes`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.is_zero() {
            return f.write_str("0");
        }
        let sign = if self.negative { "-" } else { "" };
        let mut format = self.format;
        if format == Format::BinarySi {
            let small = self.cmp_magnitude(&Quantity::from_u128(1024)) == Ordering::Less;
            // Exact at scale 0: a whole number (binary values are capped below 2^63).
            if small || self.exponent < 0 {
                format = Format::DecimalSi;
            }
        }
        if format == Format::BinarySi {
            let mut whole = Quantity::digits_text(&self.digits, usize::try_from(self.exponent).unwrap_or(0))
                .bytes()
                .map(|b| b - b'0')
                .collect::<Vec<u8>>();
            let mut power = 0;
            loop {
                let (q, rem) = div_small(&whole, 1024);
                if rem != 0 || q.is_empty() || power == 6 {
                    break;
                }
                whole = q;
                power += 1;
            }
            let suffix = ["", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"][power];
            return write!(f, "{sign}{}{suffix}", Quantity::digits_text(&whole, 0));
        }
        // The exponent moved down to a multiple of three, the mantissa padded with zeros.
        let mut exponent = self.exponent;
        let mut zeros = 0;
        while exponent.rem_euclid(3) != 0 {
            exponent -= 1;
            zeros += 1;
        }
        let mantissa = Quantity::digits_text(&self.digits, zeros);
        let suffix = match format {
            Format::DecimalExponent if exponent == 0 => String::new(),
            Format::DecimalExponent => format!("e{exponent}"),
            _ => match exponent {
                -9 => "n",
                -6 => "u",
                -3 => "m",
                3 => "k",
                6 => "M",
                9 => "G",
                12 => "T",
                15 => "P",
                18 => "E",
                // Upstream finds no suffix outside its table and writes none (0 included).
                _ => "",
            }
            .to_string(),
        };
        write!(f, "{sign}{mantissa}{suffix}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grammar_as_upstream() {
        // Upstream's quirks included: a suffix or a sign alone is zero.
        for ok in [
            "1", "500m", "1.5Gi", "0.5", "1e3", "1E3", "+1", "-1", "100n", "1u", "8G", "1.", ".5", "-", "1Ei", "Gi",
            ".",
        ] {
            assert!(is_quantity(ok), "{ok}");
        }
        // quantity_test.go's invalid list, and the shapes a config gets wrong.
        for bad in [
            "1.1.M", "1+1.0M", "0.1mi", "0.1am", "aoeu", ".5i", "1i", "-3.01i", "-3.01e-", " 1", "1 ", "", "8K",
            "12 Gi", "12GB", "1e", "1e3.5", "1ki", "1Mb",
        ] {
            assert!(!is_quantity(bad), "{bad}");
        }
        assert_eq!(Quantity::parse("8K"), Err(QuantityError::Suffix));
        assert_eq!(Quantity::parse("1.5.5"), Err(QuantityError::Format));
    }

    #[test]
    fn canonical_forms_as_the_api_server_writes_them() {
        // The first nine are upstream's TestQuantityParseEmit (quantity_test.go), the rest follow
        // from CanonicalizeBytes.
        for (given, want) in [
            ("1Ki", "1Ki"),
            ("1Mi", "1Mi"),
            ("1Gi", "1Gi"),
            ("1000M", "1G"),
            (".001Ki", "1024m"),
            (".000001Ki", "1024u"),
            (".000000001Ki", "1024n"),
            (".000000000001Ki", "2n"),
            ("-.000000000001Ki", "-2n"),
            ("1024Mi", "1Gi"),
            ("0.5", "500m"),
            ("2000m", "2"),
            ("1.5Gi", "1536Mi"),
            ("0.5Gi", "512Mi"),
            ("1Ki", "1Ki"),
            ("0.5Ki", "512"),
            ("100Ki", "100Ki"),
            ("1000", "1k"),
            ("1500", "1500"),
            ("1e3", "1e3"),
            ("1.5e3", "1500"),
            ("1000000", "1M"),
            ("0", "0"),
            ("-0", "0"),
            ("0.0001", "100u"),
            ("0.0000000001", "1n"),
            ("-2Gi", "-2Gi"),
            ("1.1Ki", "1126400m"),
            ("12Gi", "12Gi"),
            ("8G", "8G"),
            ("1.", "1"),
            ("10Ei", "9223372036854775807"),
        ] {
            assert_eq!(canonical(given).as_deref(), Some(want), "{given}");
        }
    }

    #[test]
    fn values_compare_across_formats() {
        assert!(same_value("1024Mi", "1Gi"));
        assert!(same_value("0.5", "500m"));
        assert!(same_value("2000m", "2"));
        assert!(same_value("1k", "1000"));
        assert!(!same_value("1k", "1Ki"));
        assert!(!same_value("1", "2"));
        assert!(!same_value("x", "x"));
    }
}
