//! meta/v1 `Time` and `MicroTime`: `{1: seconds, 2: nanos}` since the Unix epoch, in JSON
//! RFC 3339 in UTC with second (`Time`) or microsecond (`MicroTime`) precision
//! (upstream `k8s.io/apimachinery/pkg/apis/meta/v1/time.go`, `micro_time.go`).

use chrono::{DateTime, SecondsFormat};

use super::Error;

/// The JSON form of a timestamp; `micro` keeps six fractional digits, else the fraction
/// is dropped (upstream's `Time.Unmarshal` ignores nanos). Errors: a time out of range.
pub fn format(seconds: i64, nanos: i32, micro: bool) -> Result<String, Error> {
    let nanos = if micro {
        u32::try_from(nanos).unwrap_or(0) / 1000 * 1000
    } else {
        0
    };
    let time = DateTime::from_timestamp(seconds, nanos)
        .ok_or_else(|| Error::new(format!("timestamp out of range: {seconds}s")))?;
    let precision = if micro {
        SecondsFormat::Micros
    } else {
        SecondsFormat::Secs
    };
    Ok(time.to_rfc3339_opts(precision, true))
}

/// Seconds and nanos of an RFC 3339 timestamp. Errors: not RFC 3339.
pub fn parse(text: &str) -> Result<(i64, i32), Error> {
    let time = DateTime::parse_from_rfc3339(text)
        .map_err(|e| Error::new(format!("parsing time {text:?}: {e}")))?;
    Ok((time.timestamp(), time.timestamp_subsec_nanos() as i32))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_have_second_precision_micro_times_six_digits() {
        assert_eq!(
            format(1_700_000_000, 123_456_789, false).unwrap(),
            "2023-11-14T22:13:20Z"
        );
        assert_eq!(
            format(1_700_000_000, 123_456_789, true).unwrap(),
            "2023-11-14T22:13:20.123456Z"
        );
        assert_eq!(
            format(1_700_000_000, 0, true).unwrap(),
            "2023-11-14T22:13:20.000000Z"
        );
        assert_eq!(
            parse("2023-11-14T23:13:20.5+01:00").unwrap(),
            (1_700_000_000, 500_000_000)
        );
        assert!(parse("yesterday").is_err());
        assert!(format(i64::MAX, 0, false).is_err());
    }
}
