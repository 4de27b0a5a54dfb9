//! Chaos: three kinformer electors and three client-go v0.36.3 electors, each its own
//! process behind its own proxy, compete for one Lease on the real API server while a
//! seeded schedule kills them (SIGKILL, then a new incarnation with a new identity), pauses
//! them (SIGSTOP … SIGCONT, what a long GC pause or a frozen VM looks like) and cuts them
//! off through their proxy, each for a bounded time. Every process journals its terms of
//! leadership on the shared wall clock; afterwards the test asserts that
//!
//! - no two terms overlap, a term ending when its holder *believes* it stopped: its renew
//!   deadline (the last one it logged), or its own stop, or its death;
//! - after the leader is killed (the "probe" kills, made while no other fault is active), a
//!   new leader is elected within a lease duration plus 2 × 2.2 retry periods plus a second
//!   of scheduling slack (see `Timings::takeover_bound`), and no sooner than a lease
//!   duration after the dead leader's last write was sent; the report also counts the
//!   takeovers within lease + retry.
//!
//! Timings: lease 4 s, renew deadline 2.5 s, retry 0.5 s. `cargo test` runs 40 s of chaos
//! (under a minute with the set-up and the final checks);
//! `cargo xtask soak leader --minutes N` runs it for N minutes
//! (`KINFORMER_LEADER_CHAOS_SECS`), with longer faults. `KINFORMER_LEADER_CHAOS_SEED`
//! replays a schedule (the seed is printed).

use std::collections::HashMap;
use std::time::{Duration, Instant};

use crate::common::journal::{Interval, closest_handover, duration, intervals, overlaps, secs};
use crate::common::peers::{Arena, Kind, Peer, now_ns};

/// A fault that lasts a while: a process paused (SIGSTOP) or cut off by its proxy.
#[derive(Clone, Copy, Debug)]
enum FaultKind {
    Pause,
    Partition,
}

/// A fault that is on, and when it ends.
#[derive(Debug)]
struct Fault {
    kind: FaultKind,
    slot: usize,
    until: Instant,
}

/// A kill of the leader made while nothing else was wrong: the takeover time is measured.
struct Probe {
    killed: String,
    at: i128,
}

struct Chaos {
    arena: Arena,
    rng: fastrand::Rng,
    /// The live incarnation of each slot (`None` between a kill and its restart).
    slots: Vec<(Kind, Option<Peer>)>,
    incarnations: Vec<usize>,
    /// Killed or exited incarnations, kept for their journals.
    retired: Vec<Peer>,
    restarts: Vec<(usize, Instant)>,
    faults: Vec<Fault>,
    probes: Vec<Probe>,
    counts: HashMap<&'static str, usize>,
    longest_fault: Duration,
    /// When the processes had started: the origin of every time reported.
    start_ns: i128,
}

impl Chaos {
    fn new(arena: Arena, seed: u64, longest_fault: Duration) -> Self {
        let mut chaos = Self {
            arena,
            rng: fastrand::Rng::with_seed(seed),
            slots: Vec::new(),
            incarnations: Vec::new(),
            retired: Vec::new(),
            restarts: Vec::new(),
            faults: Vec::new(),
            probes: Vec::new(),
            counts: HashMap::new(),
            longest_fault,
            start_ns: 0,
        };
        for kind in [
            Kind::Rust,
            Kind::Go,
            Kind::Rust,
            Kind::Go,
            Kind::Rust,
            Kind::Go,
        ] {
            chaos.slots.push((kind, None));
            chaos.incarnations.push(0);
            chaos.start(chaos.slots.len() - 1);
        }
        chaos.start_ns = now_ns();
        chaos
    }

    fn start(&mut self, slot: usize) {
        let kind = self.slots[slot].0;
        self.incarnations[slot] += 1;
        let id = format!("{kind}-{slot}-{}", self.incarnations[slot]);
        // Half of them release the Lease when they exit.
        let release = self.rng.bool();
        self.slots[slot].1 = Some(self.arena.spawn(kind, &id, release));
    }

    /// Counts a fault and logs it with the time since the start.
    fn count(&mut self, what: &'static str, detail: &str) {
        *self.counts.entry(what).or_default() += 1;
        eprintln!(
            "  {:>7.3} s  {what}: {detail}",
            secs(now_ns() - self.start_ns)
        );
    }

    fn slot_of(&self, id: &str) -> Option<usize> {
        self.slots
            .iter()
            .position(|(_, p)| p.as_ref().is_some_and(|p| p.id == id))
    }

    fn is_faulted(&self, slot: usize) -> bool {
        self.faults.iter().any(|f| f.slot == slot)
    }

    /// Ends the faults whose time has come, and restarts killed slots that are due.
    fn heal_due(&mut self, all: bool) {
        let now = Instant::now();
        let (due, keep): (Vec<_>, Vec<_>) =
            self.faults.drain(..).partition(|f| all || f.until <= now);
        self.faults = keep;
        for fault in due {
            if let Some(p) = self.slots[fault.slot].1.as_mut() {
                match fault.kind {
                    FaultKind::Pause => p.cont(),
                    FaultKind::Partition => p.proxy.heal(),
                }
            }
        }
        let (due, keep): (Vec<_>, Vec<_>) = self
            .restarts
            .drain(..)
            .partition(|(_, at)| all || *at <= now);
        self.restarts = keep;
        for (slot, _) in due {
            self.start(slot);
        }
    }

    fn kill(&mut self, slot: usize) -> Option<(String, i128)> {
        let mut peer = self.slots[slot].1.take()?;
        self.faults.retain(|f| f.slot != slot);
        let at = peer.kill();
        let id = peer.id.clone();
        self.retired.push(peer);
        let restart_in = Duration::from_millis(self.rng.u64(0..2000));
        self.restarts.push((slot, Instant::now() + restart_in));
        Some((id, at))
    }

    fn fault_length(&mut self) -> Duration {
        let max = u64::try_from(self.longest_fault.as_millis()).unwrap_or(u64::MAX);
        Duration::from_millis(self.rng.u64(500..=max.max(501)))
    }

    /// A live slot to hit: the leader's three times in four (faults of the leader are the
    /// ones that test the rules), else any.
    async fn target(&mut self) -> Option<usize> {
        if self.rng.u8(..4) > 0
            && let Some(holder) = self.arena.holder().await
            && let Some(slot) = self.slot_of(&holder)
        {
            return Some(slot);
        }
        let live: Vec<_> = (0..self.slots.len())
            .filter(|s| self.slots[*s].1.is_some())
            .collect();
        (!live.is_empty()).then(|| live[self.rng.usize(..live.len())])
    }

    /// Kills the leader once everything is healthy and it has led for a while, and waits
    /// for a new one.
    async fn probe(&mut self) {
        self.heal_due(true);
        let bound = self.arena.timings.takeover_bound();
        // Everyone reachable and running; wait for a leader that is one of the live ones.
        let limit = Instant::now() + bound;
        let leader = loop {
            if let Some(holder) = self.arena.holder().await
                && let Some(slot) = self.slot_of(&holder)
            {
                break Some(slot);
            }
            if Instant::now() > limit {
                break None;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        };
        let Some(slot) = leader else { return };
        // Let every standby see a few renewals.
        tokio::time::sleep(self.arena.timings.retry * 4).await;
        if self.arena.holder().await.as_deref()
            != self.slots[slot].1.as_ref().map(|p| p.id.as_str())
        {
            return;
        }
        let Some((killed, at)) = self.kill(slot) else {
            return;
        };
        self.count("probe kills", &killed);
        self.probes.push(Probe {
            killed: killed.clone(),
            at,
        });
        // Wait for the takeover before the next fault, so nothing else delays it.
        let limit = Instant::now() + bound + Duration::from_secs(2);
        while Instant::now() < limit {
            self.heal_due(false);
            match self.arena.holder().await {
                Some(h) if h != killed => break,
                _ => tokio::time::sleep(Duration::from_millis(50)).await,
            }
        }
    }

    /// Waits a moment, then injects one fault (or none). A probe, which can take a few
    /// lease durations, is only started when `time_left` allows.
    async fn step(&mut self, time_left: Duration) {
        let pause = Duration::from_millis(self.rng.u64(300..2000));
        tokio::time::sleep(pause).await;
        self.heal_due(false);
        let room = self.faults.len() < 2;
        let t = self.arena.timings;
        let probe_fits = time_left > t.takeover_bound() + t.retry * 4 + Duration::from_secs(2);
        match self.rng.u8(..100) {
            0..12 if probe_fits => self.probe().await,
            12..30 => {
                if let Some(slot) = self.target().await
                    && let Some((killed, _)) = self.kill(slot)
                {
                    self.count("kills", &killed);
                }
            }
            30..65 if room => self.begin(FaultKind::Pause).await,
            65..100 if room => self.begin(FaultKind::Partition).await,
            _ => {}
        }
    }

    /// Pauses or cuts off a process (the leader three times in four) for a random time.
    async fn begin(&mut self, kind: FaultKind) {
        let Some(slot) = self.target().await else {
            return;
        };
        if self.is_faulted(slot) {
            return;
        }
        let length = self.fault_length();
        let Some(p) = self.slots[slot].1.as_mut() else {
            return;
        };
        match kind {
            FaultKind::Pause => p.pause(),
            FaultKind::Partition => p.proxy.partition(),
        }
        let detail = format!("{} for {length:?}", p.id);
        let until = Instant::now() + length;
        self.faults.push(Fault { kind, slot, until });
        let name = match kind {
            FaultKind::Pause => "pauses",
            FaultKind::Partition => "partitions",
        };
        self.count(name, &detail);
    }

    /// Heals everything, lets the election settle, stops every process (SIGTERM) and
    /// returns every incarnation's terms.
    async fn finish(mut self) -> Outcome {
        self.heal_due(true);
        tokio::time::sleep(self.arena.timings.lease + self.arena.timings.retry * 4).await;
        let final_holder = self.arena.holder().await;
        for (_, peer) in &mut self.slots {
            if let Some(mut p) = peer.take() {
                p.terminate(Duration::from_secs(5));
                self.retired.push(p);
            }
        }
        let terms: Vec<Interval> = self
            .retired
            .iter()
            .flat_map(|p| intervals(&p.kind.to_string(), &p.journal(), p.ended_at))
            .collect();
        Outcome {
            start_ns: self.start_ns,
            terms,
            probes: self.probes,
            counts: self.counts,
            final_holder,
            stderr: self
                .retired
                .iter()
                .map(|p| (p.id.clone(), p.stderr_tail()))
                .collect(),
        }
    }
}

struct Outcome {
    start_ns: i128,
    terms: Vec<Interval>,
    probes: Vec<Probe>,
    counts: HashMap<&'static str, usize>,
    final_holder: Option<String>,
    stderr: Vec<(String, String)>,
}

/// Runs the chaos for `run_for` and checks the outcome.
async fn chaos(run_for: Duration, seed: u64) {
    let arena = Arena::new("chaos").await;
    let timings = arena.timings;
    // Faults last up to twice the lease in the short run, up to three minutes in a soak.
    let longest_fault = (run_for / 4).clamp(timings.lease * 2, Duration::from_secs(180));
    eprintln!(
        "leader chaos: seed {seed}, {run_for:?}, faults up to {longest_fault:?}, \
         lease {:?} / renew deadline {:?} / retry {:?}",
        timings.lease, timings.renew_deadline, timings.retry
    );
    let mut chaos = Chaos::new(arena, seed, longest_fault);
    let end = Instant::now() + run_for;
    // Every run measures at least one takeover: the first fault kills the leader.
    chaos.probe().await;
    while let Some(time_left) = end.checked_duration_since(Instant::now()) {
        chaos.step(time_left).await;
    }
    let outcome = chaos.finish().await;
    report_and_check(
        &outcome,
        timings.takeover_bound(),
        timings.lease + timings.retry,
        timings.lease,
    );
}

fn report_and_check(outcome: &Outcome, bound: Duration, tight: Duration, lease: Duration) {
    let (terms, start) = (&outcome.terms, outcome.start_ns);
    let by_kind = |k: &str| terms.iter().filter(|t| t.kind == k).count();
    eprintln!(
        "terms of leadership: {} ({} kinformer, {} client-go); faults: {:?}; final holder {:?}",
        terms.len(),
        by_kind("rust"),
        by_kind("go"),
        outcome.counts,
        outcome.final_holder
    );
    let mut sorted = terms.clone();
    sorted.sort_by_key(|t| t.start);
    for t in &sorted {
        eprintln!(
            "  {:>7.3}..{:>7.3} s  {} ({})",
            secs(t.start - start),
            secs(t.end - start),
            t.id,
            t.kind
        );
    }
    if let Some((gap, a, b)) = closest_handover(terms) {
        eprintln!(
            "closest handover: {:?} between {} and {}",
            duration(gap),
            a.id,
            b.id
        );
    }

    let found = overlaps(terms);
    let dump = || {
        outcome
            .stderr
            .iter()
            .map(|(id, tail)| format!("--- {id} ---\n{tail}"))
            .collect::<Vec<_>>()
            .join("\n")
    };
    assert!(
        found.is_empty(),
        "two leaders at once: {}\n{}",
        found
            .iter()
            .map(|(a, b)| format!("{a} and {b}"))
            .collect::<Vec<_>>()
            .join("; "),
        dump()
    );
    assert!(
        terms.len() >= 3,
        "only {} terms of leadership: the election did not make progress\n{}",
        terms.len(),
        dump()
    );

    let mut gaps = Vec::new();
    for probe in &outcome.probes {
        // Only kills of a process that led at that moment measure a takeover.
        let Some(killed) = terms
            .iter()
            .find(|t| t.id == probe.killed && t.start <= probe.at && probe.at <= t.end)
        else {
            continue;
        };
        let next = terms
            .iter()
            .filter(|t| t.start >= probe.at)
            .min_by_key(|t| t.start);
        let Some(next) = next else {
            panic!(
                "nobody took over from {} (killed at {:.3} s)",
                probe.killed,
                secs(probe.at - start)
            );
        };
        let gap = duration(next.start - probe.at);
        eprintln!(
            "takeover: {} killed at {:.3} s, {} ({}) leads {gap:?} later",
            probe.killed,
            secs(probe.at - start),
            next.id,
            next.kind
        );
        assert!(
            gap <= bound,
            "{} took {gap:?} to replace {}, bound {bound:?}",
            next.id,
            probe.killed
        );
        // The dead leader's lease was waited out from its last write (as the successor
        // can tell writes apart: see `Interval::lease_counted_from`).
        let waited = duration(next.start - killed.lease_counted_from(&next.kind));
        assert!(
            waited >= lease,
            "{} took over {waited:?} after {}'s last write was sent, lease {lease:?}",
            next.id,
            probe.killed
        );
        gaps.push(gap);
    }
    assert!(!gaps.is_empty(), "no takeover was measured");
    gaps.sort();
    eprintln!(
        "takeovers after the leader's death: {} measured, median {:?}, max {:?}; \
         {} within lease + retry ({tight:?}), all within {bound:?}",
        gaps.len(),
        gaps[gaps.len() / 2],
        gaps[gaps.len() - 1],
        gaps.iter().filter(|g| **g <= tight).count()
    );
}

fn env_u64(name: &str) -> Option<u64> {
    std::env::var(name).ok().and_then(|v| v.parse().ok())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the local control plane: cargo xtask test"]
async fn rust_and_go_electors_never_lead_at_once_under_kills_pauses_and_partitions() {
    let run_for = Duration::from_secs(env_u64("KINFORMER_LEADER_CHAOS_SECS").unwrap_or(40));
    let seed = env_u64("KINFORMER_LEADER_CHAOS_SEED")
        .unwrap_or_else(|| u64::try_from(now_ns().rem_euclid(1 << 32)).unwrap_or_default());
    chaos(run_for, seed).await;
}
