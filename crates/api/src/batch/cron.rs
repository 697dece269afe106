//! The cron schedule syntax of CronJobs: upstream parses `spec.schedule` with
//! `robfig/cron/v3`'s standard parser — five fields (minute, hour, day of month, month,
//! day of week) of `*`, `?`, numbers, names (`jan`, `mon`), ranges `a-b`, steps `/n` and
//! lists `a,b`; or a descriptor (`@hourly`, `@daily`, `@midnight`, `@weekly`, `@monthly`,
//! `@yearly`, `@annually`, `@every <duration>`); optionally prefixed by `TZ=<zone> ` or
//! `CRON_TZ=<zone> `. Errors carry that parser's messages, which the API server returns
//! as the field error's detail.
//!
//! [`Schedule`] is the parsed form, with robfig's `Next`: the next activation after an
//! instant, reading the fields in a time zone (`jiff`'s, from the system tzdb or a
//! TZif/POSIX rule the caller loads), daylight saving time included.

use k8s_openapi::jiff::Timestamp;
use k8s_openapi::jiff::tz::TimeZone;

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

/// The bit robfig sets on a field written `*` or `?` (without a step above 1): with it
/// on the day of month or the day of week, a day must match both day fields; without it
/// on either, one of them suffices.
const STAR_BIT: u64 = 1 << 63;

/// A parsed schedule (robfig's `Schedule`): a cron specification, or `@every`.
///
/// Parsing does no I/O: a `TZ=` or `CRON_TZ=` zone is kept by name
/// ([`time_zone`](Self::time_zone)), and the caller loads it and hands the zone to
/// [`next`](Self::next).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Schedule {
    time_zone: Option<String>,
    kind: Kind,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Kind {
    /// robfig's `SpecSchedule`: one bit per allowed value of each field.
    Spec(Fields),
    /// robfig's `ConstantDelaySchedule`: whole seconds, at least one.
    Every { seconds: i64 },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Fields {
    second: u64,
    minute: u64,
    hour: u64,
    dom: u64,
    month: u64,
    dow: u64,
}

/// Every value of `bounds`, marked as a star.
fn all(bounds: &Bounds) -> u64 {
    bits(bounds.min, bounds.max, 1) | STAR_BIT
}

fn bits(min: u32, max: u32, step: u32) -> u64 {
    let mut b = 0;
    let mut i = min;
    while i <= max && i < 63 {
        b |= 1 << i;
        i = match i.checked_add(step) {
            Some(n) => n,
            None => break,
        };
    }
    b
}

/// Checks `spec` as the standard parser does. `Err` holds its message
/// (`expected exactly 5 fields, found 1: [foo]`).
pub fn parse_standard(spec: &str) -> Result<(), String> {
    Schedule::parse(spec).map(|_| ())
}

/// The zone named by a `TZ=` or `CRON_TZ=` prefix, if any.
pub fn schedule_time_zone(spec: &str) -> Option<&str> {
    let rest = spec
        .strip_prefix("TZ=")
        .or_else(|| spec.strip_prefix("CRON_TZ="))?;
    Some(rest.split(' ').next().unwrap_or(rest))
}

impl Schedule {
    /// Parses `spec` as robfig's standard parser (`cron.ParseStandard`) does, but for
    /// loading the `TZ=` zone. `Err` holds that parser's message.
    pub fn parse(spec: &str) -> Result<Self, String> {
        if spec.is_empty() {
            return Err("empty spec string".to_owned());
        }
        let mut spec = spec;
        let mut time_zone = None;
        if spec.starts_with("TZ=") || spec.starts_with("CRON_TZ=") {
            // The zone ends at the first space; the parser then reads the rest.
            let end = spec.find(' ').unwrap_or(spec.len());
            let eq = spec.find('=').unwrap_or(0);
            time_zone = Some(spec[eq + 1..end].to_owned());
            spec = spec[end..].trim();
        }
        let kind = if spec.starts_with('@') {
            parse_descriptor(spec)?
        } else {
            Kind::Spec(parse_fields(spec)?)
        };
        Ok(Self { time_zone, kind })
    }

    /// The zone of a `TZ=` or `CRON_TZ=` prefix, by name; robfig fails the parse with
    /// `provided bad location <name>: <error>` when it does not load.
    pub fn time_zone(&self) -> Option<&str> {
        self.time_zone.as_deref()
    }

    /// The first activation strictly after `after`, reading the fields in `tz` (robfig's
    /// `SpecSchedule.Next`; `ConstantDelaySchedule.Next` for `@every`, which ignores the
    /// zone). None when the fields match nothing within five years (`0 0 30 2 *`), as
    /// robfig returns the zero time.
    ///
    /// Daylight saving time as robfig has it: hours and minutes advance in absolute time,
    /// so a wall time skipped by a spring-forward transition does not run that day, and
    /// one repeated by a fall-back transition runs twice; a day that starts after
    /// midnight (a transition at 00:00) is entered at its first existing hour.
    pub fn next(&self, after: Timestamp, tz: &TimeZone) -> Option<Timestamp> {
        // robfig first moves to the next whole second.
        let mut second = after.as_second();
        if after.subsec_nanosecond() < 0 {
            second -= 1;
        }
        match &self.kind {
            Kind::Every { seconds } => Timestamp::from_second(second.checked_add(*seconds)?).ok(),
            Kind::Spec(fields) => {
                let t = next_spec(fields, second.checked_add(1)?, tz)?;
                Timestamp::from_second(t).ok()
            }
        }
    }
}

fn parse_fields(spec: &str) -> Result<Fields, String> {
    let fields: Vec<&str> = spec.split_whitespace().collect();
    if fields.len() != 5 {
        return Err(format!(
            "expected exactly 5 fields, found {}: [{}]",
            fields.len(),
            fields.join(" ")
        ));
    }
    let mut parsed = [0u64; 5];
    for ((field, bounds), out) in fields
        .iter()
        .zip([&MINUTES, &HOURS, &DAYS_OF_MONTH, &MONTHS, &DAYS_OF_WEEK])
        .zip(parsed.iter_mut())
    {
        for expr in field.split(',').filter(|e| !e.is_empty()) {
            *out |= parse_range(expr, bounds)?;
        }
    }
    let [minute, hour, dom, month, dow] = parsed;
    Ok(Fields {
        second: 1,
        minute,
        hour,
        dom,
        month,
        dow,
    })
}

fn parse_descriptor(spec: &str) -> Result<Kind, String> {
    let at_midnight = |dom, month, dow| {
        Kind::Spec(Fields {
            second: 1,
            minute: 1,
            hour: 1,
            dom,
            month,
            dow,
        })
    };
    Ok(match spec {
        "@yearly" | "@annually" => at_midnight(1 << 1, 1 << 1, all(&DAYS_OF_WEEK)),
        "@monthly" => at_midnight(1 << 1, all(&MONTHS), all(&DAYS_OF_WEEK)),
        "@weekly" => at_midnight(all(&DAYS_OF_MONTH), all(&MONTHS), 1),
        "@daily" | "@midnight" => {
            at_midnight(all(&DAYS_OF_MONTH), all(&MONTHS), all(&DAYS_OF_WEEK))
        }
        "@hourly" => Kind::Spec(Fields {
            second: 1,
            minute: 1,
            hour: all(&HOURS),
            dom: all(&DAYS_OF_MONTH),
            month: all(&MONTHS),
            dow: all(&DAYS_OF_WEEK),
        }),
        _ => match spec.strip_prefix("@every ") {
            Some(duration) => {
                let nanos = go_duration(duration)
                    .map_err(|e| format!("failed to parse duration {spec}: {e}"))?;
                // robfig's `Every`: at least a second, whole seconds.
                let seconds = i64::try_from(nanos / 1_000_000_000).unwrap_or(i64::MAX);
                Kind::Every {
                    seconds: seconds.max(1),
                }
            }
            None => return Err(format!("unrecognized descriptor: {spec}")),
        },
    })
}

/// One list element: `*`, `?`, `n`, `name`, `a-b`, each optionally `/step`; its bits.
fn parse_range(expr: &str, bounds: &Bounds) -> Result<u64, String> {
    let range_and_step: Vec<&str> = expr.split('/').collect();
    let low_and_high: Vec<&str> = range_and_step[0].split('-').collect();
    let single = low_and_high.len() == 1;
    let mut extra = 0;
    let (start, mut end) = if matches!(low_and_high[0], "*" | "?") {
        extra = STAR_BIT;
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
            if step > 1 {
                extra = 0;
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
    Ok(bits(start, end, step) | extra)
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

/// Go's `time.ParseDuration` (`1h30m`, `1.5s`, `300ms`), with its messages: the
/// duration in nanoseconds.
fn go_duration(text: &str) -> Result<i128, String> {
    let invalid = || format!("time: invalid duration {text:?}");
    let negative = text.starts_with('-');
    let mut rest = text.strip_prefix(['+', '-']).unwrap_or(text);
    if rest == "0" {
        return Ok(0);
    }
    if rest.is_empty() {
        return Err(invalid());
    }
    let mut total: u128 = 0;
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
        let unit_nanos: u128 = match unit {
            "ns" => 1,
            "us" | "µs" | "μs" => 1_000,
            "ms" => 1_000_000,
            "s" => 1_000_000_000,
            "m" => 60_000_000_000,
            "h" => 3_600_000_000_000,
            _ => return Err(format!("time: unknown unit {unit:?} in duration {text:?}")),
        };
        rest = &rest[unit_len..];
        let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
        let whole: u128 = if whole.is_empty() {
            0
        } else {
            whole.parse().map_err(|_| invalid())?
        };
        // Go keeps the fraction's leading digits that fit and scales them by the unit.
        let (mut frac, mut scale) = (0u128, 1u128);
        for digit in fraction.bytes().take(20) {
            frac = frac * 10 + u128::from(digit - b'0');
            scale *= 10;
        }
        total = whole
            .checked_mul(unit_nanos)
            .and_then(|n| n.checked_add(frac * unit_nanos / scale))
            .and_then(|n| total.checked_add(n))
            .filter(|n| *n <= 1 << 63)
            .ok_or_else(invalid)?;
    }
    if total == 1 << 63 && !negative {
        return Err(invalid());
    }
    let total = i128::try_from(total).map_err(|_| invalid())?;
    Ok(if negative { -total } else { total })
}

/// A wall-clock reading (Go's `Time` fields in a location).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Civil {
    year: i64,
    month: i64,
    day: i64,
    hour: i64,
    minute: i64,
    second: i64,
    /// 0 for Sunday, as Go's `Weekday`.
    weekday: i64,
}

/// The offset of `tz` from UTC at the Unix second `at`, in seconds.
fn offset_at(tz: &TimeZone, at: i64) -> i64 {
    Timestamp::from_second(at).map_or(0, |ts| i64::from(tz.to_offset(ts).seconds()))
}

/// Days since 1970-01-01 of a proleptic Gregorian date (month 1 to 12).
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The date of a day since 1970-01-01: year, month, day.
fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

/// The wall clock of `tz` at the Unix second `at`.
fn local(tz: &TimeZone, at: i64) -> Civil {
    let wall = at + offset_at(tz, at);
    let days = wall.div_euclid(86_400);
    let of_day = wall.rem_euclid(86_400);
    let (year, month, day) = civil_from_days(days);
    Civil {
        year,
        month,
        day,
        hour: of_day / 3600,
        minute: of_day / 60 % 60,
        second: of_day % 60,
        weekday: (days + 4).rem_euclid(7),
    }
}

/// Go's `time.Date` in `tz`: out-of-range fields roll over (month 13 is January of the
/// next year, day 32 the next month's first), and a wall time that a transition skips or
/// repeats resolves as Go resolves it (the offset in force at the wall time read as UTC,
/// corrected once).
fn go_date(tz: &TimeZone, c: Civil) -> i64 {
    let m0 = c.month - 1;
    let year = c.year + m0.div_euclid(12);
    let month = m0.rem_euclid(12) + 1;
    let days = days_from_civil(year, month, 1) + c.day - 1;
    let wall = days * 86_400 + c.hour * 3600 + c.minute * 60 + c.second;
    let guess = offset_at(tz, wall);
    wall - offset_at(tz, wall - guess)
}

fn has(bits: u64, value: i64) -> bool {
    u32::try_from(value).is_ok_and(|v| v < 64 && bits & (1 << v) != 0)
}

fn day_matches(f: &Fields, c: Civil) -> bool {
    let dom = has(f.dom, c.day);
    let dow = has(f.dow, c.weekday);
    if f.dom & STAR_BIT != 0 || f.dow & STAR_BIT != 0 {
        dom && dow
    } else {
        dom || dow
    }
}

/// robfig's `SpecSchedule.Next` from the Unix second `start` (already the next whole
/// second), in `tz`.
fn next_spec(f: &Fields, start: i64, tz: &TimeZone) -> Option<i64> {
    let values = |b: u64| b & !STAR_BIT;
    if [f.second, f.minute, f.hour, f.dom | f.dow, f.month]
        .into_iter()
        .any(|b| values(b) == 0)
    {
        return None;
    }
    let mut t = start;
    let year_limit = local(tz, t).year + 5;
    let mut added = false;
    // Five years of day and hour steps stay far below this; it only guards a zone whose
    // transitions would keep the walk from advancing.
    let mut budget: u32 = 2_000_000;
    let mut spend = || {
        budget = budget.checked_sub(1)?;
        Some(())
    };
    'wrap: loop {
        spend()?;
        if local(tz, t).year > year_limit {
            return None;
        }
        loop {
            spend()?;
            let c = local(tz, t);
            if has(f.month, c.month) {
                break;
            }
            if !added {
                added = true;
                t = go_date(
                    tz,
                    Civil {
                        day: 1,
                        hour: 0,
                        minute: 0,
                        second: 0,
                        ..c
                    },
                );
            }
            let c = local(tz, t);
            t = go_date(
                tz,
                Civil {
                    month: c.month + 1,
                    ..c
                },
            );
            if local(tz, t).month == 1 {
                continue 'wrap;
            }
        }
        loop {
            spend()?;
            let c = local(tz, t);
            if day_matches(f, c) {
                break;
            }
            if !added {
                added = true;
                t = go_date(
                    tz,
                    Civil {
                        hour: 0,
                        minute: 0,
                        second: 0,
                        ..c
                    },
                );
            }
            let c = local(tz, t);
            t = go_date(
                tz,
                Civil {
                    day: c.day + 1,
                    ..c
                },
            );
            // A transition at midnight leaves the walk off the day's start: back to it
            // (or on to the next day from late evening).
            let hour = local(tz, t).hour;
            if hour > 12 {
                t += (24 - hour) * 3600;
            } else {
                t -= hour * 3600;
            }
            if local(tz, t).day == 1 {
                continue 'wrap;
            }
        }
        loop {
            spend()?;
            let c = local(tz, t);
            if has(f.hour, c.hour) {
                break;
            }
            if !added {
                added = true;
                t = go_date(
                    tz,
                    Civil {
                        minute: 0,
                        second: 0,
                        ..c
                    },
                );
            }
            t += 3600;
            if local(tz, t).hour == 0 {
                continue 'wrap;
            }
        }
        loop {
            spend()?;
            if has(f.minute, local(tz, t).minute) {
                break;
            }
            if !added {
                added = true;
                t -= t.rem_euclid(60);
            }
            t += 60;
            if local(tz, t).minute == 0 {
                continue 'wrap;
            }
        }
        loop {
            spend()?;
            if has(f.second, local(tz, t).second) {
                break;
            }
            added = true;
            t += 1;
            if local(tz, t).second == 0 {
                continue 'wrap;
            }
        }
        return Some(t);
    }
}

/// `t` in `tz` as Go's `time.RFC3339` prints it (`2026-03-01T09:00:00+09:00`, `Z` for a
/// zero offset): the format of the `batch.kubernetes.io/cronjob-scheduled-timestamp`
/// annotation.
pub fn format_rfc3339(t: Timestamp, tz: &TimeZone) -> String {
    let mut second = t.as_second();
    if t.subsec_nanosecond() < 0 {
        second -= 1;
    }
    let offset = offset_at(tz, second);
    let c = local(tz, second);
    let zone = if offset == 0 {
        "Z".to_owned()
    } else {
        let sign = if offset < 0 { '-' } else { '+' };
        let abs = offset.abs();
        format!("{sign}{:02}:{:02}", abs / 3600, abs / 60 % 60)
    };
    format!(
        "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}{zone}",
        c.year, c.month, c.day, c.hour, c.minute, c.second
    )
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

    fn ts(text: &str) -> Timestamp {
        text.parse().unwrap()
    }

    /// Next after `after` of `spec` in `tz`, in UTC RFC 3339.
    fn next_in(spec: &str, tz: &TimeZone, after: &str) -> Option<String> {
        let schedule = Schedule::parse(spec).unwrap();
        schedule
            .next(ts(after), tz)
            .map(|t| format_rfc3339(t, &TimeZone::UTC))
    }

    fn next_utc(spec: &str, after: &str) -> Option<String> {
        next_in(spec, &TimeZone::UTC, after)
    }

    /// New York's rules (DST from the second Sunday of March to the first of November).
    fn new_york() -> TimeZone {
        TimeZone::posix("EST5EDT,M3.2.0,M11.1.0").unwrap()
    }

    #[test]
    fn next_follows_the_fields() {
        let cases = [
            (
                "*/5 * * * *",
                "2024-05-01T12:03:20Z",
                "2024-05-01T12:05:00Z",
            ),
            // Exactly on an activation: the next one.
            (
                "*/5 * * * *",
                "2024-05-01T12:05:00Z",
                "2024-05-01T12:10:00Z",
            ),
            (
                "*/5 * * * *",
                "2024-05-01T12:04:59.5Z",
                "2024-05-01T12:05:00Z",
            ),
            ("0 * * * *", "2024-05-01T23:59:00Z", "2024-05-02T00:00:00Z"),
            (
                "30 6-16/4 * * 1-5",
                "2024-05-03T15:00:00Z",
                "2024-05-06T06:30:00Z",
            ),
            (
                "0 0 1 jan-jun mon",
                "2024-07-02T00:00:00Z",
                "2025-01-01T00:00:00Z",
            ),
            (
                "5/15 * * * *",
                "2024-05-01T12:50:00Z",
                "2024-05-01T13:05:00Z",
            ),
            ("0 0 29 2 *", "2025-01-01T00:00:00Z", "2028-02-29T00:00:00Z"),
            (
                "59 23 31 12 *",
                "2024-12-31T23:59:00Z",
                "2025-12-31T23:59:00Z",
            ),
            ("@hourly", "2024-05-01T12:00:00Z", "2024-05-01T13:00:00Z"),
            ("@daily", "2024-05-01T12:00:00Z", "2024-05-02T00:00:00Z"),
            // 2024-05-01 is a Wednesday.
            ("@weekly", "2024-05-01T12:00:00Z", "2024-05-05T00:00:00Z"),
            ("@monthly", "2024-05-01T12:00:00Z", "2024-06-01T00:00:00Z"),
            ("@yearly", "2024-05-01T12:00:00Z", "2025-01-01T00:00:00Z"),
            (
                "15,45 8-17 ? * MON-FRI",
                "2024-05-04T09:00:00Z",
                "2024-05-06T08:15:00Z",
            ),
        ];
        for (spec, after, want) in cases {
            assert_eq!(
                next_utc(spec, after).as_deref(),
                Some(want),
                "{spec} after {after}"
            );
        }
    }

    #[test]
    fn day_of_month_or_day_of_week_when_both_are_restricted() {
        // Both restricted: the 15th or any Monday, whichever comes first.
        assert_eq!(
            next_utc("0 0 15 * mon", "2024-05-01T00:00:00Z").as_deref(),
            Some("2024-05-06T00:00:00Z")
        );
        assert_eq!(
            next_utc("0 0 15 * mon", "2024-05-13T00:00:00Z").as_deref(),
            Some("2024-05-15T00:00:00Z")
        );
        // A star on one of them: both must match (Mondays, then Mondays the 15th).
        assert_eq!(
            next_utc("0 0 * * mon", "2024-05-07T00:00:00Z").as_deref(),
            Some("2024-05-13T00:00:00Z")
        );
        assert_eq!(
            next_utc("0 0 15 * *", "2024-05-01T00:00:00Z").as_deref(),
            Some("2024-05-15T00:00:00Z")
        );
        // `*/2` is no star (a step above 1): the OR rule again.
        assert_eq!(
            next_utc("0 0 */10 * sun", "2024-05-01T00:00:00Z").as_deref(),
            Some("2024-05-05T00:00:00Z")
        );
        // `*/1` still is one.
        assert_eq!(
            next_utc("0 0 */1 * sun", "2024-05-01T00:00:00Z").as_deref(),
            Some("2024-05-05T00:00:00Z")
        );
        assert_eq!(
            next_utc("0 0 */1 * sun", "2024-05-05T00:00:00Z").as_deref(),
            Some("2024-05-12T00:00:00Z")
        );
    }

    #[test]
    fn never_matching_schedules_have_no_next_time() {
        for spec in [
            "0 0 30 2 *",
            "59 23 31 2 *",
            "0 0 31 4,6,9,11 *",
            ", * * * *",
        ] {
            assert_eq!(next_utc(spec, "2024-05-01T00:00:00Z"), None, "{spec}");
        }
    }

    #[test]
    fn every_is_a_constant_delay_in_whole_seconds() {
        assert_eq!(
            next_utc("@every 1h30m", "2024-05-01T10:00:00.5Z").as_deref(),
            Some("2024-05-01T11:30:00Z")
        );
        assert_eq!(
            next_utc("@every 90s", "2024-05-01T10:00:00Z").as_deref(),
            Some("2024-05-01T10:01:30Z")
        );
        // Below a second: a second; fractions of a second are dropped.
        assert_eq!(
            next_utc("@every 300ms", "2024-05-01T10:00:00Z").as_deref(),
            Some("2024-05-01T10:00:01Z")
        );
        assert_eq!(
            next_utc("@every 1.5s", "2024-05-01T10:00:00Z").as_deref(),
            Some("2024-05-01T10:00:01Z")
        );
        // The zone does not matter.
        assert_eq!(
            next_in("@every 1h", &new_york(), "2024-03-10T06:30:00Z").as_deref(),
            Some("2024-03-10T07:30:00Z")
        );
        assert_eq!(
            parse_standard("@every 9999999999h"),
            Err(concat!(
                "failed to parse duration @every 9999999999h: ",
                r#"time: invalid duration "9999999999h""#
            )
            .to_owned())
        );
    }

    #[test]
    fn fields_are_read_in_the_time_zone() {
        let tokyo = TimeZone::fixed(k8s_openapi::jiff::tz::offset(9));
        // 09:00 in Tokyo is 00:00 UTC.
        assert_eq!(
            next_in("0 9 * * *", &tokyo, "2024-05-01T01:00:00Z").as_deref(),
            Some("2024-05-02T00:00:00Z")
        );
        // Monday in Tokyo starts on Sunday 15:00 UTC.
        assert_eq!(
            next_in("0 0 * * mon", &tokyo, "2024-05-01T00:00:00Z").as_deref(),
            Some("2024-05-05T15:00:00Z")
        );
        assert_eq!(
            next_in("0 0 * * *", &new_york(), "2024-07-01T12:00:00Z").as_deref(),
            Some("2024-07-02T04:00:00Z")
        );
        assert_eq!(
            next_in("0 0 * * *", &new_york(), "2024-12-01T12:00:00Z").as_deref(),
            Some("2024-12-02T05:00:00Z")
        );
    }

    #[test]
    fn spring_forward_skips_the_missing_wall_time() {
        let ny = new_york();
        // 2024-03-10 02:00 EST jumps to 03:00 EDT: 02:30 does not exist that day.
        assert_eq!(
            next_in("30 2 * * *", &ny, "2024-03-09T08:00:00Z").as_deref(),
            Some("2024-03-11T06:30:00Z")
        );
        // Hourly: 01:00 EST, then 03:00 EDT.
        assert_eq!(
            next_in("0 * * * *", &ny, "2024-03-10T06:00:00Z").as_deref(),
            Some("2024-03-10T07:00:00Z")
        );
        assert_eq!(
            format_rfc3339(ts("2024-03-10T07:00:00Z"), &ny),
            "2024-03-10T03:00:00-04:00"
        );
        // 03:30 exists: a schedule at 03:30 runs that day.
        assert_eq!(
            next_in("30 3 * * *", &ny, "2024-03-10T05:00:00Z").as_deref(),
            Some("2024-03-10T07:30:00Z")
        );
        // The same in a zone east of UTC (Berlin: 02:00 CET to 03:00 CEST on 31 March).
        let berlin = TimeZone::posix("CET-1CEST,M3.5.0,M10.5.0/3").unwrap();
        assert_eq!(
            next_in("30 2 * * *", &berlin, "2024-03-30T12:00:00Z").as_deref(),
            Some("2024-04-01T00:30:00Z")
        );
    }

    #[test]
    fn fall_back_runs_the_repeated_wall_time_twice() {
        let ny = new_york();
        // 2024-11-03 02:00 EDT goes back to 01:00 EST: 01:30 happens twice.
        let first = next_in("30 1 * * *", &ny, "2024-11-03T04:00:00Z");
        assert_eq!(first.as_deref(), Some("2024-11-03T05:30:00Z"));
        let second = next_in("30 1 * * *", &ny, "2024-11-03T05:30:00Z");
        assert_eq!(second.as_deref(), Some("2024-11-03T06:30:00Z"));
        let third = next_in("30 1 * * *", &ny, "2024-11-03T06:30:00Z");
        assert_eq!(third.as_deref(), Some("2024-11-04T06:30:00Z"));
        // A daily schedule outside the repeated hour runs once.
        assert_eq!(
            next_in("0 3 * * *", &ny, "2024-11-03T04:00:00Z").as_deref(),
            Some("2024-11-03T08:00:00Z")
        );
    }

    #[test]
    fn a_day_starting_after_midnight_is_entered_at_its_first_hour() {
        // Chile's old rule: clocks go from 24:00 on a Saturday to 01:00 on Sunday, so
        // Sunday 2024-09-08 has no midnight.
        let santiago = TimeZone::posix("<-04>4<-03>,M9.1.6/24,M4.1.6/24").unwrap();
        assert_eq!(
            next_in("0 12 * * sun", &santiago, "2024-09-06T12:00:00Z").as_deref(),
            Some("2024-09-08T15:00:00Z")
        );
        assert_eq!(
            next_in("0 * * * sun", &santiago, "2024-09-06T12:00:00Z").as_deref(),
            Some("2024-09-08T04:00:00Z")
        );
        assert_eq!(
            format_rfc3339(ts("2024-09-08T04:00:00Z"), &santiago),
            "2024-09-08T01:00:00-03:00"
        );
    }

    #[test]
    fn parse_keeps_the_time_zone_prefix() {
        let s = Schedule::parse("CRON_TZ=Asia/Tokyo 0 9 * * *").unwrap();
        assert_eq!(s.time_zone(), Some("Asia/Tokyo"));
        assert_eq!(
            Schedule::parse("TZ=UTC @daily").unwrap().time_zone(),
            Some("UTC")
        );
        assert_eq!(Schedule::parse("0 9 * * *").unwrap().time_zone(), None);
        assert_eq!(
            parse_standard("TZ=UTC"),
            Err("expected exactly 5 fields, found 0: []".to_owned())
        );
    }

    #[test]
    fn rfc3339_as_go_prints_it() {
        let t = ts("2024-05-01T00:00:00Z");
        assert_eq!(format_rfc3339(t, &TimeZone::UTC), "2024-05-01T00:00:00Z");
        let kolkata = TimeZone::fixed(k8s_openapi::jiff::tz::Offset::from_seconds(19_800).unwrap());
        assert_eq!(format_rfc3339(t, &kolkata), "2024-05-01T05:30:00+05:30");
        assert_eq!(format_rfc3339(t, &new_york()), "2024-04-30T20:00:00-04:00");
    }

    #[test]
    fn civil_dates_round_trip() {
        for days in [-719_468, -1, 0, 59, 365, 11_016, 19_782, 2_932_896] {
            let (y, m, d) = civil_from_days(days);
            assert_eq!(days_from_civil(y, m, d), days, "{y}-{m}-{d}");
        }
        assert_eq!(civil_from_days(19_782), (2024, 2, 29));
        assert_eq!(local(&TimeZone::UTC, 0).weekday, 4);
    }

    #[test]
    fn finds_the_schedule_time_zone() {
        assert_eq!(schedule_time_zone("CRON_TZ=UTC 0 * * * *"), Some("UTC"));
        assert_eq!(schedule_time_zone("0 * * * *"), None);
    }
}
