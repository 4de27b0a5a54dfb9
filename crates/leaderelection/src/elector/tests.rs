//! The rules, as named tests on a fake clock and an in-memory lease.
//!
//! Every test runs on a paused Tokio clock (the [`FakeClock`] of [`tokio_clock`] follows
//! it): a task that sleeps lets time jump to the next timer, so the election runs with
//! client-go's default timings (lease 15 s, renew deadline 10 s, retry 2 s) in
//! milliseconds, and the times asserted are exact. The in-memory lease answers at once unless a test sets a latency.

use std::future::Future;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::testing::{Fault, MemoryLease, tokio_clock};
use crate::{
    Clock, Error, FakeClock, LeaderCallbacks, LeaderElectionConfig, LeaderElectionRecord,
    LeaderElector, LeaderMetric, Leading, MetricsProvider, TermEnd,
};

const LEASE: Duration = Duration::from_secs(15);
const DEADLINE: Duration = Duration::from_secs(10);
const RETRY: Duration = Duration::from_secs(2);
/// The longest a candidate waits between two tries: the retry period plus 1.2 times it.
const MAX_RETRY_WAIT: Duration = Duration::from_millis(4400);

fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}

/// What the callbacks of every candidate saw, with the time (since the test's start) they
/// saw it.
#[derive(Clone)]
struct Timeline {
    clock: FakeClock,
    events: Arc<Mutex<Vec<(Duration, String, Event)>>>,
}

#[derive(Clone, Debug, PartialEq)]
enum Event {
    /// Started leading, until this deadline (since the test's start).
    Started(Duration),
    Renewed(Duration),
    Stopped,
    NewLeader(String),
}

impl Timeline {
    fn new() -> Self {
        Self {
            clock: tokio_clock(),
            events: Arc::default(),
        }
    }

    fn now(&self) -> Duration {
        self.clock.elapsed()
    }

    fn since_start(&self, at: Instant) -> Duration {
        self.clock.elapsed() + at.saturating_duration_since(self.clock.now())
    }

    fn push(&self, id: &str, event: Event) {
        self.events
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push((self.now(), id.to_owned(), event));
    }

    fn events_of(&self, id: &str) -> Vec<(Duration, Event)> {
        self.events
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .filter(|(_, who, _)| who == id)
            .map(|(t, _, e)| (*t, e.clone()))
            .collect()
    }

    /// When `id` started leading, each time.
    fn starts(&self, id: &str) -> Vec<Duration> {
        self.events_of(id)
            .into_iter()
            .filter_map(|(t, e)| matches!(e, Event::Started(_)).then_some(t))
            .collect()
    }

    /// When `id` stopped leading, each time.
    fn stops(&self, id: &str) -> Vec<Duration> {
        self.events_of(id)
            .into_iter()
            .filter_map(|(t, e)| (e == Event::Stopped).then_some(t))
            .collect()
    }

    fn new_leaders(&self, id: &str) -> Vec<String> {
        self.events_of(id)
            .into_iter()
            .filter_map(|(_, e)| match e {
                Event::NewLeader(l) => Some(l),
                _ => None,
            })
            .collect()
    }

    /// Every term of leadership of every candidate: (identity, start, end), the end being
    /// when the candidate stopped or its last deadline, whichever came first.
    fn intervals(&self) -> Vec<(String, Duration, Duration)> {
        let events = self
            .events
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        let mut open: Vec<(String, Duration, Duration)> = Vec::new();
        let mut done = Vec::new();
        for (t, id, e) in events {
            match e {
                Event::Started(deadline) => open.push((id, t, deadline)),
                Event::Renewed(deadline) => {
                    if let Some(o) = open.iter_mut().find(|o| o.0 == id) {
                        o.2 = deadline;
                    }
                }
                Event::Stopped => {
                    if let Some(i) = open.iter().position(|o| o.0 == id) {
                        let (id, start, deadline) = open.remove(i);
                        done.push((id, start, deadline.min(t)));
                    }
                }
                Event::NewLeader(_) => {}
            }
        }
        done.extend(open);
        done.sort_by_key(|i| i.1);
        done
    }

    /// Asserts that no two terms of leadership overlap.
    fn assert_no_overlap(&self) {
        let intervals = self.intervals();
        for pair in intervals.windows(2) {
            assert!(
                pair[1].1 >= pair[0].2,
                "two leaders at once: {:?} and {:?} (all: {intervals:?})",
                pair[0],
                pair[1]
            );
        }
    }
}

struct Recorder {
    id: String,
    timeline: Timeline,
}

impl LeaderCallbacks for Recorder {
    fn started_leading(&self, deadline: Instant) {
        let d = self.timeline.since_start(deadline);
        self.timeline.push(&self.id, Event::Started(d));
    }

    fn renewed(&self, deadline: Instant) {
        let d = self.timeline.since_start(deadline);
        self.timeline.push(&self.id, Event::Renewed(d));
    }

    fn stopped_leading(&self) {
        self.timeline.push(&self.id, Event::Stopped);
    }

    fn new_leader(&self, identity: &str) {
        self.timeline
            .push(&self.id, Event::NewLeader(identity.to_owned()));
    }
}

fn candidate_with(
    lease: &MemoryLease,
    id: &str,
    timeline: &Timeline,
    config: LeaderElectionConfig,
) -> LeaderElector {
    LeaderElector::builder(lease.lock(id))
        .config(config)
        .clock(timeline.clock.clone())
        .callbacks(Recorder {
            id: id.to_owned(),
            timeline: timeline.clone(),
        })
        .build()
        .unwrap()
}

fn candidate(lease: &MemoryLease, id: &str, timeline: &Timeline) -> LeaderElector {
    candidate_with(lease, id, timeline, LeaderElectionConfig::default())
}

fn releasing() -> LeaderElectionConfig {
    LeaderElectionConfig {
        release_on_cancel: true,
        ..LeaderElectionConfig::default()
    }
}

/// A run of an elector in its own task.
type Run = JoinHandle<Result<TermEnd, Error>>;

/// Runs `elector` (going back to waiting after a lost term) with `work` for each term.
fn spawn_run_with<F, Fut>(elector: &LeaderElector, cancel: &CancellationToken, work: F) -> Run
where
    F: FnMut(Leading) -> Fut + Send + 'static,
    Fut: Future<Output = ()> + Send + 'static,
{
    let (elector, cancel) = (elector.clone(), cancel.clone());
    tokio::spawn(async move { elector.run(&cancel, work).await })
}

/// One term of `elector` with `work`.
fn spawn_term_with<F, Fut>(elector: &LeaderElector, cancel: &CancellationToken, work: F) -> Run
where
    F: FnOnce(Leading) -> Fut + Send + 'static,
    Fut: Future<Output = ()> + Send + 'static,
{
    let (elector, cancel) = (elector.clone(), cancel.clone());
    tokio::spawn(async move { elector.run_once(&cancel, work).await })
}

/// Work that leads until its token is cancelled.
async fn lead(leading: Leading) {
    leading.lost().await;
}

/// Runs `elector` (going back to waiting after a lost term), leading until cancelled.
fn spawn_run(elector: &LeaderElector, cancel: &CancellationToken) -> Run {
    spawn_run_with(elector, cancel, lead)
}

/// One term of `elector`, leading until cancelled.
fn spawn_term(elector: &LeaderElector, cancel: &CancellationToken) -> Run {
    spawn_term_with(elector, cancel, lead)
}

/// Cuts the candidate `id` off the lease from `from` to `to` (since the test's start).
async fn cut_off(lease: &MemoryLease, timeline: &Timeline, id: &str, from: Duration, to: Duration) {
    until(timeline, from).await;
    lease.set_fault_for(id, Fault::Unreachable);
    until(timeline, to).await;
    lease.set_fault_for(id, Fault::None);
}

/// Sleeps until `at` since the test's start.
async fn until(timeline: &Timeline, at: Duration) {
    tokio::time::sleep(at.saturating_sub(timeline.now())).await;
}

fn held_by(holder: &str, renew: Option<SystemTime>) -> LeaderElectionRecord {
    LeaderElectionRecord {
        holder_identity: holder.to_owned(),
        lease_duration_seconds: 15,
        acquire_time: renew,
        renew_time: renew,
        leader_transitions: 3,
    }
}

#[tokio::test(start_paused = true)]
async fn acquires_a_lease_that_does_not_exist_by_creating_it() {
    let (lease, timeline) = (MemoryLease::new(), Timeline::new());
    let a = candidate(&lease, "a", &timeline);
    let cancel = CancellationToken::new();
    let run = spawn_term(&a, &cancel);

    until(&timeline, secs(5)).await;
    assert_eq!(timeline.starts("a"), [secs(0)]);
    assert!(a.is_leader());
    let record = lease.record().unwrap();
    assert_eq!(record.holder_identity, "a");
    assert_eq!(record.lease_duration_seconds, 15);
    assert_eq!(record.leader_transitions, 0);
    let wall = timeline.clock.wall_now();
    assert_eq!(record.acquire_time, Some(wall - secs(5)));
    assert_eq!(record.renew_time, Some(wall - secs(1)), "renewed at 4 s");

    cancel.cancel();
    assert_eq!(run.await.unwrap().unwrap(), TermEnd::Cancelled);
    assert!(!a.is_leader());
}

#[tokio::test(start_paused = true)]
async fn renews_on_the_fast_path_every_retry_period_keeping_acquire_time_and_transitions() {
    let (lease, timeline) = (MemoryLease::new(), Timeline::new());
    let a = candidate(&lease, "a", &timeline);
    let cancel = CancellationToken::new();
    let run = spawn_term(&a, &cancel);

    until(&timeline, secs(61)).await;
    // client-go's TestFastPathLeaderElection: get, create, then updates only.
    let calls: Vec<_> = lease.calls().into_iter().map(|(_, c)| c).collect();
    assert_eq!(calls[..2], ["get", "create"]);
    assert!(calls[2..].iter().all(|c| *c == "update"), "{calls:?}");
    assert_eq!(calls.len(), 2 + 30, "one renewal every 2 s for 60 s");
    let renewals: Vec<_> = timeline
        .events_of("a")
        .into_iter()
        .filter_map(|(t, e)| matches!(e, Event::Renewed(_)).then_some((t, e)))
        .collect();
    assert_eq!(renewals.len(), 30);
    for (t, e) in renewals {
        assert_eq!(
            e,
            Event::Renewed(t + DEADLINE),
            "the deadline is the send time + 10 s"
        );
    }
    let record = lease.record().unwrap();
    let wall = timeline.clock.wall_now();
    assert_eq!(record.acquire_time, Some(wall - secs(61)));
    assert_eq!(record.renew_time, Some(wall - secs(1)));
    assert_eq!(record.leader_transitions, 0);

    cancel.cancel();
    run.await.unwrap().unwrap();
}

#[tokio::test(start_paused = true)]
async fn acquires_an_expired_lease_once_it_saw_it_unchanged_for_the_lease_duration() {
    let (lease, timeline) = (MemoryLease::new(), Timeline::new());
    // Renewed "an hour ago" by its timestamps: irrelevant, only the local observation counts.
    lease.put(held_by("old", Some(timeline.clock.wall_now() - secs(3600))));
    let b = candidate(&lease, "b", &timeline);
    let cancel = CancellationToken::new();
    let run = spawn_term(&b, &cancel);

    until(&timeline, secs(20)).await;
    assert_eq!(
        timeline.starts("b"),
        [LEASE],
        "first seen at 0 s, so taken at 15 s"
    );
    let record = lease.record().unwrap();
    assert_eq!(record.holder_identity, "b");
    assert_eq!(record.leader_transitions, 4);
    assert_eq!(
        record.acquire_time,
        Some(timeline.clock.wall_now() - secs(5))
    );
    assert_eq!(timeline.new_leaders("b"), ["old", "b"]);

    cancel.cancel();
    run.await.unwrap().unwrap();
}

#[tokio::test(start_paused = true)]
async fn never_acquires_an_unexpired_lease_whatever_its_timestamps_say() {
    let far_past = UNIX_EPOCH + secs(1);
    let far_future = UNIX_EPOCH + secs(4_102_444_800); // 2100
    for (case, base) in [
        ("far past", Some(far_past)),
        ("far future", Some(far_future)),
        ("none", None),
    ] {
        let (lease, timeline) = (MemoryLease::new(), Timeline::new());
        // This candidate's own wall clock is off by a century too.
        timeline.clock.set_wall(UNIX_EPOCH + secs(7_258_118_400)); // 2200
        // A live holder that renews every 2 s; only the transitions counter changes when
        // its timestamps are missing.
        let renewing = CancellationToken::new();
        let last_write = Arc::new(Mutex::new(Duration::ZERO));
        let holder = {
            let (lease, renewing, last_write, t) = (
                lease.clone(),
                renewing.clone(),
                Arc::clone(&last_write),
                timeline.clone(),
            );
            tokio::spawn(async move {
                let mut i = 0;
                while !renewing.is_cancelled() {
                    let mut record = held_by("x", base.map(|b| b + secs(i)));
                    record.leader_transitions = i32::try_from(i).unwrap();
                    lease.put(record);
                    *last_write.lock().unwrap() = t.now();
                    i += 1;
                    tokio::time::sleep(RETRY).await;
                }
            })
        };
        let b = candidate(&lease, "b", &timeline);
        let cancel = CancellationToken::new();
        let run = spawn_term(&b, &cancel);

        until(&timeline, secs(300)).await;
        assert!(
            timeline.starts("b").is_empty(),
            "{case}: took a lease renewed every 2 s"
        );
        assert_eq!(lease.record().unwrap().holder_identity, "x", "{case}");

        // The holder stops: b saw the last renewal within one retry wait, then waits 15 s.
        renewing.cancel();
        holder.await.unwrap();
        let last_write = *last_write.lock().unwrap();
        until(&timeline, secs(330)).await;
        let started = timeline.starts("b");
        assert_eq!(started.len(), 1, "{case}");
        assert!(
            started[0] >= last_write + LEASE && started[0] <= last_write + MAX_RETRY_WAIT + LEASE,
            "{case}: took over at {:?}",
            started[0]
        );
        cancel.cancel();
        run.await.unwrap().unwrap();
    }
}

#[tokio::test(start_paused = true)]
async fn waits_the_lease_duration_the_holder_wrote_not_its_own() {
    let (lease, timeline) = (MemoryLease::new(), Timeline::new());
    let mut record = held_by("old", None);
    record.lease_duration_seconds = 40;
    lease.put(record);
    let b = candidate(&lease, "b", &timeline);
    let cancel = CancellationToken::new();
    let run = spawn_term(&b, &cancel);

    until(&timeline, secs(45)).await;
    assert_eq!(timeline.starts("b"), [secs(40)]);
    cancel.cancel();
    run.await.unwrap().unwrap();
}

#[tokio::test(start_paused = true)]
async fn acquires_a_released_lease_at_once() {
    let (lease, timeline) = (MemoryLease::new(), Timeline::new());
    lease.put(LeaderElectionRecord {
        holder_identity: String::new(),
        lease_duration_seconds: 1,
        ..held_by("", Some(timeline.clock.wall_now()))
    });
    let b = candidate(&lease, "b", &timeline);
    let cancel = CancellationToken::new();
    let run = spawn_term(&b, &cancel);

    until(&timeline, secs(1)).await;
    assert_eq!(timeline.starts("b"), [secs(0)]);
    assert_eq!(lease.record().unwrap().leader_transitions, 4);
    cancel.cancel();
    run.await.unwrap().unwrap();
}

#[tokio::test(start_paused = true)]
async fn falls_back_to_the_slow_path_when_the_optimistic_write_conflicts() {
    let (lease, timeline) = (MemoryLease::new(), Timeline::new());
    let (a, metrics) = counted(&lease, &timeline);
    let cancel = CancellationToken::new();
    let run = spawn_term(&a, &cancel);

    until(&timeline, secs(5)).await;
    // Someone rewrites the record (same content, new version) between two renewals.
    lease.put(lease.record().unwrap());
    let before = lease.calls().len();
    until(&timeline, secs(7)).await;
    let calls: Vec<_> = lease.calls()[before..].iter().map(|(_, c)| *c).collect();
    assert_eq!(
        calls,
        ["update", "get", "update"],
        "conflict, read again, write over it"
    );
    assert!(a.is_leader());
    assert_eq!(metrics.count("slowpath"), 1);

    cancel.cancel();
    run.await.unwrap().unwrap();
}

#[tokio::test(start_paused = true)]
async fn steps_down_at_the_renew_deadline_when_the_server_is_unreachable() {
    let (lease, timeline) = (MemoryLease::new(), Timeline::new());
    let a = candidate(&lease, "a", &timeline);
    let cancel = CancellationToken::new();
    let leading = Arc::new(Mutex::new(None));
    let run = {
        let leading = Arc::clone(&leading);
        spawn_term_with(&a, &cancel, move |l| {
            *leading.lock().unwrap() = Some(l.clone());
            lead(l)
        })
    };

    // Renewals at 0, 2, ..., 30 s succeed; from 31 s the server is unreachable.
    until(&timeline, secs(31)).await;
    lease.set_fault(Fault::Unreachable);
    let l = leading.lock().unwrap().clone().unwrap();
    until(&timeline, secs(39)).await;
    assert!(l.is_leading() && a.is_leader(), "still within the deadline");

    assert_eq!(run.await.unwrap().unwrap(), TermEnd::Lost);
    // The last renewal was sent at 30 s: leadership ends at 40 s, before anyone else may
    // take the lease (30 s + 15 s).
    assert_eq!(timeline.stops("a"), [secs(40)]);
    assert!(l.token().is_cancelled() && !l.is_leading() && !a.is_leader());
    assert!(secs(40) < secs(30) + LEASE);
}

#[tokio::test(start_paused = true)]
async fn steps_down_at_the_renew_deadline_when_requests_hang() {
    let (lease, timeline) = (MemoryLease::new(), Timeline::new());
    let a = candidate(&lease, "a", &timeline);
    let run = spawn_term(&a, &CancellationToken::new());

    until(&timeline, secs(31)).await;
    lease.set_fault(Fault::Hang);
    assert_eq!(run.await.unwrap().unwrap(), TermEnd::Lost);
    assert_eq!(
        timeline.stops("a"),
        [secs(40)],
        "cut at the deadline, not at a timeout"
    );
}

#[tokio::test(start_paused = true)]
async fn a_renewal_answered_after_its_deadline_does_not_extend_leadership() {
    let (lease, timeline) = (MemoryLease::new(), Timeline::new());
    let a = candidate(&lease, "a", &timeline);
    let run = spawn_term(&a, &CancellationToken::new());

    until(&timeline, secs(1)).await;
    // The renewal sent at 2 s lands on the server, but its answer comes at 13 s.
    lease.set_latency(secs(11));
    assert_eq!(run.await.unwrap().unwrap(), TermEnd::Lost);
    assert_eq!(timeline.stops("a"), [secs(10)]);
    assert_eq!(
        lease.record().unwrap().renew_time,
        Some(timeline.clock.wall_now() - secs(8)),
        "the write landed at 2 s"
    );
}

#[tokio::test(start_paused = true)]
async fn a_partitioned_leader_stops_before_a_standby_takes_over() {
    let (lease, timeline) = (MemoryLease::new(), Timeline::new());
    let (a, b) = (
        candidate(&lease, "a", &timeline),
        candidate(&lease, "b", &timeline),
    );
    let cancel = CancellationToken::new();
    let runs = [spawn_run(&a, &cancel), {
        until(&timeline, secs(1)).await;
        spawn_run(&b, &cancel)
    }];

    until(&timeline, secs(31)).await;
    lease.set_fault_for("a", Fault::Unreachable);
    until(&timeline, secs(60)).await;
    assert_eq!(timeline.stops("a"), [secs(40)]);
    let taken = timeline.starts("b");
    assert_eq!(taken.len(), 1);
    // a's last write was at 30 s; b saw it within one retry wait and waited 15 s from then.
    assert!(
        taken[0] >= secs(30) + LEASE && taken[0] <= secs(30) + MAX_RETRY_WAIT + LEASE,
        "{taken:?}"
    );
    timeline.assert_no_overlap();
    cancel.cancel();
    for r in runs {
        r.await.unwrap().unwrap();
    }
}

#[tokio::test(start_paused = true)]
async fn steps_down_at_once_when_the_record_names_another_holder() {
    let (lease, timeline) = (MemoryLease::new(), Timeline::new());
    let a = candidate(&lease, "a", &timeline);
    let run = spawn_term(&a, &CancellationToken::new());

    until(&timeline, secs(31)).await;
    lease.put(held_by("intruder", None));
    assert_eq!(run.await.unwrap().unwrap(), TermEnd::Lost);
    assert_eq!(
        timeline.stops("a"),
        [secs(32)],
        "at the next renewal, not at 40 s"
    );
    assert_eq!(a.get_leader().as_deref(), Some("intruder"));
}

#[tokio::test(start_paused = true)]
async fn releases_on_cancel_after_the_work_returned() {
    let (lease, timeline) = (MemoryLease::new(), Timeline::new());
    let a = candidate_with(&lease, "a", &timeline, releasing());
    let b = candidate(&lease, "b", &timeline);
    let (stop_a, stop_b) = (CancellationToken::new(), CancellationToken::new());
    let holder_when_work_ended = Arc::new(Mutex::new(None));
    let run_a = {
        let (seen, lease) = (Arc::clone(&holder_when_work_ended), lease.clone());
        spawn_term_with(&a, &stop_a, move |l| async move {
            l.lost().await;
            tokio::time::sleep(secs(3)).await; // finishing up
            *seen.lock().unwrap() = lease.record().map(|r| r.holder_identity);
        })
    };
    until(&timeline, secs(1)).await;
    let run_b = spawn_term(&b, &stop_b);

    until(&timeline, secs(31)).await;
    stop_a.cancel();
    assert_eq!(run_a.await.unwrap().unwrap(), TermEnd::Cancelled);
    assert_eq!(
        timeline.now(),
        secs(34),
        "returned once the work had finished"
    );
    assert_eq!(
        holder_when_work_ended.lock().unwrap().as_deref(),
        Some("a"),
        "not released while the work ran"
    );
    let released = lease.record().unwrap();
    assert_eq!(released.holder_identity, "");
    assert_eq!(released.lease_duration_seconds, 1);
    assert_eq!(released.leader_transitions, 0);

    // b takes it at its next try, not after a lease duration.
    until(&timeline, secs(34) + MAX_RETRY_WAIT).await;
    let taken = timeline.starts("b");
    assert_eq!(taken.len(), 1);
    assert!(taken[0] >= secs(34), "{taken:?}");
    timeline.assert_no_overlap();
    stop_b.cancel();
    run_b.await.unwrap().unwrap();
}

#[tokio::test(start_paused = true)]
async fn does_not_release_a_lease_someone_else_acquired_meanwhile() {
    let (lease, timeline) = (MemoryLease::new(), Timeline::new());
    let a = candidate_with(&lease, "a", &timeline, releasing());
    let b = candidate(&lease, "b", &timeline);
    let stop_b = CancellationToken::new();
    // a's work takes 20 s to stop after leadership is lost.
    let run_a = spawn_term_with(&a, &CancellationToken::new(), |l| async move {
        l.lost().await;
        tokio::time::sleep(secs(20)).await;
    });
    until(&timeline, secs(1)).await;
    let run_b = spawn_term(&b, &stop_b);

    cut_off(&lease, &timeline, "a", secs(31), secs(41)).await;
    // a lost at 40 s, b took over by 49.4 s, a's work ends at 60 s and a tries to release.
    assert_eq!(run_a.await.unwrap().unwrap(), TermEnd::Lost);
    assert_eq!(timeline.now(), secs(60));
    assert_eq!(lease.record().unwrap().holder_identity, "b");
    until(&timeline, secs(70)).await;
    assert!(b.is_leader());
    timeline.assert_no_overlap();
    stop_b.cancel();
    run_b.await.unwrap().unwrap();
}

#[tokio::test(start_paused = true)]
async fn electors_racing_for_one_lease_never_lead_at_once() {
    for seed in 0..16 {
        race(seed).await;
    }
}

/// A candidate of [`race`]: its identity, its cancellation, its run.
type Running = (String, CancellationToken, Run);

/// Five candidates that start together on an empty lease with 50 ms answers, then ten
/// minutes of partitions, hung requests and replaced candidates.
async fn race(seed: u64) {
    fastrand::seed(seed);
    let mut rng = fastrand::Rng::with_seed(seed);
    let (lease, timeline) = (MemoryLease::new(), Timeline::new());
    lease.set_latency(Duration::from_millis(50));
    let mut running: Vec<Running> = Vec::new();
    let mut next_id = 0;
    let mut start = |running: &mut Vec<_>| {
        let id = format!("c{next_id}");
        next_id += 1;
        let cancel = CancellationToken::new();
        let config = LeaderElectionConfig {
            release_on_cancel: next_id % 2 == 0,
            ..LeaderElectionConfig::default()
        };
        let run = spawn_run(&candidate_with(&lease, &id, &timeline, config), &cancel);
        running.push((id, cancel, run));
    };
    for _ in 0..5 {
        start(&mut running);
    }
    let mut faults: Vec<(Duration, String)> = Vec::new();
    while timeline.now() < secs(600) {
        tokio::time::sleep(Duration::from_millis(rng.u64(500..5000))).await;
        faults.retain(|(heal_at, id)| {
            let due = *heal_at <= timeline.now();
            if due {
                lease.set_fault_for(id, Fault::None);
            }
            !due
        });
        let i = rng.usize(..running.len());
        match rng.u8(..3) {
            0 => {
                let fault = if rng.bool() {
                    Fault::Unreachable
                } else {
                    Fault::Hang
                };
                lease.set_fault_for(&running[i].0, fault);
                faults.push((timeline.now() + secs(rng.u64(1..30)), running[i].0.clone()));
            }
            1 => {
                let (_, cancel, run) = running.remove(i);
                cancel.cancel();
                run.await.unwrap().unwrap();
                start(&mut running);
            }
            _ => {}
        }
    }
    for (_, cancel, run) in running {
        cancel.cancel();
        run.await.unwrap().unwrap();
    }
    let intervals = timeline.intervals();
    assert!(
        intervals.len() >= 10,
        "seed {seed}: only {} terms",
        intervals.len()
    );
    timeline.assert_no_overlap();
}

#[tokio::test(start_paused = true)]
async fn goes_back_to_waiting_after_a_lost_term_and_leads_again() {
    let (lease, timeline) = (MemoryLease::new(), Timeline::new());
    let a = candidate(&lease, "a", &timeline);
    let b = candidate_with(&lease, "b", &timeline, releasing());
    let (stop_a, stop_b) = (CancellationToken::new(), CancellationToken::new());
    let terms = Arc::new(Mutex::new(0));
    let run_a = {
        let terms = Arc::clone(&terms);
        spawn_run_with(&a, &stop_a, move |l| {
            *terms.lock().unwrap() += 1;
            lead(l)
        })
    };
    until(&timeline, secs(1)).await;
    let run_b = spawn_term(&b, &stop_b);

    cut_off(&lease, &timeline, "a", secs(31), secs(50)).await;
    assert_eq!(timeline.starts("b").len(), 1);
    until(&timeline, secs(60)).await;
    stop_b.cancel();
    assert_eq!(run_b.await.unwrap().unwrap(), TermEnd::Cancelled);
    until(&timeline, secs(60) + MAX_RETRY_WAIT).await;
    assert_eq!(timeline.starts("a").len(), 2);
    assert_eq!(*terms.lock().unwrap(), 2, "the work ran once per term");
    assert!(a.is_leader());
    timeline.assert_no_overlap();
    stop_a.cancel();
    assert_eq!(run_a.await.unwrap().unwrap(), TermEnd::Cancelled);
}

#[tokio::test(start_paused = true)]
async fn work_that_returns_ends_the_term_and_releases_the_lease() {
    let (lease, timeline) = (MemoryLease::new(), Timeline::new());
    let a = candidate_with(&lease, "a", &timeline, releasing());
    let end = a
        .run(&CancellationToken::new(), |_| async {
            tokio::time::sleep(secs(5)).await;
        })
        .await
        .unwrap();
    assert_eq!(end, TermEnd::WorkReturned);
    assert_eq!(timeline.stops("a"), [secs(5)]);
    assert_eq!(lease.record().unwrap().holder_identity, "");
    assert_eq!(timeline.new_leaders("a"), ["a", ""]);
}

#[tokio::test(start_paused = true)]
async fn the_health_check_fails_only_for_a_holder_that_has_not_renewed_past_its_lease() {
    let (lease, timeline) = (MemoryLease::new(), Timeline::new());
    let (a, b) = (
        candidate(&lease, "a", &timeline),
        candidate(&lease, "b", &timeline),
    );
    let health = crate::HealthzAdaptor::new(secs(5));
    health.set_leader_election(&a);
    let cancel = CancellationToken::new();
    let runs = [spawn_run(&a, &cancel), spawn_run(&b, &cancel)];

    until(&timeline, secs(31)).await;
    assert!(health.check().is_ok() && b.check(secs(0)).is_ok());
    // Every replica loses the server: a steps down at 40 s but the last record it saw (at
    // 30 s) still names it; past 30 + 15 + 5 s it is unhealthy, the standby never is.
    lease.set_fault(Fault::Unreachable);
    until(&timeline, secs(49)).await;
    assert!(health.check().is_ok());
    until(&timeline, secs(51)).await;
    assert!(matches!(
        health.check(),
        Err(Error::LeaseNotRenewed { since, .. }) if since == secs(21)
    ));
    assert!(b.check(secs(0)).is_ok());
    // The server is back: a reads the record again (and takes it again, unless b is
    // first), so it is healthy again.
    lease.set_fault(Fault::None);
    until(&timeline, secs(52) + MAX_RETRY_WAIT).await;
    assert!(a.is_leader() ^ b.is_leader());
    assert!(health.check().is_ok());
    cancel.cancel();
    for r in runs {
        r.await.unwrap().unwrap();
    }
}

#[derive(Clone, Default)]
struct Counting(Arc<Mutex<Vec<&'static str>>>);

impl Counting {
    fn count(&self, what: &str) -> usize {
        self.0
            .lock()
            .unwrap()
            .iter()
            .filter(|w| **w == what)
            .count()
    }

    fn all(&self) -> Vec<&'static str> {
        self.0.lock().unwrap().clone()
    }
}

impl MetricsProvider for Counting {
    fn new_leader_metric(&self) -> Box<dyn LeaderMetric> {
        Box::new(self.clone())
    }
}

impl LeaderMetric for Counting {
    fn on(&self, name: &str) {
        assert_eq!(name, "memory/lease");
        self.0.lock().unwrap().push("on");
    }
    fn off(&self, _: &str) {
        self.0.lock().unwrap().push("off");
    }
    fn slowpath_exercised(&self, _: &str) {
        self.0.lock().unwrap().push("slowpath");
    }
    fn transition(&self, _: &str) {
        self.0.lock().unwrap().push("transition");
    }
}

/// The candidate "a" with metrics that count.
fn counted(lease: &MemoryLease, timeline: &Timeline) -> (LeaderElector, Counting) {
    let metrics = Counting::default();
    let a = LeaderElector::builder(lease.lock("a"))
        .clock(timeline.clock.clone())
        .metrics_provider(Arc::new(metrics.clone()))
        .build()
        .unwrap();
    (a, metrics)
}

#[tokio::test(start_paused = true)]
async fn metrics_follow_leadership_and_count_transitions() {
    let (lease, timeline) = (MemoryLease::new(), Timeline::new());
    let (a, metrics) = counted(&lease, &timeline);
    assert_eq!(metrics.all(), ["off"], "the gauge exists from the start");
    let cancel = CancellationToken::new();
    let run = spawn_run(&a, &cancel);
    until(&timeline, secs(5)).await;
    assert_eq!(metrics.all(), ["off", "on", "transition"]);
    lease.put(held_by("intruder", None));
    until(&timeline, secs(25)).await;
    assert_eq!(
        metrics.all(),
        ["off", "on", "transition", "off", "on", "transition"],
        "lost at 6 s, took the lease again 15 s later"
    );
    cancel.cancel();
    run.await.unwrap().unwrap();
    assert_eq!(metrics.all().last(), Some(&"off"));
}

#[tokio::test(start_paused = true)]
async fn reports_each_new_leader_once() {
    let (lease, timeline) = (MemoryLease::new(), Timeline::new());
    lease.put(held_by("x", None));
    let a = candidate_with(&lease, "a", &timeline, releasing());
    let cancel = CancellationToken::new();
    let run = spawn_run(&a, &cancel);
    until(&timeline, secs(30)).await;
    assert_eq!(a.get_leader().as_deref(), Some("a"));
    cancel.cancel();
    run.await.unwrap().unwrap();
    assert_eq!(timeline.new_leaders("a"), ["x", "a", ""]);
    assert_eq!(a.get_leader(), None, "released");
}

#[tokio::test(start_paused = true)]
async fn one_elector_runs_once_at_a_time() {
    let (lease, timeline) = (MemoryLease::new(), Timeline::new());
    let a = candidate(&lease, "a", &timeline);
    let cancel = CancellationToken::new();
    let run = spawn_run(&a, &cancel);
    tokio::time::sleep(secs(1)).await;
    let second = a.run_once(&cancel, |_| async {}).await;
    assert!(matches!(second, Err(Error::AlreadyRunning)), "{second:?}");
    cancel.cancel();
    run.await.unwrap().unwrap();
    // Once the first run ended, the elector may run again.
    let again = a.run_once(&CancellationToken::new(), |_| async {}).await;
    assert_eq!(again.unwrap(), TermEnd::WorkReturned);
}

#[tokio::test(start_paused = true)]
async fn a_cancelled_standby_returns_without_having_led() {
    let (lease, timeline) = (MemoryLease::new(), Timeline::new());
    lease.put(held_by("x", None));
    let a = candidate(&lease, "a", &timeline);
    let cancel = CancellationToken::new();
    let run = spawn_run(&a, &cancel);
    until(&timeline, secs(10)).await;
    cancel.cancel();
    assert_eq!(run.await.unwrap().unwrap(), TermEnd::Cancelled);
    assert!(
        timeline.stops("a").is_empty(),
        "stopped_leading only after leading"
    );
}

#[test]
fn an_empty_identity_is_refused() {
    let lease = MemoryLease::new();
    let err = LeaderElector::new(LeaderElectionConfig::default(), lease.lock("")).unwrap_err();
    assert!(matches!(err, Error::EmptyIdentity));
    let bad = LeaderElectionConfig {
        renew_deadline: LEASE,
        ..LeaderElectionConfig::default()
    };
    let err = LeaderElector::new(bad, lease.lock("a")).unwrap_err();
    assert!(matches!(err, Error::InvalidConfig(_)));
}

#[tokio::test(start_paused = true)]
async fn status_shows_the_holder_the_records_times_and_the_expiry_on_this_clock() {
    let (lease, timeline) = (MemoryLease::new(), Timeline::new());
    let config = LeaderElectionConfig {
        name: "status".into(),
        ..LeaderElectionConfig::default()
    };
    let a = candidate_with(&lease, "a", &timeline, config.clone());
    let b = candidate_with(&lease, "b", &timeline, config);
    let before = a.status();
    assert_eq!(
        (before.name.as_str(), before.identity.as_str()),
        ("status", "a")
    );
    assert_eq!(
        (before.holder.as_deref(), before.is_me, before.held),
        (None, false, false)
    );
    assert_eq!((before.renew_time, before.expires_in), (None, None));

    let cancel = CancellationToken::new();
    let runs = [spawn_term(&a, &cancel), spawn_term(&b, &cancel)];
    until(&timeline, secs(5)).await;
    let wall = timeline.clock.wall_now();
    let leader = a.status();
    assert_eq!(leader.holder.as_deref(), Some("a"));
    assert!(leader.is_me && leader.held);
    assert_eq!(leader.acquire_time, Some(wall - secs(5)));
    assert_eq!(leader.renew_time, Some(wall - secs(1)), "renewed at 4 s");
    assert_eq!(leader.observed_time, Some(wall - secs(1)), "its own write");
    assert_eq!(leader.lease_duration, Some(LEASE));
    assert_eq!(leader.transitions, Some(0));
    assert_eq!(leader.expires_in, Some(secs(14)));

    // The standby reads the record at its retries (every 2 to 4.4 s): what it saw may lag.
    let standby = b.status();
    assert_eq!(standby.holder.as_deref(), Some("a"));
    assert!(!standby.is_me && !standby.held);
    let (renewed, seen) = (standby.renew_time.unwrap(), standby.observed_time.unwrap());
    assert!(renewed <= leader.renew_time.unwrap());
    assert!(renewed <= seen && seen <= wall, "seen after it was written");
    let since_seen = wall.duration_since(seen).unwrap();
    assert_eq!(
        standby.expires_in,
        Some(LEASE - since_seen),
        "15 s after it saw it"
    );

    let json = serde_json::to_value(&leader).unwrap();
    assert_eq!(json["lease_duration"], 15.0);
    assert_eq!(json["expires_in"], 14.0);
    assert_eq!(json["holder"], "a");
    let renew = json["renew_time"].as_str().unwrap();
    let parsed: k8s_openapi::jiff::Timestamp = renew.parse().unwrap();
    assert_eq!(
        SystemTime::from(parsed),
        wall - secs(1),
        "RFC 3339: {renew}"
    );
    assert!(renew.ends_with('Z'), "{renew}");
    assert_eq!(
        serde_json::to_value(&before).unwrap()["renew_time"],
        serde_json::Value::Null
    );

    cancel.cancel();
    for run in runs {
        run.await.unwrap().unwrap();
    }
}

/// A lock and a clock behind decorators that forward every method and nothing else (what a
/// user's metrics or logging wrapper is): every `Lock` and `Clock` method the election
/// depends on is required, so the decorated elector renews on the same path at the same
/// times as the plain one.
#[tokio::test(start_paused = true)]
async fn an_elector_over_a_forwarding_lock_and_clock_renews_as_over_the_plain_ones() {
    struct ForwardLock<L>(L);
    impl<L: crate::Lock> crate::Lock for ForwardLock<L> {
        crate::forward_lock!(0: all);
    }
    #[derive(Debug)]
    struct ForwardClock(FakeClock);
    impl Clock for ForwardClock {
        kinformer_core::forward_clock!(0: all);
    }

    let (lease, timeline) = (MemoryLease::new(), Timeline::new());
    let a = LeaderElector::builder(ForwardLock(lease.lock("a")))
        .clock(ForwardClock(timeline.clock.clone()))
        .callbacks(Recorder {
            id: "a".to_owned(),
            timeline: timeline.clone(),
        })
        .build()
        .unwrap();
    let cancel = CancellationToken::new();
    let run = spawn_term(&a, &cancel);

    until(&timeline, secs(61)).await;
    assert_eq!(timeline.starts("a"), [secs(0)]);
    let calls: Vec<_> = lease.calls().into_iter().map(|(_, c)| c).collect();
    assert_eq!(calls[..2], ["get", "create"]);
    assert!(calls[2..].iter().all(|c| *c == "update"), "{calls:?}");
    assert_eq!(calls.len(), 2 + 30, "one renewal every 2 s for 60 s");
    let record = lease.record().unwrap();
    let wall = timeline.clock.wall_now();
    assert_eq!(record.renew_time, Some(wall - secs(1)));

    cancel.cancel();
    run.await.unwrap().unwrap();
}
