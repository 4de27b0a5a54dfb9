//! The Kubebuilder book's CronJob controller on kinformer: a `CronJob` custom resource that
//! creates Jobs on a schedule, finds its Jobs through a namespaced owner index, keeps
//! `status.active` and `status.lastScheduleTime`, prunes its history, honours `suspend` and
//! the concurrency policy, and requeues itself until the next run. Written with what a
//! controller-runtime user reaches for: a [`Manager`], a cache-reading [`Client`] per kind
//! (`r.Get`, `r.List(InNamespace, MatchingFields)`, `r.Create`, `r.Delete`,
//! `r.Status().Patch`), `IndexFunc::namespaced` (`IndexField`) and read-your-writes, so that
//! a run's Job is never created twice.
//!
//! ```text
//! cargo run --example cronjob_controller                 # local control plane, until Ctrl-C
//! cargo run --example cronjob_controller -- --demo       # scripted: runs, forbid, history, suspend
//! cargo run --example cronjob_controller -- --kubeconfig ~/.kube/config [-n default]
//! ```
//!
//! It installs its CustomResourceDefinition (`cronjobs.batch.tutorial.kinformer.dev`) if
//! missing. The local control plane runs no kube-controller-manager, so its Jobs never run:
//! the demo marks them finished itself, as a Job controller would.
//!
//! Schedules: the five cron fields, each `*`, `*/n` or a number (minute, hour, day of month,
//! month, day of week, in UTC), or `@every <n>s|m|h` (robfig/cron's constant delay).
#![allow(clippy::print_stdout)]

#[path = "common/mod.rs"]
mod common;

use std::sync::Arc;
use std::time::Duration;

pub use common::Output;
use common::{Args, BoxError, ensure_namespace, start};
use k8s_openapi::api::batch::v1::{Job, JobTemplateSpec};
use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use k8s_openapi::jiff::{SignedDuration, Timestamp, tz::TimeZone};
use kinformer::cache_client::{Client, ignore_already_exists, ignore_not_found};
use kinformer::compact_store::{Cached, KubeObject};
use kinformer::controller::{Action, Context};
use kinformer::events::get_reference;
use kinformer::indexer::IndexFunc;
use kinformer::manager::Manager;
use kinformer::owner::controller_ref;
use kinformer::prelude::*;
use kube::{CustomResource, CustomResourceExt, Resource, ResourceExt};
use serde::{Deserialize, Serialize};

/// What a CronJob asks for (the Kubebuilder book's `CronJobSpec`).
#[derive(CustomResource, Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
#[kube(
    group = "batch.tutorial.kinformer.dev",
    version = "v1",
    kind = "CronJob",
    namespaced,
    status = "CronJobStatus",
    schema = "disabled"
)]
#[serde(rename_all = "camelCase")]
pub struct CronJobSpec {
    /// When to run: five cron fields, or `@every <duration>`.
    pub schedule: String,
    /// A run missed by more than this many seconds is skipped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub starting_deadline_seconds: Option<i64>,
    /// What to do when a run is due while the last one still runs.
    #[serde(default)]
    pub concurrency_policy: ConcurrencyPolicy,
    /// No new runs while true (running ones go on).
    #[serde(default)]
    pub suspend: bool,
    /// The Job each run creates.
    pub job_template: JobTemplateSpec,
    /// How many finished Jobs of each kind to keep.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub successful_jobs_history_limit: Option<i32>,
    /// See `successful_jobs_history_limit`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failed_jobs_history_limit: Option<i32>,
}

/// `Allow` (default), `Forbid` (skip a run while one runs) or `Replace` (stop it first).
#[derive(Clone, Copy, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
pub enum ConcurrencyPolicy {
    /// Runs may overlap.
    #[default]
    Allow,
    /// A due run is skipped while one runs.
    Forbid,
    /// A due run replaces the one that runs.
    Replace,
}

/// What the controller last saw.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct CronJobStatus {
    /// The Jobs running now.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub active: Vec<ObjectReference>,
    /// When the last run was scheduled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_schedule_time: Option<Time>,
}

/// The annotation a run's Job carries: when it was scheduled.
const SCHEDULED_AT: &str = "batch.tutorial.kinformer.dev/scheduled-at";
/// The Jobs' index: the name of the CronJob that controls each, per namespace.
const JOB_OWNER: &str = "cronjob-owner";

/// A schedule: the next time after a given one.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Schedule {
    Every(SignedDuration),
    Cron([Field; 5]),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Field {
    Any,
    Step(i64),
    At(i64),
}

impl Field {
    fn parse(s: &str) -> Option<Self> {
        match s {
            "*" => Some(Self::Any),
            _ => match s.strip_prefix("*/") {
                Some(n) => n.parse().ok().filter(|n| *n > 0).map(Self::Step),
                None => s.parse().ok().map(Self::At),
            },
        }
    }

    fn matches(self, value: i64) -> bool {
        match self {
            Self::Any => true,
            Self::Step(n) => value % n == 0,
            Self::At(v) => value == v,
        }
    }
}

impl Schedule {
    fn parse(s: &str) -> Result<Self, String> {
        if let Some(every) = s.strip_prefix("@every ") {
            let (n, unit) = every.split_at(every.len().saturating_sub(1));
            let n: i64 = n.parse().map_err(|_| format!("bad @every: {s}"))?;
            let secs = match unit {
                "s" => n,
                "m" => n * 60,
                "h" => n * 3600,
                _ => return Err(format!("bad @every unit: {s}")),
            };
            return (secs > 0)
                .then(|| Self::Every(SignedDuration::from_secs(secs)))
                .ok_or_else(|| format!("@every must be positive: {s}"));
        }
        let fields: Vec<Field> = s
            .split_whitespace()
            .map(Field::parse)
            .collect::<Option<_>>()
            .ok_or_else(|| format!("bad schedule: {s}"))?;
        let fields: [Field; 5] = fields
            .try_into()
            .map_err(|_| format!("a schedule has five fields: {s}"))?;
        Ok(Self::Cron(fields))
    }

    /// The first time strictly after `t` (whole seconds), within a year.
    fn next(&self, t: Timestamp) -> Option<Timestamp> {
        let t = Timestamp::from_second(t.as_second()).ok()?;
        match self {
            Self::Every(d) => t.checked_add(*d).ok(),
            Self::Cron([minute, hour, day, month, weekday]) => {
                let mut at =
                    Timestamp::from_second(t.as_second() - t.as_second() % 60 + 60).ok()?;
                for _ in 0..366 * 24 * 60 {
                    let c = at.to_zoned(TimeZone::UTC);
                    if minute.matches(c.minute().into())
                        && hour.matches(c.hour().into())
                        && day.matches(c.day().into())
                        && month.matches(c.month().into())
                        && weekday.matches(c.weekday().to_sunday_zero_offset().into())
                    {
                        return Some(at);
                    }
                    at = at.checked_add(SignedDuration::from_secs(60)).ok()?;
                }
                None
            }
        }
    }
}

/// The last run due at or before `now` since `earliest` (none if none is), and the next run
/// after `now`: the Kubebuilder book's `getNextSchedule`, which gives up past 100 missed runs.
fn next_runs(
    schedule: &Schedule,
    earliest: Timestamp,
    now: Timestamp,
) -> Result<(Option<Timestamp>, Timestamp), String> {
    let mut missed = None;
    let mut starts = 0;
    let mut t = schedule.next(earliest);
    while let Some(at) = t.filter(|at| *at <= now) {
        missed = Some(at);
        starts += 1;
        if starts > 100 {
            return Err(
                "more than 100 missed runs: check the clock or set a starting deadline".into(),
            );
        }
        t = schedule.next(at);
    }
    let next = schedule.next(now).ok_or("no next run within a year")?;
    Ok((missed, next))
}

/// What every reconcile shares.
pub struct Ctx {
    cronjobs: Client<CronJob, CronJob>,
    jobs: Client<Job>,
    /// Now, for the schedule (a test may move it).
    now: fn() -> Timestamp,
    out: Output,
}

/// Whether the Job has finished, and how: the Kubebuilder book's `isJobFinished`.
fn finished(job: &Cached<Job>) -> Option<&'static str> {
    let conditions = job.status().and_then(|s| s.conditions())?;
    conditions
        .iter()
        .find_map(|c| match (c.type_(), c.status()) {
            ("Complete", "True") => Some("Complete"),
            ("Failed", "True") => Some("Failed"),
            _ => None,
        })
}

/// When the Job's run was scheduled (its annotation).
fn scheduled_at(job: &Cached<Job>) -> Option<Timestamp> {
    job.annotations()
        .find(|(k, _)| *k == SCHEDULED_AT)
        .and_then(|(_, v)| v.parse().ok())
}

/// Reconciles one CronJob: the Kubebuilder book's `Reconcile`, step for step.
pub async fn reconcile(key: ObjectKey, ctx: Context<Ctx>) -> Result<Action, BoxError> {
    let ns = key.namespace().unwrap_or_default();
    // 1: the CronJob, from the cache, decoded to change its status.
    let Some(cronjob) = ctx.cronjobs.get_object(ns, key.name())? else {
        return Ok(Action::Done);
    };
    // 2: its Jobs, through the namespaced owner index (`MatchingFields{jobOwnerKey: name}`).
    let jobs = ctx.jobs.by_field(ns, JOB_OWNER, key.name())?;
    let (mut active, mut successful, mut failed) = (Vec::new(), Vec::new(), Vec::new());
    for job in &jobs {
        match finished(job) {
            None => active.push(Arc::clone(job)),
            Some("Complete") => successful.push(Arc::clone(job)),
            Some(_) => failed.push(Arc::clone(job)),
        }
    }
    let most_recent = jobs.iter().filter_map(|j| scheduled_at(j)).max();

    // 3: the status, written only if it changed (`active` emptied is written as null).
    let mut updated = cronjob.clone();
    let status = updated.status.get_or_insert_with(Default::default);
    status.last_schedule_time = most_recent.map(Time);
    status.active = active.iter().map(|job| get_reference(&**job)).collect();
    status.active.sort_by(|a, b| a.name.cmp(&b.name));
    if ctx
        .cronjobs
        .write_status(&ctx, &cronjob, &updated)
        .await?
        .is_some()
    {
        ctx.out.line(format!(
            "{}: status: {} active",
            key.name(),
            updated.status.as_ref().map_or(0, |s| s.active.len())
        ));
    }

    // 4: the history, oldest first beyond the limits.
    for (finished, limit) in [
        (&mut failed, cronjob.spec.failed_jobs_history_limit),
        (&mut successful, cronjob.spec.successful_jobs_history_limit),
    ] {
        let Some(limit) = limit.and_then(|l| usize::try_from(l).ok()) else {
            continue;
        };
        finished.sort_by_key(|job| scheduled_at(job));
        let excess = finished.len().saturating_sub(limit);
        for old in &finished[..excess] {
            let name = old.object_name().unwrap_or_default();
            ignore_not_found(ctx.jobs.delete(&ctx, ns, name).await)?;
            ctx.out
                .line(format!("{}: old job {name} deleted", key.name()));
        }
    }

    // 5: suspended: no new runs.
    if cronjob.spec.suspend {
        return Ok(Action::Done);
    }

    // 6: the run that is due, if any, and the next one.
    let schedule = Schedule::parse(&cronjob.spec.schedule)?;
    let now = (ctx.now)();
    let created = cronjob
        .meta()
        .creation_timestamp
        .as_ref()
        .map_or(now, |t| t.0);
    // From the status as this reconcile wrote it (the book's in-memory `cronJob.Status`).
    let earliest = updated
        .status
        .as_ref()
        .and_then(|s| s.last_schedule_time.as_ref())
        .map_or(created, |t| t.0);
    let earliest = match cronjob.spec.starting_deadline_seconds {
        Some(deadline) => earliest.max(
            now.checked_sub(SignedDuration::from_secs(deadline))
                .unwrap_or(earliest),
        ),
        None => earliest,
    };
    let (missed, next) = next_runs(&schedule, earliest, now)?;
    let wait = Duration::try_from(next.duration_since(now)).unwrap_or(Duration::ZERO);
    let scheduled = Action::RequeueAfter(wait);
    let Some(missed) = missed else {
        return Ok(scheduled);
    };
    if cronjob
        .spec
        .starting_deadline_seconds
        .is_some_and(|deadline| {
            missed
                .checked_add(SignedDuration::from_secs(deadline))
                .is_ok_and(|latest| latest < now)
        })
    {
        ctx.out.line(format!(
            "{}: run of {missed} missed its deadline",
            key.name()
        ));
        return Ok(scheduled);
    }

    // 7: the concurrency policy.
    match cronjob.spec.concurrency_policy {
        ConcurrencyPolicy::Forbid if !active.is_empty() => {
            ctx.out.line(format!(
                "{}: run of {missed} skipped: one still runs",
                key.name()
            ));
            return Ok(scheduled);
        }
        ConcurrencyPolicy::Replace => {
            for job in &active {
                let name = job.object_name().unwrap_or_default();
                ignore_not_found(ctx.jobs.delete(&ctx, ns, name).await)?;
            }
        }
        _ => {}
    }

    // 8: the run's Job, named after its time: a second attempt finds it taken.
    let job = Job {
        metadata: ObjectMeta {
            name: Some(format!("{}-{}", key.name(), missed.as_second())),
            namespace: Some(ns.to_owned()),
            labels: cronjob
                .spec
                .job_template
                .metadata
                .as_ref()
                .and_then(|m| m.labels.clone()),
            annotations: Some(
                cronjob
                    .spec
                    .job_template
                    .metadata
                    .as_ref()
                    .and_then(|m| m.annotations.clone())
                    .unwrap_or_default()
                    .into_iter()
                    .chain([(SCHEDULED_AT.to_owned(), missed.to_string())])
                    .collect(),
            ),
            owner_references: Some(vec![controller_ref(&cronjob)?]),
            ..ObjectMeta::default()
        },
        spec: cronjob.spec.job_template.spec.clone(),
        status: None,
    };
    // Read-your-writes keeps this from happening twice: the next reconcile of this CronJob
    // waits until the Job cache has the Job created here.
    let outcome = match ignore_already_exists(ctx.jobs.create(&ctx, &job).await)? {
        Some(_) => "created",
        None => "already exists",
    };
    ctx.out
        .line(format!("{}: job {} {outcome}", key.name(), job.name_any()));
    Ok(scheduled)
}

/// The CRD, from the derived type, with a schema that keeps every field (the type's
/// `schema = "disabled"` leaves it out) and the status subresource.
pub fn crd() -> Result<CustomResourceDefinition, BoxError> {
    let mut crd = CronJob::crd();
    for version in &mut crd.spec.versions {
        version.schema = Some(serde_json::from_value(serde_json::json!({
            "openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}
        }))?);
    }
    Ok(crd)
}

/// The controller: a manager with the CronJob and Job informers, the owner index, one
/// controller. `now` is the schedule's clock.
pub async fn manager(
    client: kube::Client,
    namespace: &str,
    now: fn() -> Timestamp,
    out: &Output,
) -> Result<Manager, BoxError> {
    kinformer_testenv::install_crd(&client, &crd()?).await?;
    let mut manager = Manager::builder(client.clone())
        .namespace(namespace)
        .build();
    // A custom resource has no generated views: its few objects are kept decoded.
    let cronjobs = manager.factory().decoded_informer::<CronJob>();
    let jobs = manager.factory().informer::<Job>();
    // controller-runtime's `IndexField(ctx, &Job{}, jobOwnerKey, ...)`.
    jobs.add_indexers(
        [(
            JOB_OWNER.to_owned(),
            IndexFunc::namespaced(|job: &Cached<Job>| {
                job.owner_references()
                    .filter(|o| o.controller == Some(true) && o.kind == "CronJob")
                    .map(|o| o.name.to_owned())
                    .collect()
            }),
        )]
        .into(),
    )?;
    let controller = Controller::<ObjectKey>::new("cronjob");
    controller.watch(&cronjobs)?;
    controller.owns::<CronJob, _>(&jobs)?;
    let ctx = Ctx {
        cronjobs: Client::new(client.clone(), &cronjobs),
        jobs: Client::new(client, &jobs),
        now,
        out: out.clone(),
    };
    manager.add(controller.into_runnable(reconcile, ctx));
    Ok(manager)
}

#[tokio::main]
async fn main() -> Result<(), BoxError> {
    let args = Args::parse()?;
    let cluster = start(&args).await?;
    let out = Output::stdout();
    let namespace = args.namespace.clone().unwrap_or_else(|| "default".into());
    if args.has("--demo") {
        return demo(cluster.client.clone(), &namespace, &out).await;
    }
    let manager = manager(cluster.client.clone(), &namespace, Timestamp::now, &out).await?;
    let shutdown = CancellationToken::new();
    tokio::spawn({
        let shutdown = shutdown.clone();
        async move {
            let _ = tokio::signal::ctrl_c().await;
            shutdown.cancel();
        }
    });
    out.line(format!("watching cronjobs in {namespace}; Ctrl-C stops"));
    manager.run(shutdown).await?;
    Ok(())
}

/// The scripted run: a CronJob every 2 s that forbids overlap and keeps one finished Job.
pub async fn demo(client: kube::Client, namespace: &str, out: &Output) -> Result<(), BoxError> {
    ensure_namespace(&client, namespace).await?;
    let manager = manager(client.clone(), namespace, Timestamp::now, out).await?;
    let shutdown = CancellationToken::new();
    let running = tokio::spawn(manager.run(shutdown.clone()));
    let result = scenario(&client, namespace, out).await;
    shutdown.cancel();
    running.await??;
    result
}

async fn scenario(client: &kube::Client, ns: &str, out: &Output) -> Result<(), BoxError> {
    let cronjobs: kube::Api<CronJob> = kube::Api::namespaced(client.clone(), ns);
    let jobs: kube::Api<Job> = kube::Api::namespaced(client.clone(), ns);
    let template: JobTemplateSpec = serde_json::from_value(serde_json::json!({
        "spec": {"template": {"spec": {
            "restartPolicy": "OnFailure",
            "containers": [{"name": "backup", "image": "busybox", "args": ["date"]}]
        }}}
    }))?;
    let mut cronjob = CronJob::new(
        "backup",
        CronJobSpec {
            schedule: "@every 2s".into(),
            concurrency_policy: ConcurrencyPolicy::Forbid,
            job_template: template,
            successful_jobs_history_limit: Some(1),
            ..CronJobSpec::default()
        },
    );
    cronjob.metadata.namespace = Some(ns.to_owned());
    cronjobs.create(&Default::default(), &cronjob).await?;
    out.line("created cronjob backup (@every 2s, Forbid, keep 1 successful)".into());

    let names = || async {
        let mut names: Vec<String> = jobs
            .list(&Default::default())
            .await
            .map(|l| l.items.iter().map(ResourceExt::name_any).collect())
            .unwrap_or_default();
        names.sort();
        names
    };
    let active = || async {
        cronjobs
            .get("backup")
            .await
            .ok()
            .and_then(|c| c.status)
            .map(|s| {
                s.active
                    .iter()
                    .filter_map(|r| r.name.clone())
                    .collect::<Vec<_>>()
            })
            .unwrap_or_default()
    };
    common::wait_for_async("the first run's job", || async { names().await.len() == 1 }).await?;
    let first = names().await.remove(0);
    common::wait_for_async("status.active = [first]", || async {
        active().await == [first.clone()]
    })
    .await?;
    out.line(format!("first run: job {first}; status.active = [{first}]"));

    // Forbid: runs fall due while the first job runs; none starts.
    tokio::time::sleep(Duration::from_secs(5)).await;
    let now = names().await;
    if now.len() != 1 {
        return Err(format!("Forbid let another run start: {now:?}").into());
    }
    out.line("forbid: 5 s later, still one job".into());

    // The first job finishes: the next run starts, and `active` follows.
    complete(&jobs, &first).await?;
    common::wait_for_async("a second run", || async { names().await.len() == 2 }).await?;
    let second = names()
        .await
        .into_iter()
        .find(|n| *n != first)
        .unwrap_or_default();
    common::wait_for_async("status.active = [second]", || async {
        active().await == [second.clone()]
    })
    .await?;
    out.line(format!(
        "first job complete: second run {second}; status.active = [{second}]"
    ));

    // The second finishes: the third starts, and the first (history limit 1) is deleted.
    complete(&jobs, &second).await?;
    common::wait_for_async("the first job pruned and a third run", || async {
        let now = names().await;
        now.len() == 2 && !now.contains(&first) && now.contains(&second)
    })
    .await?;
    out.line("second job complete: third run started; first job deleted (history limit 1)".into());

    // Suspended: no more runs, even once the third finishes.
    let suspend = serde_json::json!({"spec": {"suspend": true}});
    cronjobs
        .patch(
            "backup",
            &Default::default(),
            &kube::api::Patch::Merge(&suspend),
        )
        .await?;
    let third = names()
        .await
        .into_iter()
        .find(|n| *n != second)
        .unwrap_or_default();
    complete(&jobs, &third).await?;
    common::wait_for_async("status.active = []", || async { active().await.is_empty() }).await?;
    tokio::time::sleep(Duration::from_secs(5)).await;
    let now = names().await;
    if now.len() > 2 || now.iter().any(|n| *n != second && *n != third) {
        return Err(format!("a suspended cronjob ran: {now:?}").into());
    }
    out.line("suspended: third job complete, status.active = [], no run in 5 s".into());
    Ok(())
}

/// Marks the Job finished as a Job controller would (the local control plane runs none).
async fn complete(jobs: &kube::Api<Job>, name: &str) -> Result<(), BoxError> {
    let now = Timestamp::now().to_string();
    let status = serde_json::json!({"status": {
        "startTime": now, "completionTime": now, "succeeded": 1,
        "conditions": [
            {"type": "SuccessCriteriaMet", "status": "True", "lastTransitionTime": now},
            {"type": "Complete", "status": "True", "lastTransitionTime": now},
        ],
    }});
    jobs.patch_status(name, &Default::default(), &kube::api::Patch::Merge(&status))
        .await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schedules_parse_and_step() {
        let t: Timestamp = "2026-12-05T10:07:30Z".parse().unwrap();
        let every = Schedule::parse("@every 2s").unwrap();
        assert_eq!(every.next(t).unwrap().to_string(), "2026-12-05T10:07:32Z");
        let quarter = Schedule::parse("*/15 * * * *").unwrap();
        assert_eq!(quarter.next(t).unwrap().to_string(), "2026-12-05T10:15:00Z");
        let nightly = Schedule::parse("0 3 * * *").unwrap();
        assert_eq!(nightly.next(t).unwrap().to_string(), "2026-12-06T03:00:00Z");
        assert!(Schedule::parse("* * *").is_err());
        assert!(Schedule::parse("@every 0s").is_err());
        let (missed, next) = next_runs(&every, t, "2026-12-05T10:07:35Z".parse().unwrap()).unwrap();
        assert_eq!(missed.unwrap().to_string(), "2026-12-05T10:07:34Z");
        assert_eq!(next.to_string(), "2026-12-05T10:07:37Z");
    }
}
