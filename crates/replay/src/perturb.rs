//! Perturbations: named changes to a recording that a real server or network could have
//! made, each keeping the recording one a server could have sent (the calls a client
//! following kinformer's behaviour rules makes next are answered), and [`Chaos`], which
//! picks some with a seed.

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

use crate::format::{
    Answer, Call, End, Event, Frame, Item, ListRequest, Page, RecordedError, Recording, Request,
    WatchRequest,
};
use crate::model::Follow;

/// A failure a server or the network answers a watch's start with, which a reflector backs
/// off from and re-watches after, without a relist (rule 23).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Refusal {
    /// `429 Too Many Requests`.
    TooManyRequests,
    /// The connection failed.
    Unreachable,
}

/// One named change to a [`Recording`]. Watches and lists are counted from 0 among the
/// recording's calls of their kind (`watch: 1` is the second watch call); a list is any
/// list call, a continue page included.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Perturbation {
    /// The frames of `watch` from `frame` on (and its end) arrive `by` later.
    Delay {
        /// Which watch.
        watch: usize,
        /// The first frame delayed.
        frame: usize,
        /// How much later.
        by: Duration,
    },
    /// The connection of `watch` ends cleanly after `frame` frames; the re-watch, from the
    /// last resourceVersion delivered, gets the rest. Not inside a streaming list's initial
    /// events.
    Cut {
        /// Which watch.
        watch: usize,
        /// How many frames it delivers.
        frame: usize,
    },
    /// The re-watch after `watch` closed is answered `410 Gone`; the relist gets the state
    /// the closed watch left, and a watch from its version the rest.
    ExpireRewatch {
        /// The watch whose re-watch expires.
        watch: usize,
    },
    /// The re-watch after `watch` closed is refused once (then answered as recorded).
    RefuseRewatch {
        /// The watch whose re-watch is refused.
        watch: usize,
        /// How.
        with: Refusal,
    },
    /// Every bookmark of `watch` comes twice.
    DuplicateBookmarks {
        /// Which watch.
        watch: usize,
    },
    /// The bookmarks of `watch` are left out (not the one ending a streaming list, which
    /// the protocol requires).
    DropBookmarks {
        /// Which watch.
        watch: usize,
    },
    /// The list call `list` (the first page of a relist, not the first list) is answered
    /// with the state of `behind` events earlier (a cache that lags: an API server
    /// restarted behind its peers); the watch after it delivers those events again and
    /// whatever else the relist had.
    StaleList {
        /// Which list call.
        list: usize,
        /// How many object events behind.
        behind: usize,
    },
    /// The page of list call `list` comes in pages of `size` items, each fetched with a
    /// `continue` token.
    SplitPages {
        /// Which list call.
        list: usize,
        /// Items a page.
        size: usize,
    },
    /// Frames `frame` and `frame + 1` of `watch`, object events of two different keys, come
    /// in the other order, each with the other's resourceVersion (the two writes happened
    /// the other way round: the API orders nothing across keys).
    ReorderKeys {
        /// Which watch.
        watch: usize,
        /// The first of the two frames.
        frame: usize,
    },
}

impl fmt::Display for Perturbation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Delay { watch, frame, by } => {
                write!(f, "delay watch {watch} from frame {frame} by {by:?}")
            }
            Self::Cut { watch, frame } => write!(f, "cut watch {watch} after {frame} frames"),
            Self::ExpireRewatch { watch } => write!(f, "410 on the re-watch after watch {watch}"),
            Self::RefuseRewatch { watch, with } => {
                write!(f, "{with:?} on the re-watch after watch {watch}")
            }
            Self::DuplicateBookmarks { watch } => write!(f, "duplicate bookmarks of watch {watch}"),
            Self::DropBookmarks { watch } => write!(f, "drop bookmarks of watch {watch}"),
            Self::StaleList { list, behind } => {
                write!(f, "list {list} stale by {behind} events")
            }
            Self::SplitPages { list, size } => write!(f, "list {list} in pages of {size}"),
            Self::ReorderKeys { watch, frame } => {
                write!(f, "swap frames {frame} and {} of watch {watch}", frame + 1)
            }
        }
    }
}

/// Why a perturbation does not apply to a recording.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{perturbation} does not apply: {why}")]
pub struct NotApplicable {
    /// The perturbation.
    pub perturbation: String,
    /// Why.
    pub why: &'static str,
}

fn nth(recording: &Recording, watch: bool, n: usize) -> Option<usize> {
    recording
        .calls
        .iter()
        .enumerate()
        .filter(|(_, c)| matches!(c.request, Request::Watch(_)) == watch)
        .nth(n)
        .map(|(i, _)| i)
}

/// A watch's frames and end, to edit.
type StreamParts<'a> = (&'a mut Vec<Frame>, &'a mut Option<(Duration, End)>);

fn stream(call: &mut Call) -> Option<StreamParts<'_>> {
    match &mut call.answer {
        Answer::Stream { frames, end } => Some((frames, end)),
        _ => None,
    }
}

const MS: Duration = Duration::from_millis(1);

impl Perturbation {
    /// The recording with this change.
    ///
    /// # Errors
    /// [`NotApplicable`] when the recording has no such call or frame, or the change
    /// would not be one a server could make there.
    pub fn apply(&self, recording: &Recording) -> Result<Recording, NotApplicable> {
        let no = |why| NotApplicable {
            perturbation: self.to_string(),
            why,
        };
        let mut out = recording.clone();
        match *self {
            Self::Delay { watch, frame, by } => {
                let i = nth(&out, true, watch).ok_or(no("no such watch"))?;
                let (frames, end) = stream(&mut out.calls[i]).ok_or(no("the watch failed"))?;
                if frame >= frames.len() {
                    return Err(no("no such frame"));
                }
                frames[frame..].iter_mut().for_each(|f| f.at += by);
                if let Some((at, _)) = end {
                    *at += by;
                }
            }
            Self::Cut { watch, frame } => {
                let i = nth(&out, true, watch).ok_or(no("no such watch"))?;
                let call = &mut out.calls[i];
                let (called, from) = match &call.request {
                    Request::Watch(w) => (call.at, w.clone()),
                    Request::List(_) => return Err(no("no such watch")),
                };
                let (frames, end) = stream(call).ok_or(no("the watch failed"))?;
                if frame >= frames.len() {
                    return Err(no("no frame after the cut"));
                }
                if from.send_initial_events
                    && !frames[..frame].iter().any(|f| {
                        matches!(
                            f.event,
                            Event::Bookmark {
                                initial_events_end: true,
                                ..
                            }
                        )
                    })
                {
                    return Err(no("inside a streaming list's initial events"));
                }
                let rest = frames.split_off(frame);
                // A watch that ends within a second of its start (or of a streaming list's
                // end) without an event is an error to a reflector (a very short watch),
                // which relists: cut two seconds after the last frame, so that what
                // follows is the re-watch this promises.
                let cut = frames.last().map_or(called, |f| f.at) + Duration::from_secs(2);
                let rest_end = end.replace((cut, End::Closed));
                let rv = frames
                    .iter()
                    .rev()
                    .find_map(|f| f.event.rv())
                    .map_or(from.resource_version.clone(), str::to_owned);
                let rewatch = Call {
                    at: cut + MS,
                    request: Request::Watch(WatchRequest {
                        resource_version: rv,
                        send_initial_events: false,
                        ..from
                    }),
                    answer: Answer::Stream {
                        frames: rest,
                        end: rest_end,
                    },
                };
                out.calls.insert(i + 1, rewatch);
            }
            Self::ExpireRewatch { watch } | Self::RefuseRewatch { watch, .. } => {
                let i = nth(&out, true, watch).ok_or(no("no such watch"))?;
                if !matches!(
                    out.calls[i].answer,
                    Answer::Stream {
                        end: Some((_, End::Closed)),
                        ..
                    }
                ) {
                    return Err(no("the watch did not close"));
                }
                let next = i + 1;
                let Some(Request::Watch(rewatch)) = out.calls.get(next).map(|c| c.request.clone())
                else {
                    return Err(no("no re-watch follows"));
                };
                let at = out.calls[next].at;
                if let Self::RefuseRewatch { with, .. } = *self {
                    let error = match with {
                        Refusal::TooManyRequests => RecordedError::Api {
                            code: 429,
                            reason: "TooManyRequests".into(),
                            message: "too many requests (kinformer-replay)".into(),
                            causes: Vec::new(),
                        },
                        Refusal::Unreachable => RecordedError::Unreachable {
                            detail: "connection refused (kinformer-replay)".into(),
                        },
                    };
                    out.calls.insert(
                        next,
                        Call {
                            at,
                            request: Request::Watch(rewatch),
                            answer: Answer::Failed { at: at + MS, error },
                        },
                    );
                    return Ok(out);
                }
                let state = out.state_after(next);
                let expired = Call {
                    at,
                    request: Request::Watch(rewatch.clone()),
                    answer: Answer::Stream {
                        frames: vec![Frame::new(at + MS, Event::Error(RecordedError::expired()))],
                        end: Some((at + 2 * MS, End::Closed)),
                    },
                };
                // The relist as the client makes them: a streaming list if it streamed its
                // lists (it closes after its initial events, later than a very short watch,
                // and the client re-watches from its version), else a list.
                let relist = if out
                    .calls
                    .iter()
                    .any(|c| matches!(&c.request, Request::Watch(w) if w.send_initial_events))
                {
                    Call {
                        at: at + 3 * MS,
                        request: Request::Watch(WatchRequest {
                            send_initial_events: true,
                            ..rewatch.clone()
                        }),
                        answer: Answer::Stream {
                            frames: state.initial_events(at + 4 * MS),
                            end: Some((at + 4 * MS + Duration::from_secs(2), End::Closed)),
                        },
                    }
                } else {
                    Call {
                        at: at + 3 * MS,
                        request: Request::List(ListRequest {
                            resource_version: rewatch.resource_version.clone(),
                            limit: Some(500),
                            continue_token: None,
                            exact: false,
                        }),
                        answer: Answer::Page {
                            at: at + 4 * MS,
                            page: state.page(),
                        },
                    }
                };
                if let Request::Watch(w) = &mut out.calls[next].request {
                    w.resource_version.clone_from(&state.rv);
                }
                out.calls.splice(next..next, [expired, relist]);
            }
            Self::DuplicateBookmarks { watch } | Self::DropBookmarks { watch } => {
                let i = nth(&out, true, watch).ok_or(no("no such watch"))?;
                let (frames, _) = stream(&mut out.calls[i]).ok_or(no("the watch failed"))?;
                let plain = |f: &Frame| {
                    matches!(
                        f.event,
                        Event::Bookmark {
                            initial_events_end: false,
                            ..
                        }
                    )
                };
                if !frames.iter().any(plain) {
                    return Err(no("the watch has no bookmark"));
                }
                if matches!(self, Self::DropBookmarks { .. }) {
                    frames.retain(|f| !plain(f));
                } else {
                    *frames = frames
                        .drain(..)
                        .flat_map(|f| {
                            let twice = plain(&f).then(|| f.clone());
                            std::iter::once(f).chain(twice)
                        })
                        .collect();
                }
            }
            Self::StaleList { list, behind } => stale_list(&mut out, list, behind).map_err(no)?,
            Self::SplitPages { list, size } => {
                let i = nth(&out, false, list).ok_or(no("no such list"))?;
                let call = &out.calls[i];
                let (Request::List(request), Answer::Page { at, page }) =
                    (&call.request, &call.answer)
                else {
                    return Err(no("the list failed"));
                };
                if size == 0 || page.items.len() <= size {
                    return Err(no("the page is not larger than that"));
                }
                let (request, at, page) = (request.clone(), *at, page.clone());
                let chunks: Vec<Vec<Item>> =
                    page.items.chunks(size).map(<[Item]>::to_vec).collect();
                let last = chunks.len() - 1;
                let token = |n: usize| format!("kinformer-replay-split-{i}-{n}");
                let calls = chunks.into_iter().enumerate().map(|(n, items)| Call {
                    at: at + MS * u32::try_from(n).unwrap_or(u32::MAX),
                    request: Request::List(if n == 0 {
                        request.clone()
                    } else {
                        ListRequest {
                            resource_version: String::new(),
                            limit: request.limit,
                            continue_token: Some(token(n)),
                            exact: request.exact,
                        }
                    }),
                    answer: Answer::Page {
                        at: at + MS * u32::try_from(n).unwrap_or(u32::MAX),
                        page: Page {
                            resource_version: page.resource_version.clone(),
                            continue_token: if n == last {
                                page.continue_token.clone()
                            } else {
                                Some(token(n + 1))
                            },
                            items,
                            undecodable: if n == last {
                                page.undecodable.clone()
                            } else {
                                Vec::new()
                            },
                        },
                    },
                });
                let calls: Vec<Call> = calls.collect();
                out.calls.splice(i..=i, calls);
            }
            Self::ReorderKeys { watch, frame } => {
                let i = nth(&out, true, watch).ok_or(no("no such watch"))?;
                let (frames, _) = stream(&mut out.calls[i]).ok_or(no("the watch failed"))?;
                let (Some(a), Some(b)) = (
                    frames.get(frame).and_then(|f| f.event.item()),
                    frames.get(frame + 1).and_then(|f| f.event.item()),
                ) else {
                    return Err(no("not two object events there"));
                };
                if a.key == b.key {
                    return Err(no("the two events are of one key"));
                }
                let (rv_a, rv_b) = (a.rv.clone(), b.rv.clone());
                let mut first = frames[frame + 1].event.clone();
                let mut second = frames[frame].event.clone();
                set_rv(&mut first, &rv_a).map_err(|_| no("an object is not a JSON object"))?;
                set_rv(&mut second, &rv_b).map_err(|_| no("an object is not a JSON object"))?;
                frames[frame].event = first;
                frames[frame + 1].event = second;
            }
        }
        Ok(out)
    }
}

/// Sets an object event's resourceVersion, in its key record and in its object.
fn set_rv(event: &mut Event, rv: &str) -> Result<(), serde_json::Error> {
    let (Event::Added(item) | Event::Modified(item) | Event::Deleted(item)) = event else {
        return Ok(());
    };
    let mut value: serde_json::Value = serde_json::from_str(item.object.get())?;
    if let Some(meta) = value.get_mut("metadata").and_then(|m| m.as_object_mut()) {
        meta.insert("resourceVersion".into(), rv.into());
    }
    item.object = serde_json::value::to_raw_value(&value)?;
    rv.clone_into(&mut item.rv);
    Ok(())
}

fn stale_list(out: &mut Recording, list: usize, behind: usize) -> Result<(), &'static str> {
    let i = nth(out, false, list).ok_or("no such list")?;
    let Request::List(request) = &out.calls[i].request else {
        return Err("no such list");
    };
    if request.continue_token.is_some() || request.exact {
        return Err("not the first page of a relist");
    }
    if !out.calls[..i]
        .iter()
        .any(|c| matches!(c.answer, Answer::Page { .. }))
    {
        return Err("the first list is not a relist");
    }
    if behind == 0 {
        return Err("not behind");
    }
    // The relist's pages: this call and the continue pages after it.
    let mut last = i;
    while let Answer::Page { page, .. } = &out.calls[last].answer {
        if page.continue_token.is_none() {
            break;
        }
        last += 1;
        if last >= out.calls.len() {
            return Err("the relist has no last page");
        }
    }
    let Answer::Page { at, .. } = out.calls[last].answer.clone() else {
        return Err("the relist failed");
    };
    // What the relist truly held.
    let truth = {
        let mut f = Follow::default();
        for c in &out.calls[i..=last] {
            let _gone = f.answer(&c.request, &c.answer);
        }
        f.state
    };
    // What the cache held before, and the object events that led there.
    let before = out.state_after(i);
    let events: Vec<Frame> = out.calls[..i]
        .iter()
        .flat_map(|c| match &c.answer {
            Answer::Stream { frames, .. } => frames.clone(),
            _ => Vec::new(),
        })
        .filter(|f| f.event.item().is_some())
        .collect();
    if events.len() < behind {
        return Err("fewer events than that before it");
    }
    let (_, missed) = events.split_at(events.len() - behind);
    // The stale state: the state before with the missed events undone, i.e. followed up to
    // the first missed event.
    let mut follow = Follow::default();
    let first_missed = &missed[0];
    'calls: for c in &out.calls[..i] {
        match &c.answer {
            Answer::Stream { frames, .. } => {
                follow.start(&c.request);
                for f in frames {
                    if f == first_missed {
                        break 'calls;
                    }
                    let _gone = follow.frame(f);
                }
            }
            answer => {
                let _gone = follow.answer(&c.request, answer);
            }
        }
    }
    let stale = follow.state;
    // The next watch delivers the missed events, what else the relist had, then a bookmark
    // at the relist's version.
    let next = (last + 1..out.calls.len())
        .find(|&n| matches!(out.calls[n].request, Request::Watch(_)))
        .ok_or("no watch after the relist")?;
    let watch_at = out.calls[next].at;
    let mut catch_up: Vec<Frame> = missed
        .iter()
        .map(|f| Frame::new(watch_at + MS, f.event.clone()))
        .collect();
    let mut diff: BTreeMap<&str, Event> = BTreeMap::new();
    for (key, item) in &truth.objects {
        if before.objects.get(key) != Some(item) {
            let event = if before.objects.contains_key(key) {
                Event::Modified(item.clone())
            } else {
                Event::Added(item.clone())
            };
            diff.insert(key, event);
        }
    }
    for (key, item) in &before.objects {
        if !truth.objects.contains_key(key) {
            diff.insert(key, Event::Deleted(item.clone()));
        }
    }
    catch_up.extend(diff.into_values().map(|e| Frame::new(watch_at + MS, e)));
    catch_up.push(Frame::new(
        watch_at + MS,
        Event::Bookmark {
            rv: truth.rv.clone(),
            initial_events_end: false,
        },
    ));
    if let Request::Watch(w) = &mut out.calls[next].request {
        w.resource_version.clone_from(&stale.rv);
    }
    if let Some((frames, _)) = stream(&mut out.calls[next]) {
        catch_up.append(frames);
        *frames = catch_up;
    } else {
        return Err("the watch after the relist failed");
    }
    // One page, the stale state.
    let mut page = stale.page();
    page.items.sort_by(|a, b| a.key.cmp(&b.key));
    out.calls[i].answer = Answer::Page { at, page };
    out.calls.drain(i + 1..=last);
    Ok(())
}

/// Every perturbation that applies to `recording`, in a fixed order (what [`Chaos`]
/// picks from).
pub fn candidates(recording: &Recording) -> Vec<Perturbation> {
    let mut all = Vec::new();
    let (mut watches, mut lists) = (0, 0);
    for call in &recording.calls {
        match (&call.request, &call.answer) {
            (Request::Watch(_), Answer::Stream { frames, .. }) => {
                let w = watches;
                for frame in 0..frames.len() {
                    all.push(Perturbation::Cut { watch: w, frame });
                    all.push(Perturbation::ReorderKeys { watch: w, frame });
                    all.push(Perturbation::Delay {
                        watch: w,
                        frame,
                        by: Duration::from_millis(1500),
                    });
                }
                all.push(Perturbation::ExpireRewatch { watch: w });
                all.push(Perturbation::RefuseRewatch {
                    watch: w,
                    with: Refusal::TooManyRequests,
                });
                all.push(Perturbation::RefuseRewatch {
                    watch: w,
                    with: Refusal::Unreachable,
                });
                all.push(Perturbation::DuplicateBookmarks { watch: w });
                all.push(Perturbation::DropBookmarks { watch: w });
            }
            (Request::List(_), Answer::Page { page, .. }) => {
                let l = lists;
                all.push(Perturbation::SplitPages {
                    list: l,
                    size: page.items.len().div_ceil(3).max(1),
                });
                for behind in [1, 3, 10] {
                    all.push(Perturbation::StaleList { list: l, behind });
                }
            }
            _ => {}
        }
        match call.request {
            Request::Watch(_) => watches += 1,
            Request::List(_) => lists += 1,
        }
    }
    all.retain(|p| p.apply(recording).is_ok());
    all
}

/// A seeded random choice of perturbations: the same seed, recording and count always give
/// the same perturbed recording (and, replayed on a paused clock, the same run).
///
/// ```
/// use kinformer_replay::{Chaos, Recording};
/// let recording: Recording = kinformer_replay::synthetic::Churn::new("v1", "Pod").events(200).build();
/// let (perturbed, applied) = Chaos::new(7).perturbations(3).apply(&recording);
/// let (again, applied_again) = Chaos::new(7).perturbations(3).apply(&recording);
/// assert_eq!(applied, applied_again);
/// assert_eq!(perturbed.calls.len(), again.calls.len());
/// ```
#[derive(Clone, Debug)]
pub struct Chaos {
    seed: u64,
    count: usize,
    allow: fn(&Perturbation) -> bool,
}

impl Chaos {
    /// Chaos from `seed`: one perturbation, of any kind.
    pub fn new(seed: u64) -> Self {
        Self {
            seed,
            count: 1,
            allow: |_| true,
        }
    }

    /// Applies `count` perturbations, one after another (each chosen among those that
    /// apply to the recording the previous ones left).
    #[must_use]
    pub fn perturbations(mut self, count: usize) -> Self {
        self.count = count;
        self
    }

    /// Only perturbations for which `allow` says yes (e.g. no `StaleList`, for a check
    /// that the cache never goes back in time).
    #[must_use]
    pub fn only(mut self, allow: fn(&Perturbation) -> bool) -> Self {
        self.allow = allow;
        self
    }

    /// The perturbed recording and what was applied, in order (fewer than asked when none
    /// applies any more).
    pub fn apply(&self, recording: &Recording) -> (Recording, Vec<Perturbation>) {
        let mut rng = fastrand::Rng::with_seed(self.seed);
        let mut current = recording.clone();
        let mut applied = Vec::new();
        for _ in 0..self.count {
            let options: Vec<Perturbation> = candidates(&current)
                .into_iter()
                .filter(|p| (self.allow)(p))
                .collect();
            if options.is_empty() {
                break;
            }
            let p = options[rng.usize(..options.len())].clone();
            if let Ok(next) = p.apply(&current) {
                current = next;
                applied.push(p);
            }
        }
        (current, applied)
    }
}
