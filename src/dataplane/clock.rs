//! Wall and process CPU time of a stretch of work, for the telemetry. A phase's CPU seconds over
//! its wall seconds are the cores it kept busy on average: on a machine with more cores than
//! this one's, that says which phase stops scaling. Every thread of the process counts, the
//! encoder's input-hashing thread (which runs beside the tensors' encode) included.

use std::time::Instant;

/// A start on both clocks.
#[derive(Debug, Clone, Copy)]
pub struct Stopwatch {
    wall: Instant,
    cpu: f64,
}

/// Seconds on both clocks. `cpu` is NaN where the process CPU clock cannot be read (it then
/// stays NaN through sums, and the telemetry's JSON writes it as null).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Lap {
    pub wall: f64,
    pub cpu: f64,
}

impl Stopwatch {
    pub fn start() -> Stopwatch {
        Stopwatch { wall: Instant::now(), cpu: process_cpu_seconds() }
    }

    /// Both clocks' seconds since [`Stopwatch::start`].
    pub fn lap(&self) -> Lap {
        Lap { wall: self.wall.elapsed().as_secs_f64(), cpu: process_cpu_seconds() - self.cpu }
    }
}

impl std::ops::AddAssign for Lap {
    fn add_assign(&mut self, o: Lap) {
        self.wall += o.wall;
        self.cpu += o.cpu;
    }
}

impl std::ops::Sub for Lap {
    type Output = Lap;
    fn sub(self, o: Lap) -> Lap {
        Lap { wall: self.wall - o.wall, cpu: self.cpu - o.cpu }
    }
}

/// The CPU time (user and system) all of this process's threads have used, in seconds; NaN
/// where the clock cannot be read.
pub fn process_cpu_seconds() -> f64 {
    #[cfg(unix)]
    return clock_seconds(libc::CLOCK_PROCESS_CPUTIME_ID);
    #[cfg(not(unix))]
    return f64::NAN;
}

/// One of the system's clocks, in seconds; NaN where it cannot be read.
#[cfg(unix)]
fn clock_seconds(clock: libc::clockid_t) -> f64 {
    let mut t = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime writes one timespec through the pointer it is given, which points
    // at one
    if unsafe { libc::clock_gettime(clock, &mut t) } == 0 {
        t.tv_sec as f64 + t.tv_nsec as f64 * 1e-9
    } else {
        f64::NAN
    }
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;
    use rayon::prelude::*;

    /// The CPU time of the calling thread alone.
    fn thread_cpu_seconds() -> f64 {
        let s = clock_seconds(libc::CLOCK_THREAD_CPUTIME_ID);
        assert!(s.is_finite(), "no thread CPU clock");
        s
    }

    /// The process clock counts every thread's work: over a stretch in which rayon's threads
    /// spin, it advances by at least what those threads' own clocks did (other tests may run
    /// beside it in this process, so only a lower bound holds), and by no more than every
    /// core of the machine could give in that wall time. A wall clock, or one thread's clock,
    /// would miss the lower bound on two cores or more.
    #[test]
    fn the_process_clock_counts_every_thread() {
        let threads = rayon::current_num_threads();
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let sw = Stopwatch::start();
        let own: f64 = (0..threads)
            .into_par_iter()
            .map(|i| {
                let (t, c0) = (Instant::now(), thread_cpu_seconds());
                let mut x = i as f64;
                while t.elapsed().as_secs_f64() < 0.3 {
                    for _ in 0..10_000 {
                        x = (x * 1.000_001).sin() + 1.0;
                    }
                }
                std::hint::black_box(x);
                thread_cpu_seconds() - c0
            })
            .sum();
        let lap = sw.lap();
        assert!(own > 0.1, "the spinning threads used {own} CPU seconds");
        assert!(lap.cpu >= own * 0.999, "{lap:?}: less than the threads' own {own}");
        assert!(lap.cpu <= lap.wall * cores as f64 * 1.05 + 0.05, "{lap:?} on {cores} cores");
    }

    #[test]
    fn laps_add_and_subtract_on_both_clocks() {
        let mut a = Lap { wall: 1.0, cpu: 2.0 };
        a += Lap { wall: 0.5, cpu: 1.0 };
        assert_eq!(a, Lap { wall: 1.5, cpu: 3.0 });
        assert_eq!(a - Lap { wall: 1.0, cpu: 1.0 }, Lap { wall: 0.5, cpu: 2.0 });
    }
}
