//! A sink that keeps the state it was given and a log of every call.

use std::any::Any;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};

use kinformer_core::{Error as SinkError, ListPart, Listed, MetaObject, Sink, meta_namespace_key};

/// One call the reflector made on the sink.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Call {
    Add(String),
    Update(String),
    Delete(String),
    Replace { keys: BTreeSet<String>, rv: String },
    Resync,
    Bookmark(String),
}

type Stored = Arc<dyn Any + Send + Sync>;

#[derive(Default)]
struct State {
    /// key -> resourceVersion: what a store fed by this sink would hold.
    objects: BTreeMap<String, String>,
    /// key -> the object itself.
    stored: BTreeMap<String, Stored>,
    /// Every call, with the resourceVersion of its object ("" for calls without one).
    log: Vec<(Call, String)>,
    /// The parts of a list until it ends: key, resourceVersion, object.
    pending: Vec<(String, String, Stored)>,
}

/// A sink that applies what it gets to a map (replace = the list, as a store does) and
/// logs every call.
#[derive(Default)]
pub struct StateSink {
    state: Mutex<State>,
}

impl StateSink {
    pub fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }

    fn with<R>(&self, f: impl FnOnce(&mut State) -> R) -> R {
        f(&mut self.state.lock().unwrap())
    }

    pub fn objects(&self) -> BTreeMap<String, String> {
        self.with(|s| s.objects.clone())
    }

    pub fn keys(&self) -> BTreeSet<String> {
        self.with(|s| s.objects.keys().cloned().collect())
    }

    pub fn log(&self) -> Vec<Call> {
        self.with(|s| s.log.iter().map(|(c, _)| c.clone()).collect())
    }

    /// The objects held, as the `K`s the reflector gave (objects of another type are
    /// left out).
    pub fn stored<K: Send + Sync + 'static>(&self) -> BTreeMap<String, Arc<K>> {
        self.with(|s| {
            s.stored
                .iter()
                .filter_map(|(k, o)| Some((k.clone(), Arc::clone(o).downcast::<K>().ok()?)))
                .collect()
        })
    }

    /// What a store's handlers would be told, as `(call, resourceVersion)`, from the
    /// `n`th replace on (1 = the initial list's): adds, updates and deletes with their object's resourceVersion,
    /// replaces with their keys. Bookmarks and resyncs, and the RV a replace is at, depend
    /// on timing and are left out.
    pub fn changes_since_replace(&self, n: usize) -> Vec<(Call, String)> {
        self.with(|s| {
            let mut replaces = 0;
            s.log
                .iter()
                .skip_while(|(c, _)| {
                    if matches!(c, Call::Replace { .. }) {
                        replaces += 1;
                    }
                    replaces < n
                })
                .filter_map(|(c, rv)| match c {
                    Call::Bookmark(_) | Call::Resync => None,
                    Call::Replace { keys, .. } => Some((
                        Call::Replace {
                            keys: keys.clone(),
                            rv: String::new(),
                        },
                        String::new(),
                    )),
                    other => Some((other.clone(), rv.clone())),
                })
                .collect()
        })
    }

    /// What `pick` takes out of the log's calls, in order.
    fn picked<T, C: FromIterator<T>>(&self, pick: impl FnMut(Call) -> Option<T>) -> C {
        self.log().into_iter().filter_map(pick).collect()
    }

    pub fn replaces(&self) -> Vec<(BTreeSet<String>, String)> {
        self.picked(|c| match c {
            Call::Replace { keys, rv } => Some((keys, rv)),
            _ => None,
        })
    }

    pub fn deletes(&self) -> BTreeSet<String> {
        self.picked(|c| match c {
            Call::Delete(k) => Some(k),
            _ => None,
        })
    }

    pub fn adds(&self) -> BTreeSet<String> {
        self.picked(|c| match c {
            Call::Add(k) => Some(k),
            _ => None,
        })
    }

    /// An add or an update: the object is stored, the call logged as `call`.
    fn store<K: MetaObject + Send + Sync + 'static>(
        &self,
        o: Arc<K>,
        call: fn(String) -> Call,
    ) -> Result<(), SinkError> {
        let k = key(&*o)?;
        let v = rv(&*o);
        self.with(|s| {
            s.objects.insert(k.clone(), v.clone());
            s.stored.insert(k.clone(), o);
            s.log.push((call(k), v));
        });
        Ok(())
    }
}

/// The object's `namespace/name`.
pub fn key<K: MetaObject>(o: &K) -> Result<String, SinkError> {
    Ok(meta_namespace_key(o)?.as_str().to_owned())
}

/// The object's resourceVersion ("" when it has none).
pub fn rv<K: MetaObject>(o: &K) -> String {
    o.object_resource_version().unwrap_or_default().to_owned()
}

impl<K: MetaObject + Send + Sync + 'static> Sink<K> for StateSink {
    fn add(&self, o: Arc<K>) -> Result<(), SinkError> {
        self.store(o, Call::Add)
    }
    fn update(&self, o: Arc<K>) -> Result<(), SinkError> {
        self.store(o, Call::Update)
    }
    fn delete(&self, o: Arc<K>) -> Result<(), SinkError> {
        let k = key(&*o)?;
        let v = rv(&*o);
        self.with(|s| {
            s.objects.remove(&k);
            s.stored.remove(&k);
            s.log.push((Call::Delete(k), v));
        });
        Ok(())
    }
    /// A store's replace, once the list's last part came (a bare reflector has no cache, so
    /// every object comes as itself).
    fn replace(&self, part: ListPart<K>) -> Result<(), SinkError> {
        let mut items = Vec::with_capacity(part.items.len());
        for o in Listed::objects(part.items) {
            items.push((key(&*o)?, rv(&*o), o as Stored));
        }
        self.with(|s| {
            if part.starts {
                s.pending.clear();
            }
            s.pending.extend(items);
            let Some(rv_) = part.end else {
                return;
            };
            let mut objects = BTreeMap::new();
            let mut stored = BTreeMap::new();
            for (k, v, o) in std::mem::take(&mut s.pending) {
                objects.insert(k.clone(), v);
                stored.insert(k, o);
            }
            let keys = objects.keys().cloned().collect();
            s.objects = objects;
            s.stored = stored;
            s.log.push((Call::Replace { keys, rv: rv_ }, String::new()));
        });
        Ok(())
    }
    fn resync(&self) -> Result<(), SinkError> {
        self.with(|s| s.log.push((Call::Resync, String::new())));
        Ok(())
    }
    fn bookmark(&self, rv_: &str) -> Result<(), SinkError> {
        self.with(|s| s.log.push((Call::Bookmark(rv_.to_owned()), String::new())));
        Ok(())
    }
}
