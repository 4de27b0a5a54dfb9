//! Durations on the command line as Go's `time.ParseDuration` reads them (what client-go's
//! and controller-runtime's flags take): `15s`, `1m30s`, `500ms`, `1.5h`.

use std::time::Duration;

/// A flag value that is not a duration.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "invalid duration {input:?}: {reason} (a number and a unit: ns, us, ms, s, m, h; e.g. 15s, 1m30s, 500ms)"
)]
pub struct ParseDurationError {
    input: String,
    reason: &'static str,
}

impl ParseDurationError {
    /// What is wrong with the value.
    pub fn reason(&self) -> &'static str {
        self.reason
    }
}

const NANOS_PER_SEC: u128 = 1_000_000_000;

/// Parses a duration as Go's `time.ParseDuration` does, without a sign: one or more numbers
/// (decimals allowed), each followed by its unit (`ns`, `us` or `µs`, `ms`, `s`, `m`, `h`).
/// `0` needs no unit; any other number does. Fractions finer than a nanosecond are cut.
///
/// ```
/// use std::time::Duration;
/// use kinformer_runtime::parse_duration;
///
/// assert_eq!(parse_duration("15s")?, Duration::from_secs(15));
/// assert_eq!(parse_duration("1m30s")?, Duration::from_secs(90));
/// assert_eq!(parse_duration("1.5s")?, Duration::from_millis(1500));
/// assert!(parse_duration("15").is_err()); // no unit
/// # Ok::<(), kinformer_runtime::ParseDurationError>(())
/// ```
///
/// # Errors
/// [`ParseDurationError`] for an empty value, a number without a unit, an unknown unit, a
/// sign, or a duration that does not fit a [`Duration`].
pub fn parse_duration(input: &str) -> Result<Duration, ParseDurationError> {
    let err = |reason| ParseDurationError {
        input: input.to_owned(),
        reason,
    };
    let s = input.trim();
    if s.is_empty() {
        return Err(err("empty"));
    }
    if s == "0" {
        return Ok(Duration::ZERO);
    }
    let number_char = |c: char| c.is_ascii_digit() || c == '.';
    let mut rest = s;
    let mut total: u128 = 0;
    while !rest.is_empty() {
        let (number, after) = rest.split_at(rest.find(|c| !number_char(c)).unwrap_or(rest.len()));
        if number.is_empty() {
            return Err(err("expected a number (without a sign)"));
        }
        let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
        if (whole.is_empty() && fraction.is_empty()) || fraction.contains('.') {
            return Err(err("invalid number"));
        }
        let (unit, next) = after.split_at(after.find(number_char).unwrap_or(after.len()));
        let unit_nanos: u128 = match unit {
            "ns" => 1,
            "us" | "µs" | "μs" => 1_000,
            "ms" => 1_000_000,
            "s" => NANOS_PER_SEC,
            "m" => 60 * NANOS_PER_SEC,
            "h" => 3_600 * NANOS_PER_SEC,
            "" => return Err(err("missing unit")),
            _ => return Err(err("unknown unit")),
        };
        let too_long = || err("too long");
        let whole: u128 = if whole.is_empty() {
            0
        } else {
            whole.parse().map_err(|_| too_long())?
        };
        // Digits past the 20th are below a nanosecond of any unit: cut, as Go does.
        let fraction = &fraction[..fraction.len().min(20)];
        let fraction_nanos = if fraction.is_empty() {
            0
        } else {
            let digits: u128 = fraction.parse().map_err(|_| err("invalid number"))?;
            let scale = 10u128.pow(u32::try_from(fraction.len()).map_err(|_| too_long())?);
            digits * unit_nanos / scale
        };
        total = whole
            .checked_mul(unit_nanos)
            .and_then(|n| n.checked_add(fraction_nanos))
            .and_then(|n| n.checked_add(total))
            .ok_or_else(too_long)?;
        rest = next;
    }
    let secs = u64::try_from(total / NANOS_PER_SEC).map_err(|_| err("too long"))?;
    let nanos = u32::try_from(total % NANOS_PER_SEC).map_err(|_| err("too long"))?;
    Ok(Duration::new(secs, nanos))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_what_go_parses() {
        let ms = Duration::from_millis;
        for (input, want) in [
            ("0", Duration::ZERO),
            ("0s", Duration::ZERO),
            ("15s", ms(15_000)),
            ("10s", ms(10_000)),
            ("2s", ms(2_000)),
            ("1m", ms(60_000)),
            ("1h", ms(3_600_000)),
            ("1m30s", ms(90_000)),
            ("1h2m3s4ms", ms(3_723_004)),
            ("500ms", ms(500)),
            ("1.5s", ms(1_500)),
            (".5s", ms(500)),
            ("1.s", ms(1_000)),
            ("2.5m", ms(150_000)),
            ("250us", Duration::from_micros(250)),
            ("250µs", Duration::from_micros(250)),
            ("7ns", Duration::from_nanos(7)),
            ("1.0000000001s", ms(1_000)),
            (" 15s ", ms(15_000)),
        ] {
            assert_eq!(parse_duration(input), Ok(want), "{input:?}");
        }
    }

    #[test]
    fn rejects_what_is_no_duration() {
        for (input, reason) in [
            ("", "empty"),
            ("  ", "empty"),
            ("15", "missing unit"),
            ("1m30", "missing unit"),
            ("15x", "unknown unit"),
            ("15 s", "unknown unit"),
            ("15S", "unknown unit"),
            ("s", "expected a number (without a sign)"),
            ("-5s", "expected a number (without a sign)"),
            ("+5s", "expected a number (without a sign)"),
            (".s", "invalid number"),
            ("1.2.3s", "invalid number"),
            ("99999999999999999999999999999999999999999h", "too long"),
            ("9999999999999999999h", "too long"),
        ] {
            let e = parse_duration(input).expect_err(input);
            assert_eq!(e.reason(), reason, "{input:?}");
            assert!(e.to_string().contains(&format!("{input:?}")), "{e}");
        }
    }
}
