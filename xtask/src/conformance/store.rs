//! Store traces: the generator, and the replayer on kinformer-indexer's `ThreadSafeStore`
//! and `Lister`, over k8s-openapi pods (the peer uses client-go's `NewIndexer` over
//! `*corev1.Pod`). Every trace is replayed twice: on a store of decoded pods, and on the
//! default informer cache, a store of `Cached` pods whose index functions read each pod
//! through its view; where the second observes something else than the first, the trace's
//! observations end with an error saying where, so it differs from client-go's.

use std::sync::Arc;

use anyhow::{Context, bail};
use k8s_openapi::api::core::v1::{Container, Pod, PodSpec};
use kinformer_compact_store::Cached;
use kinformer_core::{MetaObject, meta_namespace_key};
use kinformer_indexer::{
    IndexFunc, Indexer, IndexerWriter, Indexers, KnownObjects, Lister, Sink, ThreadSafeStore,
    parse_selector,
};
use serde_json::{Value, json};

use super::{Observations, Rng};

/// The fixed menu of index functions a trace installs by name.
const MENU: [&str; 3] = ["namespace", "by_node", "by_tag"];

/// A pod as a store keeps it: decoded, or cached (read through its view).
trait Stored: MetaObject + Send + Sync + Sized + 'static {
    fn of(pod: Pod) -> Arc<Self>;
    fn node(&self) -> Option<&str>;
    fn tags(&self) -> Vec<String>;
}

impl Stored for Pod {
    fn of(pod: Pod) -> Arc<Self> {
        Arc::new(pod)
    }
    fn node(&self) -> Option<&str> {
        self.spec.as_ref()?.node_name.as_deref()
    }
    fn tags(&self) -> Vec<String> {
        let containers = self.spec.iter().flat_map(|s| &s.containers);
        containers.map(|c| c.name.clone()).collect()
    }
}

impl Stored for Cached<Pod> {
    fn of(pod: Pod) -> Arc<Self> {
        Arc::new(Cached::new(&pod).expect("a pod encodes"))
    }
    fn node(&self) -> Option<&str> {
        self.spec()?.node_name()
    }
    fn tags(&self) -> Vec<String> {
        let spec = self.spec();
        let containers = spec.iter().flat_map(|s| s.containers());
        containers.map(|c| c.name().to_owned()).collect()
    }
}

fn index_func<T: Stored>(name: &str) -> anyhow::Result<IndexFunc<T>> {
    Ok(match name {
        // client-go's MetaNamespaceIndexFunc.
        "namespace" => IndexFunc::namespace(),
        // The reference article's byNode: one value, "" when the pod is not scheduled.
        "by_node" => IndexFunc::single(|p: &T| Some(p.node().unwrap_or(""))),
        // Every container name: zero, one or many values.
        "by_tag" => IndexFunc::new(|p: &T| p.tags()),
        other => bail!("unknown index function {other:?}"),
    })
}

fn indexers<T: Stored>(names: &Value) -> anyhow::Result<Indexers<T>> {
    let mut out = Indexers::new();
    for name in names.as_array().map(Vec::as_slice).unwrap_or_default() {
        let name = name.as_str().context("an index name is not a string")?;
        out.insert(name.to_owned(), index_func(name)?);
    }
    Ok(out)
}

/// The pod a trace's description stands for: tags are its containers' names.
fn pod(d: &Value) -> Pod {
    let s = |k: &str| d[k].as_str().map(str::to_owned);
    let mut p = Pod::default();
    p.metadata.namespace = s("ns");
    p.metadata.name = s("name");
    p.metadata.resource_version = s("rv");
    p.metadata.labels = d["labels"].as_object().map(|m| {
        m.iter()
            .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_owned()))
            .collect()
    });
    p.spec = Some(PodSpec {
        node_name: s("node").filter(|n| !n.is_empty()),
        containers: d["tags"]
            .as_array()
            .map(Vec::as_slice)
            .unwrap_or_default()
            .iter()
            .map(|t| Container {
                name: t.as_str().unwrap_or_default().to_owned(),
                ..Container::default()
            })
            .collect(),
        ..PodSpec::default()
    });
    p
}

/// How an observation shows a stored object: `key@resourceVersion`, the key made as
/// client-go's `MetaNamespaceKeyFunc` makes it.
fn item<T: MetaObject>(p: &T) -> String {
    let name = p.object_name().unwrap_or("");
    let key = match p.object_namespace() {
        Some(ns) if !ns.is_empty() => format!("{ns}/{name}"),
        _ => name.to_owned(),
    };
    format!("{key}@{}", p.object_resource_version().unwrap_or(""))
}

fn items<T: MetaObject>(objs: &[Arc<T>]) -> Value {
    let mut out: Vec<String> = objs.iter().map(|p| item(&**p)).collect();
    out.sort();
    json!(out)
}

fn sorted(mut v: Vec<String>) -> Value {
    v.sort();
    json!(v)
}

/// Replays a store trace on a store of decoded pods, and on one of cached pods.
pub(crate) fn replay(header: &Value, ops: &[Value]) -> anyhow::Result<Observations> {
    let decoded: Arc<dyn IndexerWriter<Pod>> =
        Arc::new(ThreadSafeStore::new(indexers(&header["indexers"])?));
    let mut out = replay_on(&decoded, ops)?;
    let cached: Arc<dyn IndexerWriter<Cached<Pod>>> =
        Arc::new(ThreadSafeStore::new(indexers(&header["indexers"])?));
    let other = replay_on(&cached, ops)?;
    if let Some(i) = (0..out.len().max(other.len())).find(|&i| out.get(i) != other.get(i)) {
        out.push(super::observation([(
            "error",
            json!(format!(
                "the store of Cached pods differs from the store of decoded pods at observation {}: {}",
                i + 1,
                other.get(i).map_or("(none)", String::as_str)
            )),
        )]));
    }
    Ok(out)
}

fn replay_on<T: Stored>(
    store: &Arc<dyn IndexerWriter<T>>,
    ops: &[Value],
) -> anyhow::Result<Observations> {
    let lister = Lister::from_dyn(Arc::clone(store) as Arc<dyn Indexer<T>>);
    let mut out = Vec::new();
    for (i, op) in ops.iter().enumerate() {
        let name = op["op"].as_str().unwrap_or_default();
        let s = |k: &str| op[k].as_str().unwrap_or_default();
        let mut obs = vec![("n", json!(i + 1)), ("op", json!(name))];
        let found = |obs: &mut Vec<_>, got: Option<Arc<T>>| {
            obs.push(("found", json!(got.is_some())));
            if let Some(p) = got {
                obs.push(("item", json!(item(&*p))));
            }
        };
        match name {
            "add" | "update" | "delete" => {
                let p = T::of(pod(&op["obj"]));
                let result = match name {
                    "add" => store.add(p),
                    "update" => store.update(p),
                    _ => store.delete(p),
                };
                obs.push(("error", json!(result.is_err())));
                obs.push(("rv", json!(store.last_sync_resource_version())));
            }
            "replace" => {
                let list = op["objs"]
                    .as_array()
                    .map(Vec::as_slice)
                    .unwrap_or_default()
                    .iter()
                    .map(|d| T::of(pod(d)))
                    .collect();
                let result = store.replace(kinformer_core::ListPart::whole(list, s("rv")));
                obs.push(("error", json!(result.is_err())));
                obs.push(("rv", json!(store.last_sync_resource_version())));
            }
            "bookmark" => {
                Sink::bookmark(&**store, s("rv"))?;
                obs.push(("rv", json!(store.last_sync_resource_version())));
            }
            "last_sync_resource_version" => {
                obs.push(("rv", json!(store.last_sync_resource_version())));
            }
            // ThreadSafeStore::get: the key from the object, then the lookup.
            "get" => {
                match meta_namespace_key(&pod(&op["obj"])).map(|k| store.get_by_key(k.as_str())) {
                    Ok(got) => found(&mut obs, got),
                    Err(_) => obs.push(("error", json!(true))),
                }
            }
            "get_by_key" => found(&mut obs, store.get_by_key(s("key"))),
            "list_keys" => {
                let keys = store.list_keys().iter().map(|k| k.to_string()).collect();
                obs.push(("keys", sorted(keys)));
            }
            "list" => obs.push(("items", items(&store.list()))),
            "by_index" => match store.by_index(s("index"), s("value")) {
                Ok(objs) => obs.extend([("error", json!(false)), ("items", items(&objs))]),
                Err(_) => obs.push(("error", json!(true))),
            },
            "index_keys" => match store.index_keys(s("index"), s("value")) {
                Ok(keys) => {
                    let keys = keys.iter().map(|k| k.to_string()).collect();
                    obs.extend([("error", json!(false)), ("keys", sorted(keys))]);
                }
                Err(_) => obs.push(("error", json!(true))),
            },
            "index" => match store.index(s("index"), &T::of(pod(&op["obj"]))) {
                Ok(objs) => obs.extend([("error", json!(false)), ("items", items(&objs))]),
                Err(_) => obs.push(("error", json!(true))),
            },
            "list_index_func_values" => {
                obs.push(("values", sorted(store.list_index_func_values(s("index")))));
            }
            "get_indexers" => {
                let names = store.get_indexers().into_keys().collect();
                obs.push(("names", sorted(names)));
            }
            "add_indexers" => {
                let more = indexers(&op["names"]).with_context(|| format!("op {}", i + 1))?;
                obs.push(("error", json!(store.add_indexers(more).is_err())));
            }
            "lister_list" => {
                let selector = parse_selector(s("selector"))
                    .with_context(|| format!("op {}: selector {:?}", i + 1, s("selector")))?;
                let objs = match op["ns"].as_str() {
                    None => lister.list(&selector),
                    Some(ns) => lister.namespaced(ns).list(&selector),
                };
                obs.extend([("error", json!(false)), ("items", items(&objs))]);
            }
            "lister_get" => {
                let got = match op["ns"].as_str() {
                    None => lister.get(s("name")),
                    Some(ns) => lister.namespaced(ns).get(s("name")),
                };
                match got {
                    Ok(p) => found(&mut obs, Some(p)),
                    Err(e) if e.is_not_found() => found(&mut obs, None),
                    Err(_) => obs.push(("error", json!(true))),
                }
            }
            other => bail!("op {}: unknown op {other:?}", i + 1),
        }
        out.push(super::observation(obs));
    }
    Ok(out)
}

/// Eight pods: three namespaces (`p1` in two of them) and one cluster-scoped name.
const IDS: [(&str, &str); 8] = [
    ("a", "p1"),
    ("a", "p2"),
    ("a", "p3"),
    ("b", "p1"),
    ("b", "p4"),
    ("c", "p5"),
    ("c", "p6"),
    ("", "p7"),
];
const NODES: [&str; 4] = ["n1", "n2", "n3", ""];
const TAGS: [&str; 3] = ["x", "y", "z"];
const SELECTORS: [&str; 8] = [
    "",
    "app=web",
    "app==db",
    "app!=web",
    "tier in (front)",
    "!tier",
    "app,tier notin (back)",
    "app in (web,db),tier",
];

/// A random pod description; each written version gets the next resource version (one
/// in ten has none).
fn desc(rng: &mut Rng, rv: &mut u64) -> Value {
    let (ns, name) = *rng.pick(&IDS);
    let mut d = json!({ "name": name });
    // A cluster-scoped pod has `"ns": ""` or no `ns`.
    if !ns.is_empty() || rng.below(2) == 0 {
        d["ns"] = json!(ns);
    }
    let node = *rng.pick(&NODES);
    if !node.is_empty() || rng.below(2) == 0 {
        d["node"] = json!(node);
    }
    let tags: Vec<&str> = (0..rng.below(4)).map(|_| *rng.pick(&TAGS)).collect();
    if !tags.is_empty() || rng.below(2) == 0 {
        d["tags"] = json!(tags);
    }
    let mut labels = serde_json::Map::new();
    if rng.below(3) != 0 {
        labels.insert("app".into(), json!(*rng.pick(&["web", "db"])));
    }
    if rng.below(2) == 0 {
        labels.insert("tier".into(), json!(*rng.pick(&["front", "back"])));
    }
    if !labels.is_empty() || rng.below(2) == 0 {
        d["labels"] = Value::Object(labels);
    }
    *rv += 1;
    if rng.below(10) != 0 {
        d["rv"] = json!(rv.to_string());
    }
    d
}

/// A value worth looking up in `index`: mostly one that objects can have.
fn value_for(rng: &mut Rng, index: &str) -> &'static str {
    let values: &[&'static str] = match index {
        "namespace" => &["a", "b", "c", "", "d"],
        "by_node" => &["n1", "n2", "n3", "", "n4"],
        "by_tag" => &["x", "y", "z", "w", ""],
        _ => &["a", "n1", "x"],
    };
    let picked: &&'static str = rng.pick(values);
    picked
}

/// A random trace for `seed`: a store with a random subset of the index functions, then
/// 30-90 operations over eight pods in three namespaces (and one cluster-scoped) on three
/// nodes.
pub(crate) fn generate(seed: u64) -> String {
    let mut rng = Rng::new(seed);
    let installed: Vec<&str> = MENU.iter().copied().filter(|_| rng.below(3) != 0).collect();
    let header = json!({ "trace": "store", "indexers": installed, "seed": seed });
    let mut lines = vec![header.to_string()];
    let mut rv = 0;
    let index_names = ["namespace", "by_node", "by_tag", "nope"];
    for _ in 0..30 + rng.below(61) {
        let index = *rng.pick(&index_names);
        let op = match rng.below(100) {
            0..=19 => json!({ "op": "add", "obj": desc(&mut rng, &mut rv) }),
            20..=29 => json!({ "op": "update", "obj": desc(&mut rng, &mut rv) }),
            30..=39 => json!({ "op": "delete", "obj": desc(&mut rng, &mut rv) }),
            40..=46 => {
                let (ns, name) = *rng.pick(&IDS);
                let key = match rng.below(8) {
                    0 => "d/p1".to_owned(),
                    1 => format!("/{name}"),
                    _ if ns.is_empty() => name.to_owned(),
                    _ => format!("{ns}/{name}"),
                };
                json!({ "op": "get_by_key", "key": key })
            }
            47..=49 => json!({ "op": "get", "obj": desc(&mut rng, &mut rv) }),
            50..=52 => json!({ "op": "list_keys" }),
            53..=55 => json!({ "op": "list" }),
            56..=64 => {
                json!({ "op": "by_index", "index": index, "value": value_for(&mut rng, index) })
            }
            65..=69 => {
                json!({ "op": "index_keys", "index": index, "value": value_for(&mut rng, index) })
            }
            70..=73 => json!({ "op": "index", "index": index, "obj": desc(&mut rng, &mut rv) }),
            74..=78 => json!({ "op": "list_index_func_values", "index": index }),
            79..=80 => {
                let objs: Vec<Value> = (0..rng.below(7)).map(|_| desc(&mut rng, &mut rv)).collect();
                rv += 1;
                json!({ "op": "replace", "objs": objs, "rv": rv.to_string() })
            }
            81..=83 => {
                let names: Vec<&str> = (0..rng.below(3)).map(|_| *rng.pick(&MENU)).collect();
                json!({ "op": "add_indexers", "names": names })
            }
            84 => {
                rv += 1;
                json!({ "op": "bookmark", "rv": rv.to_string() })
            }
            85 => json!({ "op": "last_sync_resource_version" }),
            86 => json!({ "op": "get_indexers" }),
            87..=93 => {
                let mut op = json!({ "op": "lister_list", "selector": *rng.pick(&SELECTORS) });
                if rng.below(4) != 0 {
                    op["ns"] = json!(*rng.pick(&["a", "b", "c", "", "d"]));
                }
                op
            }
            _ => {
                let (ns, name) = *rng.pick(&IDS);
                let mut op = json!({ "op": "lister_get", "name": name });
                match rng.below(4) {
                    0 => {}
                    1 => op["ns"] = json!(*rng.pick(&["a", "b", "c", ""])),
                    _ => op["ns"] = json!(ns),
                }
                op
            }
        };
        lines.push(op.to_string());
    }
    lines.join("\n") + "\n"
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_traces_replay_with_one_observation_per_op() {
        for seed in 1..=50 {
            let text = generate(seed);
            let mut lines = text.lines();
            let header: Value = serde_json::from_str(lines.next().unwrap()).unwrap();
            let ops: Vec<Value> = lines.map(|l| serde_json::from_str(l).unwrap()).collect();
            assert!(
                (30..=90).contains(&ops.len()),
                "seed {seed}: {} ops",
                ops.len()
            );
            let observed = replay(&header, &ops).unwrap();
            assert_eq!(observed.len(), ops.len(), "seed {seed}");
        }
    }

    #[test]
    fn pods_are_built_from_their_descriptions() {
        let p = pod(&json!({
            "ns": "a", "name": "p1", "node": "n1", "tags": ["x", "y"],
            "labels": { "app": "web" }, "rv": "5"
        }));
        assert_eq!(item(&p), "a/p1@5");
        assert_eq!(index_func("by_node").unwrap().values(&p).unwrap(), ["n1"]);
        assert_eq!(
            index_func("by_tag").unwrap().values(&p).unwrap(),
            ["x", "y"]
        );
        let bare = pod(&json!({ "name": "p7" }));
        assert_eq!(item(&bare), "p7@");
        assert_eq!(index_func("by_node").unwrap().values(&bare).unwrap(), [""]);
        assert_eq!(
            index_func("namespace").unwrap().values(&bare).unwrap(),
            [""]
        );
        assert!(
            index_func("by_tag")
                .unwrap()
                .values(&bare)
                .unwrap()
                .is_empty()
        );
    }
}
