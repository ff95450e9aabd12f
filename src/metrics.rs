//! Success statistics over repeated trials, as the benchmark suites define
//! them, and the intervals and tests that say how far to trust them.

/// τ-bench's pass^k estimator: the mean over tasks of C(c, k) / C(n, k), for
/// c successes in n trials — the chance that k trials drawn without
/// replacement all succeed. Tasks with fewer than k trials have no pass^k
/// and are left out of the mean.
pub fn pass_hat_k(successes: &[(u64, u64)], k: u64) -> f64 {
    let per_task: Vec<f64> = successes
        .iter()
        .filter(|&&(_, n)| n >= k)
        .map(|&(c, n)| choose_ratio(c, n, k))
        .collect();
    per_task.iter().sum::<f64>() / per_task.len().max(1) as f64
}

/// The k whose pass^k a terminal shows for `trials` trials: each up to
/// ten, then the powers of two and `trials` itself, where a line or table
/// of thousands would bury the curve's shape.
pub fn shown_ks(trials: u64) -> Vec<u64> {
    if trials <= 10 {
        return (1..=trials).collect();
    }
    let mut ks: Vec<u64> = std::iter::successors(Some(1u64), |k| k.checked_mul(2))
        .take_while(|&k| k < trials)
        .collect();
    ks.push(trials);
    ks
}

/// C(c, k) / C(n, k) for c ≤ n, as the product of (c − i) / (n − i): each
/// binomial alone overflows an f64 past about a thousand trials.
fn choose_ratio(c: u64, n: u64, k: u64) -> f64 {
    if k > c {
        return 0.0;
    }
    (0..k).fold(1.0, |acc, i| acc * (c - i) as f64 / (n - i) as f64)
}

/// The share of consecutive trial pairs whose outcomes differ.
pub fn flip_rate(trials: &[bool]) -> f64 {
    if trials.len() < 2 {
        return 0.0;
    }
    trials.windows(2).filter(|pair| pair[0] != pair[1]).count() as f64 / (trials.len() - 1) as f64
}

/// (successes, trials) per task, from each episode's task id and outcome.
pub fn successes_per_task<'a>(
    outcomes: impl IntoIterator<Item = (&'a str, bool)>,
) -> Vec<(u64, u64)> {
    let mut per_task: std::collections::BTreeMap<&str, (u64, u64)> = Default::default();
    for (task, success) in outcomes {
        let entry = per_task.entry(task).or_default();
        entry.0 += u64::from(success);
        entry.1 += 1;
    }
    per_task.into_values().collect()
}

/// The 95% percentile interval of a statistic's bootstrap `draws` (one
/// per resample, in any order), or `estimate` at both ends without any.
pub fn percentile_interval(mut draws: Vec<f64>, estimate: f64) -> (f64, f64) {
    draws.sort_by(f64::total_cmp);
    let quantile = |q: f64| {
        draws
            .get(((draws.len().max(1) - 1) as f64 * q).round() as usize)
            .copied()
            .unwrap_or(estimate)
    };
    (quantile(0.025), quantile(0.975))
}

/// The two-sided exact sign test: the chance, were `better` and `worse`
/// equally likely for each task, of a split at least as uneven as this one
/// (ties are left out before).
pub fn sign_test(better: u64, worse: u64) -> f64 {
    let n = better + worse;
    // P(X <= fewer) for X ~ Binomial(n, 1/2), summed in log space: 2^-n
    // underflows past n of about a thousand.
    let fewer = better.min(worse);
    let mut log_choose = 0.0;
    let mut tail = 0.0;
    for i in 0..=fewer {
        if i > 0 {
            log_choose += ((n - i + 1) as f64).ln() - (i as f64).ln();
        }
        tail += (log_choose - n as f64 * std::f64::consts::LN_2).exp();
    }
    (2.0 * tail).min(1.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pass_hat_k_is_taus_estimator() {
        // One task, 2 of 4 trials right: pass^1 = 2/4, pass^2 = C(2,2)/C(4,2) = 1/6.
        assert_eq!(pass_hat_k(&[(2, 4)], 1), 0.5);
        assert!((pass_hat_k(&[(2, 4)], 2) - 1.0 / 6.0).abs() < 1e-12);
        assert_eq!(pass_hat_k(&[(2, 4)], 3), 0.0);
        assert_eq!(pass_hat_k(&[(4, 4), (0, 4)], 4), 0.5);
        // A task with fewer than k trials has no pass^k.
        assert_eq!(pass_hat_k(&[(2, 2), (1, 1)], 2), 1.0);
        // Many trials stay finite (each binomial alone overflows).
        assert_eq!(pass_hat_k(&[(3000, 3000)], 1500), 1.0);
        let half = pass_hat_k(&[(2000, 4000)], 2);
        assert!((half - 1999.0 / 7998.0).abs() < 1e-12, "{half}");
    }

    #[test]
    fn a_terminal_shows_a_few_k_of_many_trials() {
        assert_eq!(shown_ks(1), [1]);
        assert_eq!(shown_ks(10), (1..=10).collect::<Vec<_>>());
        assert_eq!(shown_ks(11), [1, 2, 4, 8, 11]);
        assert_eq!(
            shown_ks(1024),
            [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024]
        );
    }

    #[test]
    fn flip_rate_counts_changes_between_consecutive_trials() {
        assert_eq!(flip_rate(&[true, true, true]), 0.0);
        assert_eq!(flip_rate(&[true, false, true]), 1.0);
        assert_eq!(flip_rate(&[true, false, false, false, true]), 0.5);
        assert_eq!(flip_rate(&[true]), 0.0);
    }

    #[test]
    fn the_sign_test_is_the_binomial_tail() {
        // Five of five tasks better: 2 × 2^-5.
        assert!((sign_test(5, 0) - 0.0625).abs() < 1e-12);
        assert_eq!(sign_test(0, 5), sign_test(5, 0));
        // Eight against two: 2 × (1 + 10 + 45) / 1024.
        assert!((sign_test(8, 2) - 112.0 / 1024.0).abs() < 1e-12);
        assert_eq!(sign_test(3, 3), 1.0);
        assert_eq!(sign_test(0, 0), 1.0);
        // No underflow with many tasks.
        let p = sign_test(1200, 800);
        assert!(p > 0.0 && p < 1e-15, "{p}");
    }

    #[test]
    fn the_interval_holds_the_middle_95_percent() {
        let draws: Vec<f64> = (0..=1000).rev().map(|i| i as f64 / 1000.0).collect();
        assert_eq!(percentile_interval(draws, 0.5), (0.025, 0.975));
        assert_eq!(percentile_interval(Vec::new(), 0.5), (0.5, 0.5));
    }

    #[test]
    fn successes_are_counted_per_task() {
        let outcomes = [("a", true), ("b", false), ("a", false), ("b", false)];
        assert_eq!(successes_per_task(outcomes), vec![(1, 2), (0, 2)]);
    }
}
