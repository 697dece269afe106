//! Go durations (`time.ParseDuration` and `Duration.String`), the form of every
//! `metav1.Duration` field in component configurations (`leaseDuration: 15s`,
//! `httpTimeout: 1m30s`).
//!
//! [`parse_go_duration`] accepts exactly what Go accepts: an optional sign, then one or
//! more decimal numbers (with an optional fraction) each followed by a unit among `ns`,
//! `us` (`µs`, `μs`), `ms`, `s`, `m`, `h`; `0` alone needs no unit. The value is a signed
//! count of nanoseconds that must fit an `i64` (about 292 years). [`format_go_duration`]
//! prints a count as Go does (`1h2m3.5s`, `300ms`, `0s`).

use std::fmt;

/// Why a duration was refused; `Display` gives Go's message
/// (`time: invalid duration "1x"`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DurationError(String);

impl fmt::Display for DurationError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for DurationError {}

const NANOS_PER_UNIT: [(&str, u64); 8] = [
    ("ns", 1),
    ("us", 1_000),
    ("µs", 1_000),
    ("μs", 1_000),
    ("ms", 1_000_000),
    ("s", 1_000_000_000),
    ("m", 60_000_000_000),
    ("h", 3_600_000_000_000),
];

/// Parses a Go duration into signed nanoseconds, as Go's `time.ParseDuration`.
///
/// Errors, with Go's messages: `time: invalid duration "<s>"` (empty, bad number,
/// overflow), `time: missing unit in duration "<s>"`, `time: unknown unit "<u>" in
/// duration "<s>"`.
pub fn parse_go_duration(s: &str) -> Result<i64, DurationError> {
    let invalid = || DurationError(format!("time: invalid duration {}", quote(s)));
    let (negative, mut rest) = match s.as_bytes().first() {
        Some(b'-') => (true, &s[1..]),
        Some(b'+') => (false, &s[1..]),
        _ => (false, s),
    };
    if rest == "0" {
        return Ok(0);
    }
    if rest.is_empty() {
        return Err(invalid());
    }
    let mut total: u64 = 0;
    while !rest.is_empty() {
        // The integer part.
        let int_len = rest.bytes().take_while(u8::is_ascii_digit).count();
        let mut whole: u64 = 0;
        for digit in rest[..int_len].bytes() {
            whole = whole
                .checked_mul(10)
                .and_then(|w| w.checked_add(u64::from(digit - b'0')))
                .filter(|w| *w <= 1 << 63)
                .ok_or_else(invalid)?;
        }
        rest = &rest[int_len..];
        // The fraction, kept to the digits that still matter.
        let mut frac: u64 = 0;
        let mut scale: u64 = 1;
        let mut frac_len = 0;
        if let Some(after_dot) = rest.strip_prefix('.') {
            frac_len = after_dot.bytes().take_while(u8::is_ascii_digit).count();
            for digit in after_dot[..frac_len].bytes() {
                if let (Some(f), Some(sc)) = (
                    frac.checked_mul(10)
                        .and_then(|f| f.checked_add(u64::from(digit - b'0'))),
                    scale.checked_mul(10),
                ) {
                    frac = f;
                    scale = sc;
                }
            }
            rest = &after_dot[frac_len..];
        }
        if int_len == 0 && frac_len == 0 {
            return Err(invalid());
        }
        // The unit.
        let unit_len = rest
            .find(|c: char| c == '.' || c.is_ascii_digit())
            .unwrap_or(rest.len());
        if unit_len == 0 {
            return Err(DurationError(format!(
                "time: missing unit in duration {}",
                quote(s)
            )));
        }
        let unit = &rest[..unit_len];
        let Some(&(_, per_unit)) = NANOS_PER_UNIT.iter().find(|(name, _)| *name == unit) else {
            return Err(DurationError(format!(
                "time: unknown unit {} in duration {}",
                quote(unit),
                quote(s)
            )));
        };
        rest = &rest[unit_len..];
        let mut value = whole
            .checked_mul(per_unit)
            .filter(|v| *v <= 1 << 63)
            .ok_or_else(invalid)?;
        if frac > 0 {
            // Go computes frac * (unit / scale) in floating point; the rounding is the
            // same for every value that has at most nanosecond precision.
            let add = (frac as f64) * (per_unit as f64 / scale as f64);
            value = value.checked_add(add as u64).ok_or_else(invalid)?;
            if value > 1 << 63 {
                return Err(invalid());
            }
        }
        total = total
            .checked_add(value)
            .filter(|t| *t <= 1 << 63)
            .ok_or_else(invalid)?;
    }
    if negative {
        // -(1 << 63) is i64::MIN, the one magnitude without a positive counterpart.
        if total == 1 << 63 {
            return Ok(i64::MIN);
        }
        let magnitude = i64::try_from(total).map_err(|_| invalid())?;
        Ok(-magnitude)
    } else {
        i64::try_from(total).map_err(|_| invalid())
    }
}

/// Go's `%q` of a string, close enough for messages (Rust's `{:?}` escapes alike for
/// printable text).
fn quote(s: &str) -> String {
    format!("{s:?}")
}

/// Prints signed nanoseconds as Go's `Duration.String`: `0s`, `1.5s`, `300ms`, `2us`
/// (Go prints `µs`), `1m0s`, `1h2m3.004s`, `-15s`.
pub fn format_go_duration(nanos: i64) -> String {
    if nanos == 0 {
        return "0s".into();
    }
    let negative = nanos < 0;
    let u = nanos.unsigned_abs();
    let mut out = String::new();
    if u < 1_000_000_000 {
        // Below a second: the largest of ns, µs, ms that keeps an integer part.
        let (unit, scale) = if u < 1_000 {
            ("ns", 1)
        } else if u < 1_000_000 {
            ("µs", 1_000)
        } else {
            ("ms", 1_000_000)
        };
        out.push_str(&fraction(u, scale));
        out.push_str(unit);
    } else {
        let hours = u / 3_600_000_000_000;
        let minutes = (u / 60_000_000_000) % 60;
        let secs_nanos = u % 60_000_000_000;
        if hours > 0 {
            out.push_str(&format!("{hours}h{minutes}m"));
        } else if minutes > 0 {
            out.push_str(&format!("{minutes}m"));
        }
        out.push_str(&fraction(secs_nanos, 1_000_000_000));
        out.push('s');
    }
    if negative {
        out.insert(0, '-');
    }
    out
}

/// `value / scale` in decimal, without trailing zeros in the fraction.
fn fraction(value: u64, scale: u64) -> String {
    let whole = value / scale;
    let rest = value % scale;
    if rest == 0 {
        return whole.to_string();
    }
    let digits = scale.to_string().len() - 1;
    let frac = format!("{rest:0digits$}");
    format!("{whole}.{}", frac.trim_end_matches('0'))
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: i64 = 1_000_000_000;

    #[test]
    fn parses_as_go() {
        let cases: &[(&str, i64)] = &[
            ("0", 0),
            ("-0", 0),
            ("+0", 0),
            ("5s", 5 * S),
            ("30s", 30 * S),
            ("1478s", 1478 * S),
            ("-5s", -5 * S),
            ("+5s", 5 * S),
            ("-0s", 0),
            ("5.0s", 5 * S),
            ("5.6s", 5 * S + 600_000_000),
            ("5.s", 5 * S),
            (".5s", S / 2),
            ("1.004s", S + 4_000_000),
            ("1.0040s", S + 4_000_000),
            ("100.00100s", 100 * S + 1_000_000),
            ("10ns", 10),
            ("11us", 11_000),
            ("12µs", 12_000),
            ("12μs", 12_000),
            ("13ms", 13_000_000),
            ("14s", 14 * S),
            ("15m", 15 * 60 * S),
            ("16h", 16 * 3600 * S),
            ("3h30m", (3 * 3600 + 30 * 60) * S),
            ("10.5s4m", 4 * 60 * S + 10 * S + S / 2),
            ("-2m3.4s", -(2 * 60 * S + 3 * S + 400_000_000)),
            (
                "1h2m3s4ms5us6ns",
                3600 * S + 2 * 60 * S + 3 * S + 4_000_000 + 5_000 + 6,
            ),
            ("39h9m14.425s", (39 * 3600 + 9 * 60 + 14) * S + 425_000_000),
            ("52763797000ns", 52_763_797_000),
            ("0.3333333333333333333h", 20 * 60 * S),
            ("9007199254740993ns", 9_007_199_254_740_993),
            ("9223372036854775807ns", i64::MAX),
            ("-9223372036854775808ns", i64::MIN),
            ("0.100000000000000000000h", 6 * 60 * S),
        ];
        for (input, want) in cases {
            assert_eq!(parse_go_duration(input), Ok(*want), "{input}");
        }
    }

    #[test]
    fn refuses_as_go() {
        let cases: &[(&str, &str)] = &[
            ("", r#"time: invalid duration """#),
            ("3", r#"time: missing unit in duration "3""#),
            ("-", r#"time: invalid duration "-""#),
            ("s", r#"time: invalid duration "s""#),
            (".", r#"time: invalid duration ".""#),
            ("-.", r#"time: invalid duration "-.""#),
            (".s", r#"time: invalid duration ".s""#),
            ("+.s", r#"time: invalid duration "+.s""#),
            ("1d", r#"time: unknown unit "d" in duration "1d""#),
            ("1m 2s", r#"time: unknown unit "m " in duration "1m 2s""#),
            (
                "9223372036854775808ns",
                r#"time: invalid duration "9223372036854775808ns""#,
            ),
            (
                "9223372036854775.808us",
                r#"time: invalid duration "9223372036854775.808us""#,
            ),
            ("3000000h", r#"time: invalid duration "3000000h""#),
        ];
        for (input, message) in cases {
            let err = parse_go_duration(input).expect_err(input);
            assert_eq!(err.to_string(), *message, "{input}");
        }
    }

    #[test]
    fn formats_as_go() {
        let cases: &[(i64, &str)] = &[
            (0, "0s"),
            (1, "1ns"),
            (1_100, "1.1µs"),
            (2_200_000, "2.2ms"),
            (3_300_000_000, "3.3s"),
            (15 * S, "15s"),
            (60 * S, "1m0s"),
            (4 * 60 * S + 5 * S, "4m5s"),
            (4 * 60 * S + 5 * S + 1_000_000, "4m5.001s"),
            (5 * 3600 * S + 6 * 60 * S + 7 * S + 1_000_000, "5h6m7.001s"),
            (8 * 3600 * S + S / 1_000_000_000, "8h0m0.000000001s"),
            (-15 * S, "-15s"),
            (i64::MAX, "2562047h47m16.854775807s"),
            (i64::MIN, "-2562047h47m16.854775808s"),
        ];
        for (nanos, text) in cases {
            assert_eq!(format_go_duration(*nanos), *text, "{nanos}");
            assert_eq!(parse_go_duration(text), Ok(*nanos), "{text}");
        }
    }
}
