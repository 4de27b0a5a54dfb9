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
/// the state at the last one; events apply as they come.
#[derive(Clone, Debug, Default)]
pub(crate) struct Follow {
    pub(crate) state: State,
    /// The pages of a list not yet ended.
    gathering: Vec<Item>,
}

impl Follow {
    pub(crate) fn page(&mut self, page: &Page) {
        self.gathering.extend(page.items.iter().cloned());
        if page.continue_token.is_none() {
            self.state.objects = std::mem::take(&mut self.gathering)
                .into_iter()
                .map(|i| (i.key.clone(), i))
                .collect();
            self.state.rv.clone_from(&page.resource_version);
        }
    }

    pub(crate) fn frame(&mut self, frame: &Frame) {
        self.state.apply(&frame.event);
    }

    pub(crate) fn answer(&mut self, request: &Request, answer: &Answer) {
        match answer {
            Answer::Page { page, .. } => {
                // A list at an exact version lists shards gained: added to what is held.
                if matches!(request, Request::List(r) if r.exact) {
                    for i in &page.items {
                        self.state.objects.insert(i.key.clone(), i.clone());
                    }
                } else {
                    self.page(page);
                }
            }
            Answer::Stream { frames, .. } => frames.iter().for_each(|f| self.frame(f)),
            Answer::Failed { .. } | Answer::Pending => {}
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
            follow.answer(&call.request, &call.answer);
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
