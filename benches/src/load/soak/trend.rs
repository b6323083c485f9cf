//! The soak's verdict: a series trends upward when the slope of its second half (after the
//! warm-up: the agents' first lists, the allocator's pools filling, the multiplexer's window
//! of changes filling), extrapolated over the whole run, exceeds its margin. The slope is
//! Tukey's resistant line — from the medians of the half's first and last thirds — so one
//! sample (an allocator trimming its arenas, a burst of requests) cannot tilt it; a leak,
//! which keeps growing, does.

/// The gateway's bounded buffers fill over its first minutes — the multiplexer keeps the
/// last 3 minutes of changes, so its memory grows for 3 minutes under churn and then holds —
/// so a series is judged from this many seconds on at the earliest, even in a short run.
pub const SETTLED_AFTER: f64 = 210.0;

/// How much a series may grow over the run: the largest of a fixed amount, an amount per
/// hour of run, and a fraction of the second half's median. The hourly rate is the promise
/// of a long run; the others are the noise floor of a short one (a few allocator arenas
/// coming and going over 2.5 minutes are not a leak).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Margin {
    /// A fixed amount, in the series' unit.
    pub absolute: f64,
    /// An amount per hour of run.
    pub per_hour: f64,
    /// A fraction of the second half's median.
    pub fraction: f64,
}

impl Margin {
    /// A fixed amount.
    pub fn absolute(amount: f64) -> Self {
        Self {
            absolute: amount,
            ..Self::default()
        }
    }
}

/// One series of samples, with the margin it is held to.
#[derive(Clone, Debug)]
pub struct Series {
    /// Its name in the report and the plot.
    pub name: &'static str,
    /// Its unit.
    pub unit: &'static str,
    /// The margin.
    pub margin: Margin,
    /// (seconds since the start, value), in order.
    pub points: Vec<(f64, f64)>,
}

/// A series judged.
#[derive(Clone, Debug)]
pub struct Trend {
    /// The first, last and largest value.
    pub start: f64,
    /// The last value.
    pub end: f64,
    /// The largest value.
    pub max: f64,
    /// The second half's resistant slope, per hour.
    pub slope_per_hour: f64,
    /// The slope times the run's length: the growth the trend predicts over the run.
    pub growth: f64,
    /// The growth allowed.
    pub allowed: f64,
    /// The second half's fitted line: (start, value) and (end, value).
    pub fit: ((f64, f64), (f64, f64)),
}

impl Trend {
    /// Whether the predicted growth stays within the margin.
    pub fn holds(&self) -> bool {
        self.growth <= self.allowed
    }
}

/// Judges `series` over a run of `run_seconds`, from its second half or [`SETTLED_AFTER`],
/// whichever is later; `None` with fewer than three points there.
pub fn judge(series: &Series, run_seconds: f64) -> Option<Trend> {
    let first = series.points.first()?;
    let half = first.0 + (run_seconds / 2.0).max(SETTLED_AFTER);
    let tail: Vec<(f64, f64)> = series
        .points
        .iter()
        .copied()
        .filter(|(t, _)| *t >= half)
        .collect();
    if tail.len() < 3 {
        return None;
    }
    let (slope, intercept) = resistant_line(&tail);
    let median = median(tail.iter().map(|(_, v)| *v));
    let margin = series.margin;
    let allowed = margin
        .absolute
        .max(margin.per_hour * run_seconds / 3600.0)
        .max(margin.fraction * median);
    let (t0, t1) = (tail[0].0, tail[tail.len() - 1].0);
    Some(Trend {
        start: first.1,
        end: series.points.last()?.1,
        max: series
            .points
            .iter()
            .map(|(_, v)| *v)
            .fold(f64::MIN, f64::max),
        slope_per_hour: slope * 3600.0,
        growth: slope * run_seconds,
        allowed,
        fit: ((t0, intercept + slope * t0), (t1, intercept + slope * t1)),
    })
}

/// Tukey's resistant line through `points` (in time order, at least three): the slope between
/// the (median time, median value) of the first and of the last third, and the intercept that
/// puts the line through the median residual of all. (slope, intercept).
fn resistant_line(points: &[(f64, f64)]) -> (f64, f64) {
    let third = points.len().div_ceil(3);
    let centre = |part: &[(f64, f64)]| {
        (
            median(part.iter().map(|(t, _)| *t)),
            median(part.iter().map(|(_, v)| *v)),
        )
    };
    let (t0, v0) = centre(&points[..third]);
    let (t1, v1) = centre(&points[points.len() - third..]);
    let slope = if t1 > t0 { (v1 - v0) / (t1 - t0) } else { 0.0 };
    let intercept = median(points.iter().map(|(t, v)| v - slope * t));
    (slope, intercept)
}

/// The median of `values` (the mean of the middle two of an even count); 0 of none.
fn median(values: impl Iterator<Item = f64>) -> f64 {
    let mut values: Vec<f64> = values.collect();
    values.sort_by(f64::total_cmp);
    let n = values.len();
    match n {
        0 => 0.0,
        _ if n % 2 == 1 => values[n / 2],
        _ => (values[n / 2 - 1] + values[n / 2]) / 2.0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn series(margin: Margin, f: impl Fn(f64) -> f64) -> Series {
        Series {
            name: "x",
            unit: "",
            margin,
            points: (0..=30)
                .map(|i| (f64::from(i) * 10.0, f(f64::from(i) * 10.0)))
                .collect(),
        }
    }

    #[test]
    fn a_steady_series_after_its_warm_up_holds() {
        // Grows fast for the first minute, then flat with noise.
        let s = series(Margin::absolute(2.0), |t| {
            t.min(60.0) + if (t as i64 / 10) % 2 == 0 { 0.5 } else { -0.5 }
        });
        let trend = judge(&s, 300.0).unwrap();
        assert!(trend.holds(), "{trend:?}");
        assert_eq!(trend.start, 0.5);
        assert!(trend.max >= 60.0);
    }

    #[test]
    fn a_buffer_filling_for_its_first_minutes_is_no_trend() {
        // Grows for 200 s (a 3-minute window of changes filling), then holds: judged from
        // the run's half it would trend, from SETTLED_AFTER it does not.
        let s = series(Margin::absolute(2.0), |t| t.min(200.0) / 10.0);
        let trend = judge(&s, 300.0).unwrap();
        assert!(trend.holds(), "{trend:?}");
        assert_eq!(trend.fit.0.0, SETTLED_AFTER);
    }

    #[test]
    fn a_slow_leak_in_the_second_half_fails() {
        // 1 unit a minute: 5 over the run, more than the 2 allowed.
        let s = series(Margin::absolute(2.0), |t| 100.0 + t / 60.0);
        let trend = judge(&s, 300.0).unwrap();
        assert!((trend.growth - 5.0).abs() < 1e-9);
        assert!((trend.slope_per_hour - 60.0).abs() < 1e-9);
        assert!(!trend.holds());
    }

    #[test]
    fn one_dip_or_one_spike_in_the_second_half_is_no_trend() {
        // Flat at 34 with a little noise; the allocator trims its arenas once just after the
        // warm-up (a dip), and a burst lifts one sample near the end (a spike). A
        // least-squares line through them rises by more than the margin; a leak it is not.
        let s = series(Margin::absolute(1.5), |t| {
            let noise = if (t as i64 / 10) % 2 == 0 { 0.1 } else { -0.1 };
            let blip = match t as i64 {
                210 => -2.0,
                280 => 1.5,
                _ => 0.0,
            };
            34.0 + noise + blip
        });
        let trend = judge(&s, 300.0).unwrap();
        let (ls, _) = {
            let tail: Vec<_> = s
                .points
                .iter()
                .copied()
                .filter(|(t, _)| *t >= SETTLED_AFTER)
                .collect();
            least_squares_for_comparison(&tail)
        };
        assert!(
            ls * 300.0 > 1.5,
            "the least-squares line would call it a leak: {ls}"
        );
        assert!(trend.holds(), "{trend:?}");
    }

    /// The ordinary least-squares slope, to show what the resistant line is robust to.
    fn least_squares_for_comparison(points: &[(f64, f64)]) -> (f64, f64) {
        let n = points.len() as f64;
        let mean_t = points.iter().map(|(t, _)| t).sum::<f64>() / n;
        let mean_v = points.iter().map(|(_, v)| v).sum::<f64>() / n;
        let cov: f64 = points
            .iter()
            .map(|(t, v)| (t - mean_t) * (v - mean_v))
            .sum();
        let var: f64 = points.iter().map(|(t, _)| (t - mean_t).powi(2)).sum();
        (cov / var, mean_v - cov / var * mean_t)
    }

    #[test]
    fn the_margin_is_the_hourly_rate_or_the_fraction_of_the_median() {
        let margin = Margin {
            absolute: 1.0,
            per_hour: 10.0,
            fraction: 0.05,
        };
        let flat = series(margin, |_| 100.0);
        // 5 minutes: 10/h is 0.83, 5 % of 100 is 5.
        assert!((judge(&flat, 300.0).unwrap().allowed - 5.0).abs() < 1e-9);
        // An hour (samples every 2 minutes): 10.
        let mut hour = flat.clone();
        hour.points = (0..=30).map(|i| (f64::from(i) * 120.0, 100.0)).collect();
        assert!((judge(&hour, 3600.0).unwrap().allowed - 10.0).abs() < 1e-9);
    }

    #[test]
    fn too_few_points_are_no_verdict() {
        let mut s = series(Margin::absolute(1.0), |t| t);
        s.points.truncate(2);
        assert!(judge(&s, 300.0).is_none());
    }
}
