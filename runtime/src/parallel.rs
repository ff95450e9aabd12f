//! Jobs run on a few threads, their results handled on the caller's.
//!
//! Episodes against a remote endpoint and instruction rewrites spend their
//! time waiting on the network, so several run at once; what they produce
//! is written on the calling thread, where the writer lives. When jobs
//! fail, the error returned is the failing job's with the lowest index,
//! not whichever failed first in time: every job before it had already
//! been taken (jobs are taken in order) and is let finish, so which error
//! a run stops on does not depend on thread timing.

use anyhow::Result;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc;

/// Runs `run` on every job, `threads` at a time (at least one), handing
/// each result to `finished` on this thread as it comes, in the order the
/// jobs end (in order on one thread). Once a job or `finished` fails no
/// further job is started; those already started finish and are handed on
/// too (finished work is not thrown away) unless `finished` itself failed,
/// and the error of the lowest-indexed job that failed is returned.
pub fn in_parallel<J: Copy + Send + Sync, R: Send>(
    jobs: &[J],
    threads: usize,
    run: impl Fn(J) -> Result<R> + Sync,
    mut finished: impl FnMut(R) -> Result<()>,
) -> Result<()> {
    let next = AtomicUsize::new(0);
    let failed = AtomicBool::new(false);
    std::thread::scope(|scope| {
        let (sender, results) = mpsc::channel();
        for _ in 0..threads.clamp(1, jobs.len().max(1)) {
            let sender = sender.clone();
            let (next, failed, run) = (&next, &failed, &run);
            scope.spawn(move || {
                while !failed.load(Ordering::Relaxed) {
                    let index = next.fetch_add(1, Ordering::Relaxed);
                    let Some(&job) = jobs.get(index) else {
                        break;
                    };
                    let result = run(job);
                    failed.fetch_or(result.is_err(), Ordering::Relaxed);
                    if sender.send((index, result)).is_err() {
                        break;
                    }
                }
            });
        }
        drop(sender);
        let mut first_failure: Option<(usize, anyhow::Error)> = None;
        // Once `finished` has failed it is handed nothing more: a writer
        // that failed mid-line would go on after a torn one.
        let mut sink_failed = false;
        for (index, result) in results {
            let handed = match result {
                Ok(value) if !sink_failed => {
                    let handed = finished(value);
                    sink_failed = handed.is_err();
                    handed
                }
                Ok(_) => Ok(()),
                Err(err) => Err(err),
            };
            if let Err(err) = handed {
                failed.store(true, Ordering::Relaxed);
                keep_lowest(&mut first_failure, index, err);
            }
        }
        first_failure.map_or(Ok(()), |(_, err)| Err(err))
    })
}

fn keep_lowest(first: &mut Option<(usize, anyhow::Error)>, index: usize, err: anyhow::Error) {
    if first.as_ref().is_none_or(|&(lowest, _)| index < lowest) {
        *first = Some((index, err));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use anyhow::bail;
    use std::sync::Mutex;

    #[test]
    fn every_result_reaches_the_caller_in_order_on_one_thread() {
        let jobs: Vec<u32> = (0..20).collect();
        for threads in [1, 3, 64] {
            let mut seen = Vec::new();
            in_parallel(
                &jobs,
                threads,
                |job| Ok(job * 2),
                |doubled| {
                    seen.push(doubled);
                    Ok(())
                },
            )
            .unwrap();
            if threads == 1 {
                assert_eq!(seen, (0..20).map(|job| job * 2).collect::<Vec<_>>());
            }
            seen.sort();
            assert_eq!(seen, (0..20).map(|job| job * 2).collect::<Vec<_>>());
        }
        in_parallel(&[] as &[u32], 0, |_| Ok(()), |()| bail!("no job ran")).unwrap();
    }

    #[test]
    fn the_lowest_failing_job_is_the_error_whichever_fails_first() {
        let jobs: Vec<u32> = (0..8).collect();
        // Job 5 fails at once; job 2 fails only after it, once job 5 has
        // been reported: the error is still job 2's.
        let five_failed = Mutex::new(false);
        let err = in_parallel(
            &jobs,
            8,
            |job| match job {
                5 => {
                    *five_failed.lock().unwrap() = true;
                    bail!("job 5")
                }
                2 => {
                    while !*five_failed.lock().unwrap() {
                        std::thread::yield_now();
                    }
                    // Long after job 5's error has reached the caller.
                    std::thread::sleep(std::time::Duration::from_millis(200));
                    bail!("job 2")
                }
                _ => Ok(job),
            },
            |_| Ok(()),
        )
        .unwrap_err();
        assert_eq!(err.to_string(), "job 2");
        let mut first = None;
        keep_lowest(&mut first, 5, anyhow::anyhow!("5"));
        keep_lowest(&mut first, 2, anyhow::anyhow!("2"));
        keep_lowest(&mut first, 3, anyhow::anyhow!("3"));
        assert_eq!(first.map(|(index, _)| index), Some(2));
    }

    #[test]
    fn no_job_starts_after_a_failure_and_jobs_already_out_are_kept() {
        let jobs: Vec<u32> = (0..1000).collect();
        let started = AtomicUsize::new(0);
        let mut kept = Vec::new();
        let err = in_parallel(
            &jobs,
            4,
            |job| {
                started.fetch_add(1, Ordering::Relaxed);
                match job {
                    3 => bail!("job 3"),
                    // Slow enough that the failure is seen long before
                    // the other threads could run out of jobs.
                    4.. => std::thread::sleep(std::time::Duration::from_millis(1)),
                    _ => {}
                }
                Ok(job)
            },
            |job| {
                kept.push(job);
                Ok(())
            },
        )
        .unwrap_err();
        assert_eq!(err.to_string(), "job 3");
        // Every job started but the failed one was handed on; no thread
        // took a job once it had seen the failure.
        let started = started.load(Ordering::Relaxed);
        assert_eq!(kept.len(), started - 1);
        assert!(started < jobs.len(), "{started} jobs started");
    }

    #[test]
    fn the_sink_failing_fails_the_run_and_is_handed_nothing_more() {
        let jobs: Vec<u32> = (0..10).collect();
        let mut handed = Vec::new();
        let err = in_parallel(&jobs, 1, Ok, |job| {
            handed.push(job);
            match job {
                3 => bail!("could not write job 3"),
                _ => Ok(()),
            }
        })
        .unwrap_err();
        assert_eq!(err.to_string(), "could not write job 3");
        assert_eq!(handed, [0, 1, 2, 3]);
    }
}
