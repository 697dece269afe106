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
    parse(quantity).map_or(0, |v| (v * 1000.0).ceil() as i64)
}

/// The value rounded up to an integer (upstream `Value`, e.g. bytes); 0 when malformed.
pub fn value(quantity: &Quantity) -> i64 {
    parse(quantity).map_or(0, |v| v.ceil() as i64)
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
