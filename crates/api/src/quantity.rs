//! Resource quantities (`500m`, `128Mi`, `1.5`, `1e3`), upstream `resource.Quantity`.

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

/// The value of a quantity in base units (cores, bytes); `None` when malformed.
pub fn parse(quantity: &Quantity) -> Option<f64> {
    let s = quantity.0.trim();
    let split = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '+' || c == '-'))
        .unwrap_or(s.len());
    let (number, suffix) = s.split_at(split);
    let number: f64 = number.parse().ok()?;
    let multiplier = match suffix {
        "" => 1.0,
        "n" => 1e-9,
        "u" => 1e-6,
        "m" => 1e-3,
        "k" => 1e3,
        "M" => 1e6,
        "G" => 1e9,
        "T" => 1e12,
        "P" => 1e15,
        "E" => 1e18,
        "Ki" => 1024f64,
        "Mi" => 1024f64.powi(2),
        "Gi" => 1024f64.powi(3),
        "Ti" => 1024f64.powi(4),
        "Pi" => 1024f64.powi(5),
        "Ei" => 1024f64.powi(6),
        exp if exp.starts_with(['e', 'E']) => 10f64.powi(exp[1..].parse().ok()?),
        _ => return None,
    };
    Some(number * multiplier)
}

/// Thousandths of the value, rounded up (upstream `MilliValue`); 0 when malformed.
pub fn milli_value(quantity: &Quantity) -> i64 {
    scaled_ceil(quantity, 3)
        .or_else(|| parse(quantity).map(|v| (v * 1000.0).ceil() as i64))
        .unwrap_or(0)
}

/// The value rounded up to an integer (upstream `Value`, e.g. bytes); 0 when malformed.
pub fn value(quantity: &Quantity) -> i64 {
    scaled_ceil(quantity, 0)
        .or_else(|| parse(quantity).map(|v| v.ceil() as i64))
        .unwrap_or(0)
}

/// `value × 10^scale` rounded up, computed exactly in integers (so `700m` is 700
/// millicores, not 701 through a float), saturated to `i64`; `None` when malformed or
/// beyond exact arithmetic (the callers then fall back to [`parse`]).
fn scaled_ceil(quantity: &Quantity, scale: i32) -> Option<i64> {
    let s = quantity.0.trim();
    let (negative, s) = match s.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, s.strip_prefix('+').unwrap_or(s)),
    };
    let split = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    let (number, suffix) = s.split_at(split);
    let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
    if whole.is_empty() && fraction.is_empty() || whole.len() + fraction.len() > 30 {
        return None;
    }
    let mut mantissa: i128 = 0;
    for c in whole.chars().chain(fraction.chars()) {
        mantissa = mantissa * 10 + i128::from(c.to_digit(10)?);
    }
    let (binary_power, decimal_exp): (u32, i32) = match suffix {
        "" => (0, 0),
        "n" => (0, -9),
        "u" => (0, -6),
        "m" => (0, -3),
        "k" => (0, 3),
        "M" => (0, 6),
        "G" => (0, 9),
        "T" => (0, 12),
        "P" => (0, 15),
        "E" => (0, 18),
        "Ki" => (1, 0),
        "Mi" => (2, 0),
        "Gi" => (3, 0),
        "Ti" => (4, 0),
        "Pi" => (5, 0),
        "Ei" => (6, 0),
        exp if exp.starts_with(['e', 'E']) => (0, exp[1..].parse().ok()?),
        _ => return None,
    };
    let fraction_digits = i32::try_from(fraction.len()).ok()?;
    let exp10 = decimal_exp
        .checked_add(scale)?
        .checked_sub(fraction_digits)?;
    let mut n = mantissa.checked_mul(1024i128.checked_pow(binary_power)?)?;
    if exp10 >= 0 {
        n = n
            .checked_mul(10i128.checked_pow(u32::try_from(exp10).ok()?)?)
            .unwrap_or(i128::MAX);
    } else {
        let divisor = 10i128.checked_pow(u32::try_from(-exp10).ok()?)?;
        // Round up, as upstream: away from zero for positive values, toward it for
        // negative ones (the ceiling).
        n = if negative {
            n / divisor
        } else {
            (n + divisor - 1) / divisor
        };
    }
    let n = if negative { -n } else { n };
    Some(i64::try_from(n).unwrap_or(if negative { i64::MIN } else { i64::MAX }))
}

/// `value` as a canonical binary-SI quantity string (upstream `resource.Quantity.String()`
/// of `NewQuantity(value, BinarySI)`): the largest power-of-1024 suffix that divides it
/// exactly (`100Mi`, `1536Ki`), plain for values below 1024 or not divisible by 1024.
pub fn format_binary_si(value: i64) -> String {
    const SUFFIXES: [&str; 6] = ["Ki", "Mi", "Gi", "Ti", "Pi", "Ei"];
    if value.abs() < 1024 {
        return value.to_string();
    }
    let mut number = value;
    let mut suffix = "";
    for s in SUFFIXES {
        if number % 1024 != 0 {
            break;
        }
        number /= 1024;
        suffix = s;
    }
    format!("{number}{suffix}")
}

/// `milli` thousandths of a unit as upstream prints a quantity canonically
/// (`resource.Quantity.String()`): with `binary`, a whole value of at least 1024 in
/// binary SI ([`format_binary_si`]: `128Mi`); otherwise decimal SI with the largest of
/// `m`, (none), `k`, `M`, `G`, `T`, `P`, `E` that leaves a whole mantissa (`1500m`, `2`,
/// `2k`, `1500`). Zero is `0`.
pub fn format_milli(milli: i64, binary: bool) -> String {
    if binary && milli % 1000 == 0 && (milli / 1000).abs() >= 1024 {
        return format_binary_si(milli / 1000);
    }
    if milli == 0 {
        return "0".to_owned();
    }
    const SUFFIXES: [&str; 8] = ["m", "", "k", "M", "G", "T", "P", "E"];
    let mut number = milli;
    let mut i = 0;
    while i + 1 < SUFFIXES.len() && number % 1000 == 0 {
        number /= 1000;
        i += 1;
    }
    format!("{number}{}", SUFFIXES[i])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(s: &str) -> Quantity {
        Quantity(s.to_owned())
    }

    #[test]
    fn parses_suffixes() {
        assert_eq!(milli_value(&q("500m")), 500);
        assert_eq!(milli_value(&q("1.5")), 1500);
        assert_eq!(milli_value(&q("2")), 2000);
        assert_eq!(value(&q("128Mi")), 128 * 1024 * 1024);
        assert_eq!(value(&q("1G")), 1_000_000_000);
        assert_eq!(value(&q("1e3")), 1000);
        assert_eq!(parse(&q("12X")), None);
        assert_eq!(value(&q("bogus")), 0);
        // Exact, not through a float: 0.7 * 1000 is 700.0000000000001 in f64.
        assert_eq!(milli_value(&q("700m")), 700);
        assert_eq!(milli_value(&q("0.7")), 700);
        assert_eq!(milli_value(&q("1.1")), 1100);
        assert_eq!(milli_value(&q("100u")), 1);
        assert_eq!(value(&q("0.5Gi")), 512 << 20);
        assert_eq!(value(&q("1.5k")), 1500);
        assert_eq!(value(&q("1001m")), 2);
        assert_eq!(value(&q("-1.5")), -1);
        assert_eq!(value(&q("12e6")), 12_000_000);
        assert_eq!(value(&q("1E")), 1_000_000_000_000_000_000);
        assert_eq!(value(&q("16Ei")), i64::MAX);
    }

    #[test]
    fn formats_milli_canonically() {
        assert_eq!(format_milli(0, false), "0");
        assert_eq!(format_milli(1500, false), "1500m");
        assert_eq!(format_milli(2000, false), "2");
        assert_eq!(format_milli(1_500_000, false), "1500");
        assert_eq!(format_milli(2_000_000, false), "2k");
        assert_eq!(format_milli(1_000_000_000_000, false), "1G");
        assert_eq!(format_milli((256 << 20) * 1000, true), "256Mi");
        assert_eq!(format_milli(1000 * 1000, true), "1k");
        assert_eq!(format_milli(1500, true), "1500m");
    }

    #[test]
    fn formats_binary_si() {
        assert_eq!(format_binary_si(0), "0");
        assert_eq!(format_binary_si(1000), "1000");
        assert_eq!(format_binary_si(100 << 20), "100Mi");
        assert_eq!(format_binary_si(1536 * 1024), "1536Ki");
        assert_eq!(format_binary_si(5_000_000), "5000000");
        assert_eq!(format_binary_si(3 << 30), "3Gi");
    }
}
