//! The server's state as a recording tells it: which objects exist at which version after
//! each answer. What a [`Replay`](crate::Replay) answers from once its script is used up,
//! what perturbations compute stale lists and relists from, and what the checks compare a
//! cache with.

use std::collections::BTreeMap;

use crate::format::{Answer, Event, Frame, Item, Page, Recording, Request};

/// The objects the server holds, by key, and the resourceVersion they were seen at.
#[derive(Clone, Debug, Default, PartialEq)]
#[non_exhaustive]
pub struct State {
    /// Every object, by key.
    pub objects: BTreeMap<String, Item>,
    /// The resourceVersion this state is at (a list's, an event's or a bookmark's).
    pub rv: String,
}

impl State {
    /// Applies one watch event (errors change nothing).
    pub fn apply(&mut self, event: &Event) {
        match event {
            Event::Added(i) | Event::Modified(i) => {
                self.objects.insert(i.key.clone(), i.clone());
            }
            Event::Deleted(i) => {
                self.objects.remove(&i.key);
            }
            Event::Bookmark { .. } | Event::Error(_) => {}
        }
        if let Some(rv) = event.rv() {
            self.rv = rv.to_owned();
        }
    }

    /// The key → resourceVersion of every object.
    pub fn versions(&self) -> BTreeMap<String, String> {
        self.objects
            .iter()
            .map(|(k, i)| (k.clone(), i.rv.clone()))
            .collect()
    }

    /// A streaming list of this state: an `ADDED` per object, then the bookmark that ends
    /// the initial events, all at `at`.
    pub(crate) fn initial_events(&self, at: std::time::Duration) -> Vec<Frame> {
        self.objects
            .values()
            .map(|i| Frame::new(at, Event::Added(i.clone())))
            .chain(std::iter::once(Frame::new(
                at,
                Event::Bookmark {
                    rv: self.rv.clone(),
                    initial_events_end: true,
                },
            )))
            .collect()
    }

    /// A page of every object at this state's version.
    pub(crate) fn page(&self) -> Page {
        Page {
            resource_version: self.rv.clone(),
            continue_token: None,
            items: self.objects.values().cloned().collect(),
            undecodable: Vec::new(),
        }
    }
}

/// Follows a recording's answers in order: pages of a paged list are gathered and replace
/// the state at the last one; a streaming list's initial events are gathered and replace it
/// at the bookmark that ends them; other events apply as they come.
#[derive(Clone, Debug, Default)]
pub(crate) struct Follow {
    pub(crate) state: State,
    /// The pages of a list not yet ended.
    gathering: Vec<Item>,
    /// The initial events of a streaming list not yet ended.
    initial: Option<Vec<Item>>,
}

impl Follow {
    /// Replaces the state with `items` at `rv`; the keys that left.
    fn replace(&mut self, items: Vec<Item>, rv: &str) -> Vec<String> {
        let objects: BTreeMap<String, Item> =
            items.into_iter().map(|i| (i.key.clone(), i)).collect();
        let gone = self
            .state
            .objects
            .keys()
            .filter(|k| !objects.contains_key(*k))
            .cloned()
            .collect();
        self.state.objects = objects;
        rv.clone_into(&mut self.state.rv);
        gone
    }

    /// A page; the keys that left (when it ends a list).
    pub(crate) fn page(&mut self, page: &Page) -> Vec<String> {
        self.gathering.extend(page.items.iter().cloned());
        if page.continue_token.is_some() {
            return Vec::new();
        }
        let items = std::mem::take(&mut self.gathering);
        self.replace(items, &page.resource_version)
    }

    /// A watch starts: a streaming list gathers its initial events.
    pub(crate) fn start(&mut self, request: &Request) {
        self.initial = matches!(request, Request::Watch(w) if w.send_initial_events).then(Vec::new);
    }

    /// A frame; the keys that left.
    pub(crate) fn frame(&mut self, frame: &Frame) -> Vec<String> {
        if let Some(initial) = &mut self.initial {
            match &frame.event {
                Event::Added(i) | Event::Modified(i) => initial.push(i.clone()),
                Event::Deleted(i) => initial.retain(|o| o.key != i.key),
                Event::Bookmark {
                    rv,
                    initial_events_end: true,
                } => {
                    let items = self.initial.take().unwrap_or_default();
                    return self.replace(items, rv);
                }
                Event::Bookmark { .. } | Event::Error(_) => {}
            }
            return Vec::new();
        }
        let gone = match &frame.event {
            Event::Deleted(i) if self.state.objects.contains_key(&i.key) => vec![i.key.clone()],
            _ => Vec::new(),
        };
        self.state.apply(&frame.event);
        gone
    }

    /// A whole answer; the keys that left.
    pub(crate) fn answer(&mut self, request: &Request, answer: &Answer) -> Vec<String> {
        match answer {
            Answer::Page { page, .. } => {
                // A list at an exact version lists shards gained: added to what is held.
                if matches!(request, Request::List(r) if r.exact) {
                    for i in &page.items {
                        self.state.objects.insert(i.key.clone(), i.clone());
                    }
                    Vec::new()
                } else {
                    self.page(page)
                }
            }
            Answer::Stream { frames, .. } => {
                self.start(request);
                frames.iter().flat_map(|f| self.frame(f)).collect()
            }
            Answer::Failed { .. } | Answer::Pending => Vec::new(),
        }
    }
}

impl Recording {
    /// The server's state after every answer of the recording, in call order: what a cache
    /// that followed it all holds at the end.
    pub fn final_state(&self) -> State {
        self.state_after(self.calls.len())
    }

    /// The state after the answers of the first `calls` calls.
    pub fn state_after(&self, calls: usize) -> State {
        let mut follow = Follow::default();
        for call in self.calls.iter().take(calls) {
            let _gone = follow.answer(&call.request, &call.answer);
        }
        follow.state
    }

    /// Every `DELETED` event of the recording, as (key, resourceVersion), in order.
    pub fn deletions(&self) -> Vec<(String, String)> {
        self.frames()
            .filter_map(|f| match &f.event {
                Event::Deleted(i) => Some((i.key.clone(), i.rv.clone())),
                _ => None,
            })
            .collect()
    }

    /// Every watch frame of the recording, call by call.
    pub fn frames(&self) -> impl Iterator<Item = &Frame> {
        self.calls.iter().flat_map(|c| match &c.answer {
            Answer::Stream { frames, .. } => frames.as_slice(),
            _ => &[],
        })
    }

    /// How long the recording lasts: its last call, page, frame or end.
    pub fn span(&self) -> std::time::Duration {
        self.calls
            .iter()
            .flat_map(|c| {
                let answered = match &c.answer {
                    Answer::Page { at, .. } | Answer::Failed { at, .. } => vec![*at],
                    Answer::Stream { frames, end } => frames
                        .iter()
                        .map(|f| f.at)
                        .chain(end.iter().map(|(at, _)| *at))
                        .collect(),
                    Answer::Pending => Vec::new(),
                };
                std::iter::once(c.at).chain(answered)
            })
            .max()
            .unwrap_or_default()
    }

    /// How many object events (`ADDED`, `MODIFIED`, `DELETED`) its watches carried.
    pub fn event_count(&self) -> usize {
        self.frames().filter(|f| f.event.item().is_some()).count()
    }
}
