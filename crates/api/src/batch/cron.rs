//! The cron schedule syntax of CronJobs: upstream parses `spec.schedule` with
//! `robfig/cron/v3`'s standard parser — five fields (minute, hour, day of month, month,
//! day of week) of `*`, `?`, numbers, names (`jan`, `mon`), ranges `a-b`, steps `/n` and
//! lists `a,b`; or a descriptor (`@hourly`, `@daily`, `@midnight`, `@weekly`, `@monthly`,
//! `@yearly`, `@annually`, `@every <duration>`); optionally prefixed by `TZ=<zone> ` or
//! `CRON_TZ=<zone> `. Errors carry that parser's messages, which the API server returns
//! as the field error's detail.

/// The inclusive range and names of one field.
struct Bounds {
    min: u32,
    max: u32,
    names: &'static [(&'static str, u32)],
}

const MINUTES: Bounds = Bounds {
    min: 0,
    max: 59,
    names: &[],
};
const HOURS: Bounds = Bounds {
    min: 0,
    max: 23,
    names: &[],
};
const DAYS_OF_MONTH: Bounds = Bounds {
    min: 1,
    max: 31,
    names: &[],
};
const MONTHS: Bounds = Bounds {
    min: 1,
    max: 12,
    names: &[
        ("jan", 1),
        ("feb", 2),
        ("mar", 3),
        ("apr", 4),
        ("may", 5),
        ("jun", 6),
        ("jul", 7),
        ("aug", 8),
        ("sep", 9),
        ("oct", 10),
        ("nov", 11),
        ("dec", 12),
    ],
};
const DAYS_OF_WEEK: Bounds = Bounds {
    min: 0,
    max: 6,
    names: &[
        ("sun", 0),
        ("mon", 1),
        ("tue", 2),
        ("wed", 3),
        ("thu", 4),
        ("fri", 5),
        ("sat", 6),
    ],
};

/// Checks `spec` as the standard parser does. `Err` holds its message
/// (`expected exactly 5 fields, found 1: [foo]`).
pub fn parse_standard(spec: &str) -> Result<(), String> {
    if spec.is_empty() {
        return Err("empty spec string".to_owned());
    }
    let mut spec = spec;
    if spec.starts_with("TZ=") || spec.starts_with("CRON_TZ=") {
        // The zone ends at the first space; the parser then reads the rest.
        let end = spec.find(' ').unwrap_or(spec.len());
        spec = spec[end..].trim();
    }
    if spec.starts_with('@') {
        return parse_descriptor(spec);
    }
    let fields: Vec<&str> = spec.split_whitespace().collect();
    if fields.len() != 5 {
        return Err(format!(
            "expected exactly 5 fields, found {}: [{}]",
            fields.len(),
            fields.join(" ")
        ));
    }
    for (field, bounds) in
        fields
            .iter()
            .zip([&MINUTES, &HOURS, &DAYS_OF_MONTH, &MONTHS, &DAYS_OF_WEEK])
    {
        for expr in field.split(',').filter(|e| !e.is_empty()) {
            check_range(expr, bounds)?;
        }
    }
    Ok(())
}

/// The zone named by a `TZ=` or `CRON_TZ=` prefix, if any.
pub fn schedule_time_zone(spec: &str) -> Option<&str> {
    let rest = spec
        .strip_prefix("TZ=")
        .or_else(|| spec.strip_prefix("CRON_TZ="))?;
    Some(rest.split(' ').next().unwrap_or(rest))
}

fn parse_descriptor(spec: &str) -> Result<(), String> {
    match spec {
        "@yearly" | "@annually" | "@monthly" | "@weekly" | "@daily" | "@midnight" | "@hourly" => {
            Ok(())
        }
        _ => match spec.strip_prefix("@every ") {
            Some(duration) => {
                go_duration(duration).map_err(|e| format!("failed to parse duration {spec}: {e}"))
            }
            None => Err(format!("unrecognized descriptor: {spec}")),
        },
    }
}

/// One list element: `*`, `?`, `n`, `name`, `a-b`, each optionally `/step`.
fn check_range(expr: &str, bounds: &Bounds) -> Result<(), String> {
    let range_and_step: Vec<&str> = expr.split('/').collect();
    let low_and_high: Vec<&str> = range_and_step[0].split('-').collect();
    let single = low_and_high.len() == 1;
    let (start, mut end) = if matches!(low_and_high[0], "*" | "?") {
        (bounds.min, bounds.max)
    } else {
        let start = int_or_name(low_and_high[0], bounds)?;
        match low_and_high.len() {
            1 => (start, start),
            2 => (start, int_or_name(low_and_high[1], bounds)?),
            _ => return Err(format!("too many hyphens: {expr}")),
        }
    };
    let step = match range_and_step.len() {
        1 => 1,
        2 => {
            let step = number(range_and_step[1])?;
            if single {
                end = bounds.max;
            }
            step
        }
        _ => return Err(format!("too many slashes: {expr}")),
    };
    if start < bounds.min {
        return Err(format!(
            "beginning of range ({start}) below minimum ({}): {expr}",
            bounds.min
        ));
    }
    if end > bounds.max {
        return Err(format!(
            "end of range ({end}) above maximum ({}): {expr}",
            bounds.max
        ));
    }
    if start > end {
        return Err(format!(
            "beginning of range ({start}) beyond end of range ({end}): {expr}"
        ));
    }
    if step == 0 {
        return Err(format!("step of range should be a positive number: {expr}"));
    }
    Ok(())
}

fn int_or_name(expr: &str, bounds: &Bounds) -> Result<u32, String> {
    let lower = expr.to_ascii_lowercase();
    match bounds.names.iter().find(|(name, _)| *name == lower) {
        Some((_, value)) => Ok(*value),
        None => number(expr),
    }
}

/// Go's `strconv.Atoi` then a sign check, with their messages.
fn number(expr: &str) -> Result<u32, String> {
    let digits = expr.strip_prefix(['+', '-']).unwrap_or(expr);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!(
            "failed to parse int from {expr}: strconv.Atoi: parsing {expr:?}: invalid syntax"
        ));
    }
    let value: i64 = expr.parse().map_err(|_| {
        format!(
            "failed to parse int from {expr}: strconv.Atoi: parsing {expr:?}: value out of range"
        )
    })?;
    if value < 0 {
        return Err(format!("negative number ({value}) not allowed: {expr}"));
    }
    // Anything above u32 is far above every field's maximum.
    Ok(u32::try_from(value).unwrap_or(u32::MAX))
}

/// Go's `time.ParseDuration` syntax (`1h30m`, `1.5s`, `300ms`), with its messages.
fn go_duration(text: &str) -> Result<(), String> {
    let invalid = || format!("time: invalid duration {text:?}");
    let mut rest = text.strip_prefix(['+', '-']).unwrap_or(text);
    if rest == "0" {
        return Ok(());
    }
    if rest.is_empty() {
        return Err(invalid());
    }
    while !rest.is_empty() {
        let number_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let number = &rest[..number_len];
        if number.is_empty() || number == "." || number.matches('.').count() > 1 {
            return Err(invalid());
        }
        rest = &rest[number_len..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let unit = &rest[..unit_len];
        if unit.is_empty() {
            return Err(format!("time: missing unit in duration {text:?}"));
        }
        if !matches!(unit, "ns" | "us" | "µs" | "μs" | "ms" | "s" | "m" | "h") {
            return Err(format!("time: unknown unit {unit:?} in duration {text:?}"));
        }
        rest = &rest[unit_len..];
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_what_the_standard_parser_accepts() {
        for ok in [
            "*/5 * * * *",
            "0 0 1 jan-jun mon",
            "15,45 8-17 ? * MON-FRI",
            "@hourly",
            "@every 1h30m",
            "TZ=Europe/Paris 0 3 * * *",
            "5/15 * * * *",
        ] {
            assert_eq!(parse_standard(ok), Ok(()), "{ok}");
        }
    }

    #[test]
    fn errors_carry_the_parser_messages() {
        let cases = [
            ("", "empty spec string"),
            ("foo", "expected exactly 5 fields, found 1: [foo]"),
            ("60 * * * *", "end of range (60) above maximum (59): 60"),
            ("* * 0 * *", "beginning of range (0) below minimum (1): 0"),
            (
                "5-1 * * * *",
                "beginning of range (5) beyond end of range (1): 5-1",
            ),
            (
                "*/0 * * * *",
                "step of range should be a positive number: */0",
            ),
            (
                "x * * * *",
                r#"failed to parse int from x: strconv.Atoi: parsing "x": invalid syntax"#,
            ),
            ("@often", "unrecognized descriptor: @often"),
            (
                "@every 5",
                r#"failed to parse duration @every 5: time: missing unit in duration "5""#,
            ),
            ("1-2-3 * * * *", "too many hyphens: 1-2-3"),
        ];
        for (spec, message) in cases {
            assert_eq!(parse_standard(spec), Err(message.to_owned()), "{spec}");
        }
    }

    #[test]
    fn finds_the_schedule_time_zone() {
        assert_eq!(schedule_time_zone("CRON_TZ=UTC 0 * * * *"), Some("UTC"));
        assert_eq!(schedule_time_zone("0 * * * *"), None);
    }
}
