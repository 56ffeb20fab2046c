//! A team of threads that stays together for a whole forward pass.
//!
//! A forward pass is a chain of short parallel regions (one or two per MBConv block, tens of
//! microseconds each at 227 px). Run as separate rayon regions, an idle worker goes to sleep
//! between them and waking it costs tens of microseconds (docs/evidence/cnn-speed-2026-12-05.md
//! §4). A [`Team`] starts its helpers once per pass; between regions they spin (then yield)
//! waiting for the next one, and the thread that runs the pass hands out each region's pieces
//! through one atomic ticket. See docs/backbones.md, "Threads".
//!
//! Deadlock freedom: the leader never waits for a helper to *start*. It waits only for pieces
//! that a thread has already claimed and is running, so a helper the pool never gets round to
//! (every worker busy elsewhere, e.g. in `forward_batch`) costs nothing: the leader runs every
//! piece itself, and a helper that starts after the pass sees it finished and returns.
//!
//! Which thread runs which piece varies from run to run; every piece is a function of its
//! index alone, so the output does not.

use fisherkit::linalg::Par;
use rayon::prelude::*;
use std::any::Any;
use std::num::NonZeroUsize;
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Mutex;

/// Polls (a `spin_loop` hint each) a waiting helper makes before it yields its core between
/// polls: about 0.1 ms on the Zen 5 VM (1 << 14 of them took 0.44 ms), far longer than the
/// sequential gaps between the regions of a pass. Yielding, the helper stays runnable (it
/// never sleeps on a futex), so on a core of its own it still answers within microseconds;
/// it only stops competing with threads that need its core.
const SPINS_BEFORE_YIELD: u32 = 1 << 12;

/// One region's work as the helpers see it: run piece `i`.
type Job = &'static (dyn Fn(usize) + Sync);

pub(crate) struct Shared {
    /// The current region: pieces `n` in the high 32 bits, the next unclaimed piece in the
    /// low 32. A piece is claimed by a compare-exchange from `next < n` to `next + 1`.
    ticket: AtomicU64,
    /// The current region's job, set while the region has unfinished pieces.
    job: Mutex<Option<Job>>,
    /// Pieces of the current region finished (run to the end or panicked).
    done: AtomicUsize,
    /// The pass is over: helpers return.
    finished: AtomicBool,
    /// The first panic of a piece run by a helper, re-raised by the leader.
    panic: Mutex<Option<Box<dyn Any + Send>>>,
}

/// The mutex's contents, also after a panic elsewhere (pieces' panics are caught, and what the
/// mutexes hold stays consistent).
fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn pack(n: usize, next: usize) -> u64 {
    ((n as u64) << 32) | next as u64
}

fn unpack(t: u64) -> (usize, usize) {
    ((t >> 32) as usize, (t & 0xffff_ffff) as usize)
}

impl Shared {
    /// Claims the next piece of the current region, if any is left.
    fn claim(&self) -> Option<usize> {
        let mut t = self.ticket.load(Ordering::Acquire);
        loop {
            let (n, next) = unpack(t);
            if next >= n {
                return None;
            }
            match self.ticket.compare_exchange_weak(
                t,
                pack(n, next + 1),
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => return Some(next),
                Err(now) => t = now,
            }
        }
    }

    /// Runs claimed piece `i` of the current region and counts it done; a panic is kept for
    /// the leader.
    fn run(&self, i: usize) {
        // The region's job is set before its ticket is published and cleared only after all
        // its pieces are done, so it is present while this claimed piece is not done.
        let job = lock(&self.job).expect("a job");
        if let Err(p) = catch_unwind(AssertUnwindSafe(|| job(i))) {
            lock(&self.panic).get_or_insert(p);
        }
        self.done.fetch_add(1, Ordering::Release);
    }

    /// Publishes a region of `n` pieces running `f`, runs pieces until none is left to
    /// claim, waits until all are done, and re-raises the first panic of a piece.
    fn region(&self, n: usize, f: &(dyn Fn(usize) + Sync)) {
        assert!(n < 1 << 32, "team: too many pieces");
        // SAFETY: the 'static reference never outlives `f`. It is stored in `self.job` here
        // and removed below, after `done == n`; a thread calls it only between claiming a
        // piece of this region (possible only once the ticket below is published) and
        // counting that piece done, and `done == n` means every piece has been claimed and
        // counted. No other region starts before this call returns: a team has one leader.
        let job: Job = unsafe { std::mem::transmute::<&(dyn Fn(usize) + Sync), Job>(f) };
        *lock(&self.job) = Some(job);
        self.done.store(0, Ordering::Relaxed);
        self.ticket.store(pack(n, 0), Ordering::Release);
        while let Some(i) = self.claim() {
            self.run(i);
        }
        while self.done.load(Ordering::Acquire) < n {
            std::hint::spin_loop();
        }
        *lock(&self.job) = None;
        if let Some(p) = lock(&self.panic).take() {
            resume_unwind(p);
        }
    }

    /// A helper's life: claim and run pieces until the pass is finished.
    fn help(&self) {
        let mut spins = 0u32;
        while !self.finished.load(Ordering::Acquire) {
            match self.claim() {
                Some(i) => {
                    self.run(i);
                    spins = 0;
                }
                None if spins < SPINS_BEFORE_YIELD => {
                    spins += 1;
                    std::hint::spin_loop();
                }
                None => std::thread::yield_now(),
            }
        }
    }
}

/// How the pieces of a region are spread over threads: [`Team::Seq`] on the calling thread,
/// [`Team::ForkJoin`] as one rayon region each (what SqueezeNet's layers use: some of them
/// run parallel GEMMs inside a piece), or [`Team::Pass`], a pass-long team made by
/// [`with_team`] (see the module docs). A layer function takes the team its caller runs in
/// and never calls rayon itself: inside a `Pass` the helpers would not take rayon's jobs.
#[derive(Clone, Copy)]
pub(crate) enum Team<'s> {
    Seq,
    ForkJoin(NonZeroUsize),
    Pass {
        shared: &'s Shared,
        threads: NonZeroUsize,
    },
}

impl Team<'_> {
    /// Rayon regions for `par` (one thread for [`Par::Seq`]).
    pub(crate) fn fork_join(par: Par) -> Team<'static> {
        match par {
            Par::Rayon(n) if n.get() > 1 => Team::ForkJoin(n),
            _ => Team::Seq,
        }
    }

    /// Threads the pieces are spread over.
    pub(crate) fn threads(&self) -> usize {
        match self {
            Team::Seq => 1,
            Team::ForkJoin(n) | Team::Pass { threads: n, .. } => n.get(),
        }
    }

    /// The parallelism a piece run on its own may use inside (a GEMM's): the fork–join
    /// team's, and none inside a pass-long team, whose helpers never run rayon's jobs.
    pub(crate) fn inner_par(&self) -> Par {
        match self {
            Team::ForkJoin(n) => Par::Rayon(*n),
            Team::Seq | Team::Pass { .. } => Par::Seq,
        }
    }

    /// Runs `f(i)` for `i` in `0..n`, spread over the team; returns when all have run. A panic
    /// of a piece is raised here once every piece has finished.
    pub(crate) fn for_each(&self, n: usize, f: &(dyn Fn(usize) + Sync)) {
        match *self {
            Team::Pass { shared, .. } if n > 1 => shared.region(n, f),
            Team::ForkJoin(_) if n > 1 => (0..n).into_par_iter().for_each(f),
            _ => (0..n).for_each(f),
        }
    }

    /// Calls `f(i, item)` on each item (`i` its index), spread over the team: each piece
    /// takes its item by value (e.g. a disjoint `&mut` part of an output).
    pub(crate) fn for_each_item<T, F>(&self, items: Vec<T>, f: F)
    where
        T: Send,
        F: Fn(usize, T) + Sync,
    {
        match self {
            Team::Seq => items.into_iter().enumerate().for_each(|(i, t)| f(i, t)),
            Team::ForkJoin(_) => items.into_par_iter().enumerate().for_each(|(i, t)| f(i, t)),
            Team::Pass { .. } => {
                let slots: Vec<Mutex<Option<T>>> =
                    items.into_iter().map(|t| Mutex::new(Some(t))).collect();
                self.for_each(slots.len(), &|i| {
                    let item = lock(&slots[i]).take().expect("each piece runs once");
                    f(i, item)
                });
            }
        }
    }

    /// Calls `f(i, chunk)` on the consecutive `chunk_len`-float chunks of `buf` (the last
    /// may be shorter), spread over the team.
    pub(crate) fn for_each_chunk<F>(&self, buf: &mut [f32], chunk_len: usize, f: F)
    where
        F: Fn(usize, &mut [f32]) + Sync,
    {
        self.for_each_item(buf.chunks_mut(chunk_len.max(1)).collect(), f);
    }
}

/// Sets `finished` when the leader leaves the pass, also by a panic (else the scope would
/// wait for helpers that never return).
struct Finish<'a>(&'a Shared);

impl Drop for Finish<'_> {
    fn drop(&mut self) {
        self.0.finished.store(true, Ordering::Release);
    }
}

/// Runs `body` with a team of `par`'s thread count: the calling thread leads, and
/// `threads − 1` helpers are spawned on the current rayon pool.
pub(crate) fn with_team<R>(par: Par, body: impl FnOnce(&Team<'_>) -> R) -> R {
    let threads = match par {
        Par::Rayon(n) if n.get() > 1 => n,
        _ => return body(&Team::Seq),
    };
    let shared = Shared {
        ticket: AtomicU64::new(0),
        job: Mutex::new(None),
        done: AtomicUsize::new(0),
        finished: AtomicBool::new(false),
        panic: Mutex::new(None),
    };
    rayon::in_place_scope(|s| {
        for _ in 1..threads.get() {
            s.spawn(|_| shared.help());
        }
        let _finish = Finish(&shared);
        body(&Team::Pass {
            shared: &shared,
            threads,
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicU32;

    fn pool(threads: usize) -> rayon::ThreadPool {
        rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .unwrap()
    }

    /// Runs regions of 0, 1, 2, 7 and 64 pieces on `team`, checking that each piece ran once.
    fn regions_run_each_piece_once(team: &Team<'_>) {
        for n in [0, 1, 2, 7, 64, 3] {
            let hits: Vec<AtomicU32> = (0..n).map(|_| AtomicU32::new(0)).collect();
            team.for_each(n, &|i| {
                hits[i].fetch_add(1, Ordering::Relaxed);
            });
            let got: Vec<u32> = hits.iter().map(|h| h.load(Ordering::Relaxed)).collect();
            assert_eq!(got, vec![1; n], "region of {n} pieces");
        }
        let mut buf = vec![0.0f32; 103];
        team.for_each_chunk(&mut buf, 10, |i, c| {
            assert_eq!(c.len(), if i == 10 { 3 } else { 10 });
            c.iter_mut().for_each(|v| *v += i as f32 + 1.0);
        });
        let want: Vec<f32> = (0..103).map(|j| (j / 10) as f32 + 1.0).collect();
        assert_eq!(buf, want);
    }

    #[test]
    fn every_kind_of_team_runs_each_piece_once() {
        regions_run_each_piece_once(&Team::Seq);
        for threads in [2, 3] {
            pool(threads).install(|| {
                regions_run_each_piece_once(&Team::fork_join(Par::rayon(threads)));
                with_team(Par::rayon(threads), |t| {
                    assert!(matches!(t, Team::Pass { .. }));
                    regions_run_each_piece_once(t)
                });
            });
        }
        // Led from a thread outside any pool: the helpers go to the global pool.
        with_team(Par::rayon(2), regions_run_each_piece_once);
    }

    #[test]
    fn pieces_run_on_several_threads() {
        // Each piece waits until two distinct threads have started one, which only a team
        // whose helper takes pieces can satisfy (a lone leader would spin for ever; the
        // test would time out rather than pass).
        pool(2).install(|| {
            with_team(Par::rayon(2), |t| {
                let seen = Mutex::new(std::collections::HashSet::new());
                t.for_each(2, &|_| {
                    lock(&seen).insert(std::thread::current().id());
                    while lock(&seen).len() < 2 {
                        std::hint::spin_loop();
                    }
                });
            })
        });
    }

    #[test]
    fn a_panicking_piece_reaches_the_leader_after_the_region() {
        let p = pool(2);
        let done = AtomicU32::new(0);
        let r = catch_unwind(AssertUnwindSafe(|| {
            p.install(|| {
                with_team(Par::rayon(2), |t| {
                    t.for_each(16, &|i| {
                        if i == 5 {
                            panic!("piece 5");
                        }
                        done.fetch_add(1, Ordering::Relaxed);
                    })
                })
            })
        }));
        let msg = *r.expect_err("the panic").downcast::<&str>().unwrap();
        assert_eq!(msg, "piece 5");
        assert_eq!(done.load(Ordering::Relaxed), 15, "every other piece ran");
        // The pool is usable afterwards: no helper was left spinning.
        p.install(|| with_team(Par::rayon(2), regions_run_each_piece_once));
    }

    #[test]
    fn teams_nested_in_rayon_work_finish() {
        // Passes run in parallel (as `forward_batch` runs them): every worker leads its own
        // team and may help another's; none waits for a helper to start.
        let p = pool(2);
        let total = AtomicU32::new(0);
        p.install(|| {
            (0..24).into_par_iter().for_each(|_| {
                with_team(Par::rayon(2), |t| {
                    for n in [4, 1, 9, 2] {
                        t.for_each(n, &|_| {
                            total.fetch_add(1, Ordering::Relaxed);
                        });
                    }
                })
            })
        });
        assert_eq!(total.load(Ordering::Relaxed), 24 * 16);
    }
}
