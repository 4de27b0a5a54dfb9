//! Recordings made up from a seed, of the shape a real server sends: a first list, then
//! watches of adds, updates and deletes with bookmarks, each closed by the server after a
//! while and re-watched from where it stopped. For tests and benches that need a stream
//! of a given size without a cluster; [`Recorder`](crate::Recorder) makes real ones.

use std::time::Duration;

use serde_json::json;

use crate::format::{
    Answer, Call, End, Event, Frame, Header, Item, ListRequest, Page, Recording, Request,
    WatchRequest,
};

/// A made-up stream of changes to objects of one kind (see the module docs).
///
/// ```
/// use kinformer_replay::synthetic::Churn;
/// let recording = Churn::new("v1", "Pod").objects(20).events(500).seed(3).build();
/// assert_eq!(recording.event_count(), 500);
/// ```
#[derive(Clone, Debug)]
pub struct Churn {
    api_version: String,
    kind: String,
    objects: usize,
    events: usize,
    seed: u64,
    watch_len: usize,
    bookmark_every: usize,
    gap: Duration,
}

impl Churn {
    /// Objects of `api_version`/`kind` in namespace `default`: 50 listed first, 1,000
    /// events, seed 1, a re-watch every 1,000 events, a bookmark every 100, 1 ms apart.
    pub fn new(api_version: impl Into<String>, kind: impl Into<String>) -> Self {
        Self {
            api_version: api_version.into(),
            kind: kind.into(),
            objects: 50,
            events: 1000,
            seed: 1,
            watch_len: 1000,
            bookmark_every: 100,
            gap: Duration::from_millis(1),
        }
    }

    /// How many objects the first list has.
    #[must_use]
    pub fn objects(mut self, n: usize) -> Self {
        self.objects = n;
        self
    }

    /// How many object events the watches carry.
    #[must_use]
    pub fn events(mut self, n: usize) -> Self {
        self.events = n;
        self
    }

    /// The seed of the choice of changes.
    #[must_use]
    pub fn seed(mut self, seed: u64) -> Self {
        self.seed = seed;
        self
    }

    /// Events per watch before the server closes it.
    #[must_use]
    pub fn watch_len(mut self, n: usize) -> Self {
        self.watch_len = n.max(1);
        self
    }

    fn object(&self, name: &str, rv: u64, generation: u64) -> Item {
        let value = json!({
            "apiVersion": self.api_version,
            "kind": self.kind,
            "metadata": {
                "name": name,
                "namespace": "default",
                "uid": format!("uid-{name}"),
                "resourceVersion": rv.to_string(),
                "generation": generation,
                "labels": {"app": format!("app-{}", generation % 3)},
            },
            "spec": {
                "nodeName": format!("node-{}", generation % 5),
                "containers": [{"name": "main", "image": format!("example/app:{generation}")}],
            },
        });
        let raw = serde_json::value::to_raw_value(&value)
            .unwrap_or_else(|_| unreachable!("a JSON value encodes"));
        Item::new(format!("default/{name}"), rv.to_string(), raw)
    }

    /// The recording.
    pub fn build(&self) -> Recording {
        let mut rng = fastrand::Rng::with_seed(self.seed);
        let mut recording = Recording::new(Header::new(format!("synthetic {}", self.kind), true));
        let mut rv: u64 = 100;
        let mut next_name = 0usize;
        let mut live: Vec<(String, u64)> = Vec::new();
        let mut items = Vec::new();
        for _ in 0..self.objects {
            rv += 1;
            let name = format!("obj-{next_name}");
            next_name += 1;
            items.push(self.object(&name, rv, 1));
            live.push((name, 1));
        }
        let mut t = Duration::ZERO;
        recording.calls.push(Call {
            at: t,
            request: Request::List(ListRequest {
                resource_version: "0".into(),
                limit: Some(500),
                continue_token: None,
                exact: false,
            }),
            answer: Answer::Page {
                at: t + self.gap,
                page: Page {
                    resource_version: rv.to_string(),
                    continue_token: None,
                    items,
                    undecodable: Vec::new(),
                },
            },
        });
        let mut left = self.events;
        while left > 0 {
            t += self.gap * 2;
            let called = t;
            let from = rv.to_string();
            let mut frames = Vec::new();
            let mut n = 0;
            while n < self.watch_len && left > 0 {
                t += self.gap;
                rv += 1;
                let roll = rng.u32(..10);
                let event = if live.is_empty() || roll < 3 {
                    let name = format!("obj-{next_name}");
                    next_name += 1;
                    live.push((name.clone(), 1));
                    Event::Added(self.object(&name, rv, 1))
                } else if roll < 8 {
                    let at = rng.usize(..live.len());
                    live[at].1 += 1;
                    let (name, generation) = live[at].clone();
                    Event::Modified(self.object(&name, rv, generation))
                } else {
                    let (name, generation) = live.swap_remove(rng.usize(..live.len()));
                    Event::Deleted(self.object(&name, rv, generation))
                };
                frames.push(Frame::new(t, event));
                n += 1;
                left -= 1;
                if n % self.bookmark_every == 0 {
                    frames.push(Frame::new(
                        t,
                        Event::Bookmark {
                            rv: rv.to_string(),
                            initial_events_end: false,
                        },
                    ));
                }
            }
            t += self.gap;
            recording.calls.push(Call {
                at: called,
                request: Request::Watch(WatchRequest {
                    resource_version: from,
                    timeout_seconds: 300,
                    bookmarks: true,
                    send_initial_events: false,
                }),
                answer: Answer::Stream {
                    frames,
                    end: Some((t.max(called + Duration::from_secs(2)), End::Closed)),
                },
            });
            t = t.max(called + Duration::from_secs(2));
        }
        // The last watch: open and quiet, as a server between changes.
        t += self.gap;
        recording.calls.push(Call {
            at: t,
            request: Request::Watch(WatchRequest {
                resource_version: rv.to_string(),
                timeout_seconds: 300,
                bookmarks: true,
                send_initial_events: false,
            }),
            answer: Answer::Stream {
                frames: Vec::new(),
                end: None,
            },
        });
        recording
    }
}
